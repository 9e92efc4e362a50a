-- Attempts handed back on shutdown (SIGTERM) did not fail: they do not count toward the limit.
ALTER TABLE runs ADD COLUMN handbacks integer NOT NULL DEFAULT 0;
