-- The root checkpoint whose values threads.state_values holds, written at a run's end when the
-- graph reached its end there and the values were stored exactly as a state answer writes them
-- (api.store.kept_state); NULL when they are not known to be that checkpoint's. While it names
-- the thread's latest checkpoint, GET /threads/{id}/state answers from the stored values
-- instead of loading (and deserializing) the checkpoint.
ALTER TABLE threads ADD COLUMN state_checkpoint_id text;
