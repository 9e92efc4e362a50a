"""The durable write path: the checkpointer (a step's checkpoint, its task writes and the
events emitted before it stored in one statement), the event log's writer, the takeover
dedupe, cross-process wake-ups (``LISTEN/NOTIFY``), compaction, and the long-term memory
store. What makes a run exactly-once lives here and in ``api.engine``
(``docs/architecture.md``).

Imports only the layers below it."""
