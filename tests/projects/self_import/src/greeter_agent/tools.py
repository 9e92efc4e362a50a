"""Helpers the graph imports by the package's own name."""

from __future__ import annotations

import os


def greet(name: str) -> str:
    # Read at call time: the value the server's environment has once the project is loaded.
    return f"{os.environ['MY_GREETING']}, {name}{os.environ['GREETER_PUNCTUATION']}"
