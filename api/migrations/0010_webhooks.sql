-- Run webhooks (LangGraph Server's run ``webhook``): an outbox. A run's end inserts its row in the
-- statement that ends it (api/store/run_end.py), so no end is without its webhook, crash or not.
-- Each replica's delivery loop (api/webhooks.py) takes due rows with FOR UPDATE SKIP LOCKED and a
-- lease, POSTs them, and deletes a row once answered 2xx; a failed one is retried later, then kept
-- as 'failed'. No foreign key: a run removed meanwhile (a rollback, a threadless run's thread)
-- still gets its webhook.
CREATE TABLE webhooks (
    id              bigserial PRIMARY KEY,
    run_id          uuid NOT NULL UNIQUE,
    url             text NOT NULL,
    run             jsonb NOT NULL,                 -- the run's row as it ended
    outcome         jsonb NOT NULL,                 -- {"values": ..., "error": ...} (api/webhook_payload.py)
    run_started_at  timestamptz,                    -- its last attempt's start
    run_ended_at    timestamptz NOT NULL DEFAULT now(),
    status          text NOT NULL DEFAULT 'pending', -- pending | failed (a delivered one is deleted)
    attempts        integer NOT NULL DEFAULT 0,     -- deliveries started (the lease's fence)
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    lease_until     timestamptz,                    -- a delivery in progress, until then
    last_error      text,
    updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhooks_due_idx ON webhooks (next_attempt_at) WHERE status = 'pending';
