-- Schedules (LangGraph Server's crons): each due time creates one normal run. The scheduler of
-- every replica takes due rows with FOR UPDATE SKIP LOCKED, queues the run and advances
-- next_run_at in one transaction, so a due time fires once across replicas.
CREATE TABLE crons (
    cron_id      uuid PRIMARY KEY,
    assistant_id text NOT NULL,
    -- NULL: each firing runs on a new thread. Deleting the thread deletes its schedules.
    thread_id    text REFERENCES threads (thread_id) ON DELETE CASCADE,
    schedule     text NOT NULL,                 -- 5 fields (or 6, seconds first)
    timezone     text,                          -- IANA name; NULL: UTC
    payload      jsonb NOT NULL,                -- what the SDK sent: input, config, metadata...
    kwargs       jsonb NOT NULL,                -- the runs' kwargs, checked at creation
    metadata     jsonb NOT NULL DEFAULT '{}',   -- the schedule's metadata, given to its runs
    multitask_strategy text NOT NULL DEFAULT 'enqueue',
    on_run_completed text NOT NULL DEFAULT 'delete',
    owner        text,                          -- who created it (NULL: no authentication)
    user_id      text,
    enabled      boolean NOT NULL DEFAULT true,
    end_time     timestamptz,
    next_run_at  timestamptz,                   -- NULL: no due time left (past end_time)
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX crons_due_idx ON crons (next_run_at) WHERE enabled AND next_run_at IS NOT NULL;
CREATE INDEX crons_owner_idx ON crons (owner, created_at DESC);
