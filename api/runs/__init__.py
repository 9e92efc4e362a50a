"""Runs, threads, assistants and schedules apart from HTTP: creating a run (its checks, the
answers a resume gives, ``multitask_strategy``), cancelling one, waiting for its end; the
thread's state; assistants and their versions; crons and the scheduler; threads' time-to-live;
the ``/store`` semantics. ``Service`` (``service.py``) is what the routes call.

Imports only the layers below it."""
