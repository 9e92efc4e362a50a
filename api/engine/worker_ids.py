"""Worker ids: ``host/pid/random``, one per process's :class:`~api.engine.worker.Workers`, and
whether
the process a worker id of this host names is still alive (start-up sweeps the runs of dead ones).
"""

from __future__ import annotations

import os
import socket
import uuid


def new_worker_id() -> str:
    return f"{socket.gethostname()}/{os.getpid()}/{uuid.uuid4().hex[:8]}"


def pid_alive(worker_id: str) -> bool:
    """Whether the process named in a worker id of this host still exists.

    Our own pid under another worker id is a previous life of this process's pid (a container
    restarted as pid 1, say): dead.
    """
    try:
        pid = int(worker_id.split("/")[1])
        if pid == os.getpid():
            return False
        os.kill(pid, 0)
    except (IndexError, ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    return True
