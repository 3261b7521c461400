"""``python -m retrymw``: the ``retrymw`` command (see `retrymw.cli`)."""

from __future__ import annotations

import sys

from .cli._main import main

if __name__ == "__main__":
    sys.exit(main())
