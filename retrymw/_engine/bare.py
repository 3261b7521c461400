"""`BareCall`: a call's first attempt run outside a `CallRun`, as the instruments hear of it.

A call nothing guards runs its first attempt bare (`Retrier.run_async`, `Retrier.run_sync`): a
`CallRun` is built only if that attempt does not settle the call. The instruments hear of the
attempt what the full path would tell them, in the same order, with the scopes they return
entered around the call and the attempt; a call that goes on hands them to its `CallRun`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._core.events import BodyRead, CallOutcome, Outcome
from .._core.instruments import NO_SCOPES, Dispatch
from . import reports
from .call import Call
from .runtime import Runtime

if TYPE_CHECKING:
    from .._protect.budget import RetryBudget

__all__ = ["BareCall"]

#: What a report reads of the outcome of a first attempt that settled its call: no exception
#: and no status (the result is the call's own, `BareCall.result`).
SETTLED = Outcome(attempt=1)


class BareCall:
    """An observed call at its bare first attempt, as the reports read it
    (`reports.ReportedCall`), holding the scopes its instruments returned until it ends or
    goes on in a `CallRun`."""

    __slots__ = (
        "attempt_scopes",
        "attempt_started_at",
        "budget",
        "call_scopes",
        "dispatch",
        "operation",
        "outcome",
        "paced_for",
        "policy",
        "request",
        "result",
        "runtime",
        "started_at",
        "target",
    )

    attempt = 1
    status: int | None = None
    body: BodyRead | None = None

    def __init__(self, runtime: Runtime, call: Call, dispatch: Dispatch) -> None:
        self.runtime = runtime
        self.dispatch = dispatch
        self.policy = call.policy
        self.target = call.target
        self.operation = call.operation
        self.request = call.request
        self.started_at = self.attempt_started_at = runtime.clock.now()
        self.result: object = None
        self.budget: RetryBudget | None = None
        # 0.0: an idle pacer let it go at once (`Pacer.send_at_once`); None without a pacer.
        self.paced_for = None if runtime.pacer is None else 0.0
        self.outcome: CallOutcome = "success"
        self.call_scopes = self.attempt_scopes = NO_SCOPES

    def begin(self) -> None:
        """Announce the call, then its first attempt, entering the scopes their hooks return,
        as `CallRun.begin` and `CallRun.start_attempt` do."""
        dispatch = self.dispatch
        if dispatch.call_started:
            self.call_scopes = reports.call_started(self, dispatch.call_started)
            # The attempt starts once the call is announced, as on the full path.
            self.attempt_started_at = self.runtime.clock.now()
        if dispatch.attempt_started:
            self.attempt_scopes = reports.attempt_started(self, dispatch.attempt_started)

    def settled(self, result: object, budget: RetryBudget | None) -> None:
        """The attempt settled the call with ``result``: report how the attempt ended, then
        the call, each inside its scopes, and leave them."""
        self.result, self.budget = result, budget
        dispatch = self.dispatch
        if dispatch.attempt_finished:
            now = self.runtime.clock.now()
            reports.attempt_finished(self, dispatch.attempt_finished, SETTLED, now, False, False)
        self.attempt_scopes.exit()
        if dispatch.call_finished:
            reports.call_finished(self, dispatch.call_finished, None)
        self.call_scopes.exit()

    def abort(self, error: BaseException) -> None:
        """The call ends by ``error`` during its first attempt, as `CallRun.abort` ends one:
        ``cancelled`` (cancellation, ``KeyboardInterrupt``, ``SystemExit``) or ``failure``
        (a misuse refused); no attempt outcome is reported."""
        self.outcome = "failure" if isinstance(error, Exception) else "cancelled"
        self.attempt_scopes.exit(error)
        if self.dispatch.call_finished:
            reports.call_finished(self, self.dispatch.call_finished, error)
        self.call_scopes.exit(error)
