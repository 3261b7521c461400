"""The Lua scripts of the fleet: each synchroniser step is one atomic script per target.

Every script reads time from the store (``TIME``), so processes whose clocks disagree still
agree on when a lease, a vote or an open period ends. Every key of one script shares the hash tag
``{namespace:target}`` (one Redis Cluster slot) and every key gets a TTL, so a namespace nobody
uses any more empties itself. Scripts are loaded once per connection (``SCRIPT LOAD``) and run
with ``EVALSHA``; a store that lost them (restart, failover) answers ``NOSCRIPT`` and the
synchroniser loads them again on its next step.

Membership: every step of a process adds it to the target's ``members`` sorted set, scored by
the store time at which it stops counting (``now + member_ttl``); dead processes drop out on
their own.
"""

from __future__ import annotations

__all__ = ["BREAKER", "BUDGET", "PROBE", "THROTTLE"]

# Shared prelude: store time in ms, and this member's heartbeat on KEYS[members].
_PRELUDE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function heartbeat(key, member, ttl)
  redis.call('ZADD', key, now + ttl, member)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
  return redis.call('ZCARD', key)
end
"""

#: KEYS: budget hash, members zset. ARGV: member, deposits, want, ratio, burst, window_ms,
#: min_capacity, held, member_ttl_ms, key_ttl_ms. Returns {granted, capacity, members, now}.
#:
#: The rule (`retrymw._simulate.fleet.Store.budget` runs the same steps in Python, and
#: tests/fleet/test_budget_rule.py holds the two to the same answers):
#:
#: 1. One bucket for the fleet: deposits of every process (``ratio`` per success) fill it, and
#:    its capacity is ``max(min_capacity, burst * S)`` with ``S`` the fleet's successes over the
#:    trailing window (an exponentially decayed count: ``S`` tends to rate * window).
#: 2. Each process reports the whole tokens it ``held`` at this step; the hash keeps every
#:    member's report (field ``l:<member>``, ``expiry:count``) and their sum (``leased``).
#: 3. The bucket and the outstanding leases share the capacity: ``tokens <= capacity - leased``
#:    (excess tokens are dropped, never lent). A grant moves tokens from the bucket to the lease.
#: 4. A lease whose holder stopped stepping (``member_ttl`` without a report) returns: once per
#:    ``member_ttl`` a sweep drops expired reports and recounts ``leased`` from the live ones.
#:
#: In an outage nothing is deposited, so the fleet spends at most the capacity it had when the
#: outage began (and the local shares processes start with before their first report).
BUDGET = (
    _PRELUDE
    + """
local member, deposits, want = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local ratio, burst, window = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local floor, held = tonumber(ARGV[7]), tonumber(ARGV[8])
local member_ttl, key_ttl = tonumber(ARGV[9]), tonumber(ARGV[10])
local members = heartbeat(KEYS[2], member, member_ttl)
local own = 'l:' .. member
local saved = redis.call('HMGET', KEYS[1], 'tokens', 'successes', 'at', 'leased', 'sweep', own)
local tokens = tonumber(saved[1]) or floor
local successes = tonumber(saved[2]) or 0
local at = tonumber(saved[3]) or now
local leased = tonumber(saved[4]) or 0
local sweep = tonumber(saved[5]) or 0
local before = 0
if saved[6] then
  before = tonumber(string.match(saved[6], ':(%d+)$'))
end
leased = leased - before + held
if now >= sweep then
  leased = held
  local all = redis.call('HGETALL', KEYS[1])
  for i = 1, #all, 2 do
    local name = all[i]
    if string.sub(name, 1, 2) == 'l:' and name ~= own then
      local expiry, count = string.match(all[i + 1], '^(%d+):(%d+)$')
      if tonumber(expiry) <= now then
        redis.call('HDEL', KEYS[1], name)
      else
        leased = leased + tonumber(count)
      end
    end
  end
  sweep = now + member_ttl
end
successes = successes * math.exp(-math.max(0, now - at) / window) + deposits
local capacity = math.max(floor, burst * successes)
tokens = math.max(0, math.min(capacity - leased, tokens + deposits * ratio))
local granted = math.max(0, math.min(want, math.floor(tokens)))
tokens = tokens - granted
leased = leased + granted
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'successes', tostring(successes),
  'at', now, 'leased', leased, 'sweep', sweep, own, (now + member_ttl) .. ':' .. (held + granted))
redis.call('PEXPIRE', KEYS[1], key_ttl)
redis.call('PEXPIRE', KEYS[2], key_ttl)
return {granted, tostring(capacity), members, now}
"""
)

#: KEYS: breaker hash, votes hash, members zset, probes zset. ARGV: member, vote_version (-1 for
#: no vote), vote_ttl_ms, quorum, recovery_ms, verdict ('', 'success' or 'failure'),
#: verdict_version, member_ttl_ms, key_ttl_ms.
#: Returns {state, reopen, version, members, votes, now}.
#:
#: The shared circuit is ``closed`` or ``open`` until ``reopen`` (store ms); an open circuit past
#: ``reopen`` is half-open: its probes hold leases (`PROBE`). A vote is a process whose own
#: breaker tripped, cast for the version it saw: votes of an older version never count, so a
#: verdict that closed the circuit is not undone by votes cast before it. The circuit opens when
#: ``votes >= max(2, ceil(quorum * members))``: one process alone never opens it for everyone.
#: A probe's verdict counts only for the version its lease was granted in (the fence).
BREAKER = (
    _PRELUDE
    + """
local member, vote_version, vote_ttl = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local quorum, recovery, verdict = tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6]
local verdict_version = tonumber(ARGV[7])
local member_ttl, key_ttl = tonumber(ARGV[8]), tonumber(ARGV[9])
local members = heartbeat(KEYS[3], member, member_ttl)
local saved = redis.call('HMGET', KEYS[1], 'state', 'reopen', 'version')
local state = saved[1] or 'closed'
local reopen = tonumber(saved[2]) or 0
local version = tonumber(saved[3]) or 0
if vote_version >= 0 then
  redis.call('HSET', KEYS[2], member, (now + vote_ttl) .. ':' .. vote_version)
else
  redis.call('HDEL', KEYS[2], member)
end
if verdict ~= '' and verdict_version == version and state == 'open' and now >= reopen then
  version = version + 1
  redis.call('DEL', KEYS[4])
  if verdict == 'success' then
    state = 'closed'
    redis.call('DEL', KEYS[2])
  else
    reopen = now + recovery
  end
end
local votes = 0
local cast = redis.call('HGETALL', KEYS[2])
for i = 1, #cast, 2 do
  local expiry, seen = string.match(cast[i + 1], '^(%d+):(%d+)$')
  if tonumber(expiry) <= now then
    redis.call('HDEL', KEYS[2], cast[i])
  elseif tonumber(seen) == version then
    votes = votes + 1
  end
end
if state == 'closed' and votes >= math.max(2, math.ceil(quorum * members)) then
  state, reopen, version = 'open', now + recovery, version + 1
  redis.call('DEL', KEYS[2])
  redis.call('DEL', KEYS[4])
end
redis.call('HSET', KEYS[1], 'state', state, 'reopen', reopen, 'version', version)
for i = 1, 4 do redis.call('PEXPIRE', KEYS[i], key_ttl) end
return {state, reopen, version, members, votes, now}
"""
)

#: KEYS: breaker hash, probes zset. ARGV: lease id, max_probes, lease_ttl_ms, key_ttl_ms.
#: Returns {granted, version, reopen, now}.
#:
#: A lease is granted only while the shared circuit is open past ``reopen`` (half-open) and fewer
#: than ``max_probes`` unexpired leases exist: exactly ``half_open_max_calls`` probes fleet-wide.
#: A lease whose holder died expires after ``lease_ttl`` and frees its slot.
PROBE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local saved = redis.call('HMGET', KEYS[1], 'state', 'reopen', 'version')
local version = tonumber(saved[3]) or 0
local reopen = tonumber(saved[2]) or 0
if saved[1] ~= 'open' or now < reopen then
  return {0, version, reopen, now}
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[2]) then
  return {0, version, reopen, now}
end
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[3]), ARGV[1])
redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[4]))
return {1, version, reopen, now}
"""

#: KEYS: throttle hash, members zset. ARGV: member, requests, accepts, overloaded,
#: member_ttl_ms, key_ttl_ms. Returns {requests, accepts, members, now, overloaded}: the sums
#: over live members.
#:
#: Each process publishes its own trailing-window counts (a gauge, not increments), so a
#: resend is harmless and a dead process's counts leave with its entry.
THROTTLE = (
    _PRELUDE
    + """
local member, member_ttl, key_ttl = ARGV[1], tonumber(ARGV[5]), tonumber(ARGV[6])
local members = heartbeat(KEYS[2], member, member_ttl)
local own = (now + member_ttl) .. ':' .. ARGV[2] .. ':' .. ARGV[3] .. ':' .. ARGV[4]
redis.call('HSET', KEYS[1], member, own)
local requests, accepts, overloaded = 0, 0, 0
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  local expiry, r, a, o = string.match(all[i + 1], '^(%d+):(%d+):(%d+):(%d+)$')
  if expiry == nil or tonumber(expiry) <= now then
    redis.call('HDEL', KEYS[1], all[i])
  else
    requests, accepts = requests + tonumber(r), accepts + tonumber(a)
    overloaded = overloaded + tonumber(o)
  end
end
redis.call('PEXPIRE', KEYS[1], key_ttl)
redis.call('PEXPIRE', KEYS[2], key_ttl)
return {requests, accepts, members, now, overloaded}
"""
)
