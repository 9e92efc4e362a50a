"""``python -m cli``: the ``threadline`` command."""

from cli.main import main

main()
