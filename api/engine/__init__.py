"""The run engine: the runtime a process opens (database, pool, checkpointer, graphs), the
workers that claim runs and keep their leases, one attempt's execution from its config to its
end, hand-backs, rollbacks, threadless runs' cleanup, and webhooks' delivery.

Imports only the layers below it."""
