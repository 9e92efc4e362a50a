-- The attempts limit counts attempts that made no progress, not attempts (api/store/runs.py).
-- progress: the thread's checkpoint progress mark when the current attempt was claimed; NULL when
-- there is nothing to judge the attempt against (a first attempt, one handed back on shutdown).
ALTER TABLE runs ADD COLUMN progress text;
-- Attempts in a row that ended (their process died, their lease ran out) having saved nothing.
ALTER TABLE runs ADD COLUMN stalled_attempts integer NOT NULL DEFAULT 0;
