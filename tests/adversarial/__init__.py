"""The adversarial suite: every promise an attack once broke, pinned so that it stays kept.

Each module groups the attacks on one promise (a deadline, a trust boundary, a parser, the
labels' bounds...). Every test here failed on the code before its fix; parsers of outside input
have property tests (hypothesis) with inputs of 10**4 to 10**6 characters. Real components
(loopback HTTP servers, redis-server, real processes) are used where a user would have them.
"""
