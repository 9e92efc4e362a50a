-- The event log's fence where no result is read before COMMIT (a checkpoint's transaction, sent
-- in one pipeline: api/store/events.py): a batch an attempt that lost its run tried to store
-- raises, which aborts the transaction, checkpoint included. SQLSTATE TL001 tells it apart.
CREATE OR REPLACE FUNCTION threadline_fence(stored bigint, expected integer, run uuid)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    IF stored <> expected THEN
        RAISE EXCEPTION 'run % is no longer held by this attempt (another worker took it over)', run
            USING ERRCODE = 'TL001';
    END IF;
    RETURN true;
END $$;
