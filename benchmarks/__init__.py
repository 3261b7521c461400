"""Side-by-side benchmarks of retrymw against the libraries users would pick instead.

Run ``python -m benchmarks`` (or ``make bench``): every case of a group runs in the same process,
in interleaved rounds, and the report gives medians per call and ratios to the group's bare
case. ``--markdown benchmarks/RESULTS.md`` regenerates the committed results table.
"""

from __future__ import annotations
