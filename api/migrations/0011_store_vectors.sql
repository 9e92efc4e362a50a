-- The semantic index of the long-term memory store where PostgreSQL has no pgvector
-- (api/exact_scan.py, api/store/vectors.py): one vector per embedded field of an item of
-- LangGraph's `store` table, as its own `store_vectors` holds them with pgvector. No foreign key:
-- `store` is made by LangGraph's setup(), after these migrations; the exact-scan store deletes an
-- item's vectors with it, and those of items its TTL sweeper deleted after each sweep.
CREATE TABLE IF NOT EXISTS threadline_store_vectors (
    prefix text NOT NULL,
    key text NOT NULL,
    field_name text NOT NULL,
    embedding real[] NOT NULL,
    norm double precision NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (prefix, key, field_name)
);
