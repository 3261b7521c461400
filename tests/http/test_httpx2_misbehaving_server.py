"""The misbehaving-server suite of test_misbehaving_server, run against httpx2."""

from tests.http.flavours import run_twin

run_twin(globals(), "test_misbehaving_server.py")
