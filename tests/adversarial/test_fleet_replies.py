"""The store's numbers are read back whatever their size.

Regression: the reply checker took at most 17 decimals, and the store writes ``%.17g``: a limit
below 0.1 request/s (5 requests/min is 0.083333333333333329) has 18 to 20, so every step of a
member pacing against it was refused as garbage and the fleet turned degraded.
"""

from __future__ import annotations

import pytest

from retrymw.fleet._replies import PacerReply, parse_step


@pytest.mark.parametrize(
    ("limit", "value"),
    [
        ("0.083333333333333329", 5 / 60),  # 5 requests/min
        ("0.00016666666666666666", 10 / 60_000),  # 10 requests per 1000 min
        ("8.3333333333333329e-05", 5 / 60_000),
    ],
)
def test_a_low_limit_as_the_store_writes_it_is_read(limit: str, value: float) -> None:
    reply = parse_step(f"1 0 1 -\n{limit} 2 0.5", ["p"], [0]).records[0]
    assert isinstance(reply, PacerReply)
    assert reply.limit == pytest.approx(value)
    assert (reply.members, reply.share) == (2, 0.5)
