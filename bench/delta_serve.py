"""``python -m bench.delta_serve serve ...``: threadline with ``messages`` as a ``DeltaChannel``.

The change the checkpoint section measures (see ``bench.checkpoints.delta_state``), applied in
this process only, so the resume section can check that a run still resumes after ``kill -9``
with it. threadline's code is not changed.
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__":
    from bench.checkpoints import apply_state, delta_state

    apply_state(delta_state(int(os.environ.get("BENCH_DELTA_SNAPSHOT_FREQUENCY", "100"))))
    from api.cli import main

    main(sys.argv[1:])
