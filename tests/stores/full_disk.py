"""A process whose disk fills up under a keyed call: ``python -m tests.stores.full_disk FILE``.

It opens a `SQLiteStore` on FILE, runs one keyed call to warm it up, then caps the size any of
its files may grow to (``RLIMIT_FSIZE`` at the current size of the largest, with ``SIGXFSZ``
ignored: the kernel then refuses the next write to the write-ahead log as a full disk would)
and runs a second keyed call. The retrymw log lines and ``result ok`` go to stdout.
"""

from __future__ import annotations

import logging
import resource
import signal
import sys
from pathlib import Path

from retrymw import Retrier, RetryPolicy, resume
from retrymw.stores import SQLiteStore
from retrymw.testing import FakeClock


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(message)s", stream=sys.stdout)
    path = Path(sys.argv[1])
    retrier = Retrier(RetryPolicy(), store=SQLiteStore(path), clock=FakeClock(), instruments=())
    with resume("warm-up"):
        retrier.call_sync(lambda: "ok")
    files = (path, path.with_name(path.name + "-wal"))
    largest = max(file.stat().st_size for file in files if file.exists())
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (largest, resource.RLIM_INFINITY))
    with resume("job"):
        print(f"result {retrier.call_sync(lambda: 'ok')}", flush=True)


if __name__ == "__main__":
    main()
