"""Test instruments beside `retrymw.testing.RecordingInstrument`."""

from __future__ import annotations

from retrymw import AttemptFinished, CallFinished, RetryDenied, RetryScheduled
from retrymw.instrumentation import Instrument

__all__ = ["EndingsRecorder"]


class EndingsRecorder(Instrument):
    """Keeps the endings it hears (attempts, waits, denials, calls) in `events`, and hears of
    no start, as `PrometheusInstrument`: a call's first attempt may run bare."""

    def __init__(self) -> None:
        self.events: list[AttemptFinished | RetryScheduled | RetryDenied | CallFinished] = []

    def attempt_finished(self, event: AttemptFinished, /) -> None:
        self.events.append(event)

    def retry_scheduled(self, event: RetryScheduled, /) -> None:
        self.events.append(event)

    def retry_denied(self, event: RetryDenied, /) -> None:
        self.events.append(event)

    def call_finished(self, event: CallFinished, /) -> None:
        self.events.append(event)
