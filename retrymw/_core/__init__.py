"""The pure vocabulary: durations, backoff and jitter, matchers, `RetryPolicy` and its decision
core, the clock, events, errors, the instrument interface and redaction.

Nothing here imports anything else from retrymw: every other package builds on it.
"""
