"""threadline's benchmark: the service against the floor (the same graph run in-process).

Run ``python -m bench`` (``--quick`` for a smoke run); see ``bench/README.md``.
"""
