-- Thread time-to-live (api.thread_ttl): a thread not updated for ttl_minutes is swept with
-- ttl_strategy ('delete' | 'keep_latest'); NULL: it never expires. ttl_pruned_at: when a
-- 'keep_latest' sweep last pruned it (swept again only once updated since).
ALTER TABLE threads
    ADD COLUMN ttl_strategy text,
    ADD COLUMN ttl_minutes double precision,
    ADD COLUMN ttl_pruned_at timestamptz;
CREATE INDEX threads_ttl_idx ON threads (updated_at) WHERE ttl_minutes IS NOT NULL;
