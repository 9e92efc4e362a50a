"""The platform every other layer stands on: settings, PostgreSQL (the embedded server or
``DATABASE_URL``, the pool, migrations, telling a fault from an error), logs, metrics, the
errors a client can cause, JSON of what a graph streams, and the rules data must keep.

Imports nothing of ``api``'s other layers (``tests/test_layers.py``)."""
