"""The store: every SQL statement on the service's tables (runs, their events, threads,
assistants, crons, webhooks' outbox, the audit log, keys) and on LangGraph's checkpoint tables,
each module one table or one concern. Functions take a connection and return rows as plain
values; no HTTP, no graphs.

Imports only ``api.platform`` below it."""
