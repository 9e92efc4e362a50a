-- Event data is stored as sent (json keeps the text; jsonb would re-format it), so a replayed
-- event is byte-for-byte the live one, and nothing parses it on the way in.
ALTER TABLE run_events ALTER COLUMN data TYPE json USING data::json;
