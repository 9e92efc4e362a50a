-- A tool call's recorded result, found by its idempotency key (api.store.audit.prior_result,
-- asked before every tool call runs): with only (thread_id, id) to go by, the lookup read every
-- audit row of the thread in order, so on a long conversation each call cost more than the last.
CREATE INDEX audit_tool_key_idx ON audit_log (thread_id, idempotency_key, id) WHERE kind = 'tool';
