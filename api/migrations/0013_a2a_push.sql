-- A2A push notifications (api/http/a2a, api/engine/a2a_push.py): the configs of each task, and an
-- outbox of notifications. ``runs`` is the record that a task's run ended: each replica's delivery
-- loop finds ended runs of tasks that have configs and no notification row yet, and adds one per
-- (config, run) (ON CONFLICT DO NOTHING: two replicas add it once). A run that ended before its
-- process was killed is found by the next pass, on any replica: nothing is lost. Delivery is the
-- run webhooks' (migration 0010): claimed with FOR UPDATE SKIP LOCKED and a lease, retried 1 s,
-- 2 s, 4 s..., 'failed' after the attempts limit. A delivered row is kept ('delivered'): it is what
-- says that run's end was told. Both go with their thread, notifications with their config.
CREATE TABLE a2a_push_configs (
    task_id        text NOT NULL,                  -- "<thread_id>:<first run id>"
    config_id      text NOT NULL,
    thread_id      text NOT NULL REFERENCES threads (thread_id) ON DELETE CASCADE,
    first_run_id   uuid NOT NULL,
    url            text NOT NULL,
    token          text,
    authentication jsonb,                          -- {"scheme": ..., "credentials": ...}
    since          timestamptz NOT NULL DEFAULT now(), -- runs ending from then on are told
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (task_id, config_id)
);
CREATE INDEX a2a_push_configs_thread_idx ON a2a_push_configs (thread_id);

CREATE TABLE a2a_push_notifications (
    id              bigserial PRIMARY KEY,
    task_id         text NOT NULL,
    config_id       text NOT NULL,
    run_id          uuid NOT NULL,
    thread_id       text NOT NULL,
    state           text NOT NULL,                  -- the task's state that run's end left
    status          text NOT NULL DEFAULT 'pending', -- pending | delivered | failed
    attempts        integer NOT NULL DEFAULT 0,     -- deliveries started (the lease's fence)
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    lease_until     timestamptz,
    last_error      text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (task_id, config_id, run_id),
    FOREIGN KEY (task_id, config_id) REFERENCES a2a_push_configs ON DELETE CASCADE
);
CREATE INDEX a2a_push_due_idx ON a2a_push_notifications (next_attempt_at) WHERE status = 'pending';
