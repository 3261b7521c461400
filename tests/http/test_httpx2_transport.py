"""The transport suite of test_httpx_transport, run against httpx2 and `retrymw.httpx2`."""

from tests.http.flavours import run_twin

run_twin(globals(), "test_httpx_transport.py")
