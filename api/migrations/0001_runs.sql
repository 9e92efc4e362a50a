-- threadline's own tables. LangGraph's checkpoint tables are created by AsyncPostgresSaver.setup().

CREATE TABLE threads (
    thread_id   text PRIMARY KEY,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    metadata    jsonb NOT NULL DEFAULT '{}',
    status      text NOT NULL DEFAULT 'idle',   -- idle | busy | interrupted | error
    config      jsonb NOT NULL DEFAULT '{}',
    state_values jsonb                          -- last known state values (search, display)
);
CREATE INDEX threads_status_idx ON threads (status, updated_at DESC);

CREATE TABLE runs (
    run_id          uuid PRIMARY KEY,
    thread_id       text NOT NULL REFERENCES threads (thread_id) ON DELETE CASCADE,
    assistant_id    text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    -- pending | running | success | error | interrupted | timeout
    status          text NOT NULL DEFAULT 'pending',
    kwargs          jsonb NOT NULL,                 -- input, command, config, stream_mode, ...
    metadata        jsonb NOT NULL DEFAULT '{}',
    multitask_strategy text NOT NULL DEFAULT 'reject',
    attempt         integer NOT NULL DEFAULT 0,
    worker_id       text,
    lease_until     timestamptz,
    cancel_requested boolean NOT NULL DEFAULT false,
    error           text,
    final_status    text                            -- the agent's own status, if it has one
);
CREATE INDEX runs_thread_idx ON runs (thread_id, created_at);
CREATE INDEX runs_claimable_idx ON runs (created_at) WHERE status IN ('pending', 'running');

CREATE TABLE run_events (
    run_id     uuid NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
    seq        bigint NOT NULL,
    event      text NOT NULL,
    data       jsonb NOT NULL,
    attempt    integer NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, seq)
);

CREATE TABLE audit_log (
    id          bigserial PRIMARY KEY,
    thread_id   text NOT NULL,
    run_id      uuid,
    kind        text NOT NULL,        -- tool | decision
    tool        text,
    tool_call_id text,
    idempotency_key text,
    attempt     integer,
    detail      jsonb NOT NULL DEFAULT '{}',
    actor       text,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX audit_thread_idx ON audit_log (thread_id, id);

CREATE TABLE approvals (
    thread_id    text NOT NULL,
    interrupt_id text NOT NULL,
    decision     jsonb NOT NULL,
    run_id       uuid,
    actor        text,
    decided_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (thread_id, interrupt_id)
);
