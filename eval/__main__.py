"""``python -m eval``: see :mod:`eval.runner`."""

import sys

from eval.runner import main

if __name__ == "__main__":
    sys.exit(main())
