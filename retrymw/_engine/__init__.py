"""The runtime that runs calls: `Retrier` and its drivers, the call run, resume across restarts
and retrying at one layer.

It sits above the protection (`_protect`), the instruments (`instrumentation`) and the stores
(`stores`) that it drives, and below the front doors that use it (`_http`, the faces).
"""
