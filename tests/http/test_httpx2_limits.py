"""The sync time limits of test_limits, on httpcore2's pools (httpx2)."""

from tests.http.flavours import run_twin

run_twin(globals(), "test_limits.py")
