-- Assistants (LangGraph Server's): a served graph with its own config, context and metadata,
-- versioned. Every served graph has a default one, created at start-up with the id
-- uuid5(NAMESPACE_GRAPH, graph_id) (api/assistant_config.py), shared by every tenant.
CREATE TABLE assistants (
    assistant_id uuid PRIMARY KEY,
    graph_id     text NOT NULL,
    name         text NOT NULL,
    description  text,
    config       jsonb NOT NULL DEFAULT '{}',
    context      jsonb NOT NULL DEFAULT '{}',
    metadata     jsonb NOT NULL DEFAULT '{}',
    version      integer NOT NULL DEFAULT 1,    -- the version it is at (set_latest moves it)
    owner        text,                          -- who created it (NULL: no authentication)
    system       boolean NOT NULL DEFAULT false, -- a served graph's default: every tenant's
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX assistants_owner_idx ON assistants (owner, created_at DESC);
CREATE INDEX assistants_graph_idx ON assistants (graph_id, created_at DESC);

-- Every version an assistant had: the one it is at is a copy of its row.
CREATE TABLE assistant_versions (
    assistant_id uuid NOT NULL REFERENCES assistants (assistant_id) ON DELETE CASCADE,
    version      integer NOT NULL,
    graph_id     text NOT NULL,
    name         text NOT NULL,
    description  text,
    config       jsonb NOT NULL DEFAULT '{}',
    context      jsonb NOT NULL DEFAULT '{}',
    metadata     jsonb NOT NULL DEFAULT '{}',
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (assistant_id, version)
);

-- A run executes its graph (runs.graph_id); runs.assistant_id names the assistant it was created
-- with. Runs before assistants were stored named their graph as their assistant.
ALTER TABLE runs ADD COLUMN graph_id text;
UPDATE runs SET graph_id = assistant_id;
ALTER TABLE runs ALTER COLUMN graph_id SET NOT NULL;
-- Deleting an assistant cancels its active runs.
CREATE INDEX runs_assistant_active_idx ON runs (assistant_id) WHERE status IN ('pending', 'running');
