-- Who owns what (issue: authentication and tenants). NULL: created without authentication.
ALTER TABLE threads ADD COLUMN owner text;
CREATE INDEX threads_owner_idx ON threads (owner, updated_at DESC);

-- Built-in API keys: only a hash of each key is kept (the key itself is shown once, at creation).
CREATE TABLE api_keys (
    key_id      text PRIMARY KEY,            -- the key's public prefix, shown by `keys list`
    key_hash    text NOT NULL UNIQUE,        -- sha256 of the whole key, hex
    identity    text NOT NULL,
    permissions jsonb NOT NULL DEFAULT '[]',
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz
);
