"""The Lua scripts of the fleet: one batched step per interval, and the probe lease.

`STEP` is the synchroniser's whole round trip: one ``EVALSHA`` carrying one line per attached
object that has something to say (a *record*), whatever the number of targets. Every key of a
namespace shares its hash tag (`_keys`), so the script may touch them all, on a Redis Cluster
too. It reads time from the store (``TIME``), so processes whose clocks disagree still agree on
when a lease, a vote or an open period ends. The keys, the records and their replies, and the
rules the script applies are written above `STEP`; docs/fleet.md tells users what they mean.
"""

from __future__ import annotations

__all__ = ["LOG_SIZE", "PACER_RECENT_MS", "PROBE", "STEP"]

#: The changes a namespace's log remembers (the same number is written in `STEP`); a member
#: further behind sends everything again.
LOG_SIZE = 4096
#: How long (store ms) the lowest limit a pacer member reported stands against higher reports
#: (the same number is written in `STEP`); members repeat theirs more often than this.
PACER_RECENT_MS = 30_000

# The script's protocol and rules.
#
# Keys (``P`` is ``retrymw:{<namespace>}:``, ``S`` a record's ``<owner>:<target>``, encoded):
#
# * ``P members``: a sorted set, member id -> the store time at which it stops counting. Every
#   step adds its member; a member that stops stepping drops out after ``member_ttl``.
# * ``P budget:S``, ``P breaker:S``, ``P throttle:S``, ``P pacer:S``: one hash per shared
#   object. Each attached object of each process has a field of its own, named by its *link id*
#   (``<member>.<serial>``, prefixed ``l``, ``v``, ``c`` or ``p``), and the hash keeps running
#   totals beside them, so a record costs two commands (``HMGET``, ``HSET``) whatever the
#   number of members. Once per
#   ``member_ttl`` a record *sweeps* its hash: fields of members that stopped counting are
#   dropped, the totals recounted, the median member's claim recomputed, the key's TTL renewed.
# * ``P probes:S``: the half-open probes' leases (a sorted set, lease -> expiry).
# * ``P seq`` and ``P log``: a counter and a sorted set (``S`` -> the counter's value at its last
#   change) of the shared circuits' state changes. A step asks for the changes since the last it
#   saw, so a process learns that a circuit it is not calling opened without sending anything
#   for it. A member whose view is older than the log's memory is told to send everything.
#
# Records (space-separated; one per line) and their reply lines, in order:
#
# * ``b <serial> <S> <deposits> <want> <held> <ratio> <burst> <window_ms> <floor> <credit>``
#   -> ``<granted> <capacity> <members>``: the budget rule below.
# * ``k <serial> <S> <vote> <quorum> <recovery_ms> <verdict> <verdict_version>``
#   -> ``<state> <reopen> <version> <members> <votes>``: the breaker rule below.
# * ``t <serial> <S> <requests> <accepts> <overloaded>``
#   -> ``<requests> <accepts> <overloaded> <members>``: the other members' sums.
# * ``p <serial> <S> <limit> <need> <seq>`` -> ``<limit> <members> [<share>]``: the pacer rule
#   below (a limit ``-``: none learned, or none in the store; a need ``+``: held back, ``-``:
#   not measured).
# * ``x <kind letter> <serial> <S>`` -> ``x``: the object left (evicted, detached, closed).
#
# The reply is one string: a header line ``<now> <seq> <members> <flags>`` (flags ``-``, or
# ``r``: send every record again, the store forgot this member or the log forgot its changes),
# the records' lines, then one line ``c <S> <state> <reopen> <version>`` per changed circuit.
#
# **One member cannot skew the fleet.** A member's claims are clamped to twice the median
# member's (the lower median over the live members, recomputed at each sweep; a member alone
# is not clamped): a budget
# member's trailing successes (at least twice what funds the floor), a throttle member's
# requests (at least twice 10), its accepts and overload refusals scaled with them. A lying or
# broken process weighs at most two honest ones.
#
# **The budget rule** (`retrymw._simulate.fleet.Store.budget` runs the same steps in Python, and
# tests/fleet/test_budget_rule.py holds the two to the same answers):
#
# 1. One bucket for the fleet: deposits of every process (``ratio`` per success) fill it, and
#    its capacity is ``max(floor, burst * S)`` with ``S`` the fleet's successes over the
#    trailing window (an exponentially decayed count).
# 2. Each process reports the whole tokens it ``held`` at this step; the hash keeps every
#    member's report and their sum (``leased``).
# 3. The bucket and the outstanding leases share the capacity: ``tokens <= capacity - leased``.
#    A grant moves tokens from the bucket to the lease.
# 4. The floor lends on credit, as a local budget does: tokens beyond what recent traffic funds
#    (``burst * S``, in whole tokens per member) are lent at most ``credit`` (the budget's
#    ``floor_credit``) per member between two deposits, less what the members already hold
#    beyond it; a fleet that never deposited lends its whole floor. So a shared budget is never
#    more generous than the same budgets kept per process.
# 5. A lease whose holder stopped stepping returns at the next sweep.
#
# **The pacer rule.** One requests limit per pacer and target: the lowest a live member reported
# recently. A report at or below the stored limit replaces it (and renews it); a higher one
# replaces it only once the stored one is ``PACER_RECENT_MS`` old, so one member's lower limit
# slows every member, and a limit the server raised is taken once nobody repeats the old one.
# A report is fenced by its link's sequence number: one not newer than the last taken is
# ignored (membership still counts). ``members`` counts the live members pacing the target
# (recounted at each sweep). Shares follow demand, max-min fair: each record carries the
# member's *need*, the requests/s it asks for: what it asked (sends and refusals) with room to
# grow; ``+``, as much as it can get, while it is held back at its share; ``-`` before it
# measured (a new member, or an older one that reports no need), which counts as an equal
# part, ``limit / members``. The limit is filled like water: every need below the level is met,
# the members above it (those held back) share the rest equally, and what no need takes is
# split among all, so a member that is not held back always has room to grow. The reply's
# ``share`` is this member's part over the limit; the parts, computed on the same needs, never
# sum past the limit. Equal needs (or none measured) give equal shares, ``1 / members``; a
# member not measured gets exactly that. A member that stops sending records once more, a
# measure later, asking for the least (`_pacer` ``MIN_NEED``): its share returns to the others.
#
# **The breaker rule.** The shared circuit is ``closed`` or ``open`` until ``reopen`` (store ms);
# open past ``reopen`` it is half-open, and its probes hold leases (`PROBE`). A vote is a process
# whose own breaker tripped, cast for the version it saw: votes of an older version never count.
# The circuit opens when ``votes >= max(2, ceil(quorum * members))``: one process alone never
# opens it for everyone. A probe's verdict counts only for the version its lease was granted in.
STEP = """
if #KEYS == 2 then  -- the probe lease (`PROBE` below)
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
end
local members_key = KEYS[1]
local prefix = string.sub(members_key, 1, #members_key - 7)
local member, member_ttl = ARGV[1], tonumber(ARGV[2])
local key_ttl, seen = tonumber(ARGV[3]), tonumber(ARGV[4])
local LOG_SIZE = 4096  -- LOG_SIZE in Python
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local flags = '-'
if redis.call('ZADD', members_key, now + member_ttl, member) == 1 and seen >= 0 then
  flags = 'r'
end
redis.call('ZREMRANGEBYSCORE', members_key, '-inf', now)
redis.call('PEXPIRE', members_key, key_ttl)
local fleet_members = redis.call('ZCARD', members_key)

local live = nil
local function alive(id)
  if live == nil then
    live = {}
    local all = redis.call('ZRANGEBYSCORE', members_key, now, '+inf')
    for i = 1, #all do live[all[i]] = true end
  end
  local owner = string.match(id, '^([^.]+)%.')
  return owner ~= nil and live[owner] == true
end

local function lower_median(values)
  table.sort(values)
  return values[math.floor((#values + 1) / 2)]
end

local function changed(suffix)
  local seq = redis.call('INCR', prefix .. 'seq')
  redis.call('ZADD', prefix .. 'log', seq, suffix)
  redis.call('ZREMRANGEBYRANK', prefix .. 'log', 0, -LOG_SIZE - 1)
end

local function num(text, default)
  return tonumber(text) or default
end

-- A record's sweep of its hash ``key``: the fields (named ``<letter><link id>``) of members
-- that stopped counting are dropped, and ``each(value)`` sees every other live member's field
-- (``own`` is the caller's, which it counts itself); the key's TTL is renewed. Returns when
-- the next sweep is due.
local function sweep_members(key, letter, own, each)
  local all = redis.call('HGETALL', key)
  for i = 1, #all, 2 do
    local name = all[i]
    if string.sub(name, 1, 1) == letter and name ~= own then
      if alive(string.sub(name, 2)) then
        each(all[i + 1])
      else
        redis.call('HDEL', key, name)
      end
    end
  end
  redis.call('PEXPIRE', key, key_ttl)
  return now + member_ttl
end

local function budget(id, suffix, deposits, want, held, ratio, burst, window, floor, credit_per)
  local key = prefix .. 'budget:' .. suffix
  local own = 'l' .. id
  local s = redis.call('HMGET', key, 'tokens', 'successes', 'at', 'leased', 'sweep', 'credit',
    'median', 'n', own)
  local tokens, successes = num(s[1], floor), num(s[2], 0)
  local at, leased, sweep = num(s[3], now), num(s[4], 0), num(s[5], 0)
  local credit, median, n = tonumber(s[6]), tonumber(s[7]), num(s[8], 0)
  local before, mine, mine_at = 0, 0, now
  if s[9] then
    local b, m, a = string.match(s[9], '^([^:]+):([^:]+):([^:]+)$')
    before, mine, mine_at = num(b, 0), num(m, 0), num(a, now)
  else
    n = n + 1
  end
  successes = successes * math.exp(-math.max(0, now - at) / window)
  -- One member's claim: its trailing successes at most twice the median member's.
  mine = mine * math.exp(-math.max(0, now - mine_at) / window)
  local funds_floor = floor
  if burst > 0 then funds_floor = floor / burst end
  if n > 1 then
    local cap = 2 * math.max(median or 0, funds_floor)
    deposits = math.max(0, math.min(deposits, math.floor(cap - mine)))
  end
  mine = mine + deposits
  -- What a member holds grows only by grants, or by its local share while degraded.
  local share = math.max(1, math.ceil(math.max(floor, burst * successes) / math.max(1, n)))
  held = math.min(held, before + share)
  leased = leased - before + held
  local swept = now >= sweep
  if swept then
    leased, n = held, 1
    local claims = {mine}
    sweep = sweep_members(key, 'l', own, function(value)
      local b, m, a = string.match(value, '^([^:]+):([^:]+):([^:]+)$')
      leased, n = leased + num(b, 0), n + 1
      claims[#claims + 1] = num(m, 0) * math.exp(-math.max(0, now - num(a, now)) / window)
    end)
    median = lower_median(claims)
  end
  successes = successes + deposits
  local capacity = math.max(floor, burst * successes)
  -- What traffic funds, in whole tokens per member: each member's own budget could lend no
  -- fraction of a token either.
  local funded = n * math.floor(burst * successes / n)
  tokens = math.max(0, math.min(capacity - leased, tokens + deposits * ratio))
  if deposits > 0 then
    credit = math.max(0, credit_per * n - math.max(0, leased - funded))
  elseif credit ~= nil then
    credit = math.max(0, credit - math.max(0, held - before))
  end
  local granted = math.max(0, math.min(want, math.floor(tokens)))
  if credit ~= nil then
    local room = math.max(0, math.floor(funded - leased))
    if granted - room > credit then
      granted = math.max(0, math.min(granted, room + math.floor(credit)))
    end
    credit = math.max(0, credit - math.max(0, granted - room))
  end
  tokens = tokens - granted
  leased = leased + granted
  local fields = {'tokens', tostring(tokens), 'successes', tostring(successes), 'at', now,
    'leased', leased, own, (held + granted) .. ':' .. tostring(mine) .. ':' .. now}
  if credit ~= nil then
    fields[#fields + 1] = 'credit'
    fields[#fields + 1] = tostring(credit)
  end
  if swept or not s[9] then  -- the rest changes only with the members
    fields[#fields + 1] = 'sweep'
    fields[#fields + 1] = sweep
    fields[#fields + 1] = 'n'
    fields[#fields + 1] = n
    if median ~= nil then
      fields[#fields + 1] = 'median'
      fields[#fields + 1] = tostring(median)
    end
  end
  redis.call('HSET', key, unpack(fields))
  return granted .. ' ' .. string.format('%.17g', capacity) .. ' ' .. n
end

local function breaker(id, suffix, vote, quorum, recovery, verdict, verdict_version)
  local key = prefix .. 'breaker:' .. suffix
  local own = 'v' .. id
  local s = redis.call('HMGET', key, 'state', 'reopen', 'version', 'votes', 'n', 'sweep', own)
  local state, reopen, version = s[1] or 'closed', num(s[2], 0), num(s[3], 0)
  local votes, n, sweep = num(s[4], 0), num(s[5], 0), num(s[6], 0)
  local previous = tonumber(s[7])
  if previous == nil then
    n, previous = n + 1, -1
  end
  local moved = false
  if verdict ~= '-' and verdict_version == version and state == 'open' and now >= reopen then
    version, votes, moved = version + 1, 0, true
    redis.call('DEL', prefix .. 'probes:' .. suffix)
    if verdict == 's' then state = 'closed' else reopen = now + recovery end
  end
  if previous == version and vote ~= version then votes = votes - 1 end
  if vote == version and previous ~= version then votes = votes + 1 end
  if now >= sweep then
    n, votes = 1, 0
    if vote == version then votes = 1 end
    sweep = sweep_members(key, 'v', own, function(value)
      n = n + 1
      if tonumber(value) == version then votes = votes + 1 end
    end)
  end
  if state == 'closed' and votes >= math.max(2, math.ceil(quorum * n)) then
    state, reopen, version, votes, moved = 'open', now + recovery, version + 1, 0, true
    redis.call('DEL', prefix .. 'probes:' .. suffix)
  end
  redis.call('HSET', key, 'state', state, 'reopen', reopen, 'version', version,
    'votes', votes, 'n', n, 'sweep', sweep, own, vote)
  if moved then changed(suffix) end
  return state .. ' ' .. reopen .. ' ' .. version .. ' ' .. n .. ' ' .. votes
end

local function throttle(id, suffix, r, a, o)
  local key = prefix .. 'throttle:' .. suffix
  local own = 'c' .. id
  local s = redis.call('HMGET', key, 'r', 'a', 'o', 'n', 'sweep', 'median', own)
  local R, A, O, n = num(s[1], 0), num(s[2], 0), num(s[3], 0), num(s[4], 0)
  local sweep, median = num(s[5], 0), tonumber(s[6])
  local pr, pa, po = 0, 0, 0
  if s[7] then
    local _, x, y, z = string.match(s[7], '^([^:]+):([^:]+):([^:]+):([^:]+)$')
    pr, pa, po = num(x, 0), num(y, 0), num(z, 0)
  else
    n = n + 1
  end
  local claimed = r
  a, o = math.min(a, r), math.min(o, r)
  -- One member's claim: its requests at most twice the median member's (at least 2 * 10).
  local cap = 2 * math.max(median or 0, 10)
  if n > 1 and r > cap then
    a, o, r = math.floor(a * cap / r), math.floor(o * cap / r), cap
  end
  R, A, O = R - pr + r, A - pa + a, O - po + o
  local swept = now >= sweep
  if swept then
    R, A, O, n = r, a, o, 1
    local claims = {claimed}
    sweep = sweep_members(key, 'c', own, function(value)
      local c, x, y, z = string.match(value, '^([^:]+):([^:]+):([^:]+):([^:]+)$')
      R, A, O, n = R + num(x, 0), A + num(y, 0), O + num(z, 0), n + 1
      claims[#claims + 1] = num(c, 0)
    end)
    median = lower_median(claims)
  end
  local mine = claimed .. ':' .. r .. ':' .. a .. ':' .. o
  if swept or not s[7] then
    redis.call('HSET', key, 'r', R, 'a', A, 'o', O, 'n', n, 'sweep', sweep,
      'median', median or 0, own, mine)
  else
    redis.call('HSET', key, 'r', R, 'a', A, 'o', O, own, mine)
  end
  return math.max(0, R - r) .. ' ' .. math.max(0, A - a) .. ' ' .. math.max(0, O - o) .. ' ' .. n
end

local PACER_RECENT = 30000  -- PACER_RECENT_MS in Python

-- This member's part of ``limit`` by max-min fairness over every member's need (math.huge:
-- as much as it can get), ``own`` its own need.
local function fair_share(needs, own, limit)
  table.sort(needs)
  local remaining, k = limit, #needs
  for i = 1, #needs do
    if needs[i] * k >= remaining then  -- the level: the rest split among these k
      return math.min(own, remaining / k) / limit
    end
    remaining, k = remaining - needs[i], k - 1
  end
  return (own + remaining / #needs) / limit  -- every need met: the rest split among all
end

-- A need as recorded: requests/s, ``+`` (held back: math.huge) or ``-`` (not known: nil).
local function need_of(word)
  if word == '+' then return math.huge end
  local need = tonumber(word)
  if need ~= nil and need >= 0 and need < math.huge then return need end
  return nil
end

local function pacer(id, suffix, limit, need, seq)
  local key = prefix .. 'pacer:' .. suffix
  local own = 'p' .. id
  local s = redis.call('HMGET', key, 'limit', 'limit_at', 'n', 'sweep', own)
  local low, low_at = tonumber(s[1]), num(s[2], 0)
  local n, sweep = num(s[3], 0), num(s[4], 0)
  local mine = s[5]
  if mine then
    local last = tonumber(string.match(mine, ':([^:]+)$'))
    if last ~= nil and seq <= last then seq = nil end  -- fenced: older than the last taken
  else
    n = n + 1
  end
  if seq ~= nil then
    local needed = '-'
    if need == math.huge then
      needed = '+'
    elseif need ~= nil then
      needed = string.format('%.17g', need)
    end
    mine = (limit and string.format('%.17g', limit) or '-') .. ':' .. needed .. ':' .. seq
    if limit ~= nil and limit > 0 and
        (low == nil or limit <= low or now - low_at >= PACER_RECENT) then
      low, low_at = limit, now
    end
  end
  if now >= sweep then
    n = 1
    sweep = sweep_members(key, 'p', own, function() n = n + 1 end)
  end
  n = math.max(1, n)
  if low == nil then
    redis.call('HSET', key, 'n', n, 'sweep', sweep, own, mine)
    return '- ' .. n
  end
  redis.call('HSET', key, 'n', n, 'sweep', sweep, own, mine,
    'limit', string.format('%.17g', low), 'limit_at', low_at)
  -- Every member's need (``limit:need:seq``); one not known (``-``, or an older member's
  -- ``limit:seq``) is an equal part of the limit.
  local words, own_word = {}, '-'
  local all = redis.call('HGETALL', key)
  for i = 1, #all, 2 do
    if string.sub(all[i], 1, 1) == 'p' then
      local word = string.match(all[i + 1], '^[^:]*:([^:]*):[^:]*$') or '-'
      words[#words + 1] = word
      if all[i] == own then own_word = word end
    end
  end
  local equal = low / math.max(1, #words)
  local needs = {}
  for i = 1, #words do needs[i] = need_of(words[i]) or equal end
  local own_need = need_of(own_word) or equal
  local share = math.min(1, fair_share(needs, own_need, low))
  return string.format('%.17g', low) .. ' ' .. n .. ' ' .. string.format('%.17g', share)
end

local function leave(kind, id, suffix)
  if kind == 'b' then
    local key = prefix .. 'budget:' .. suffix
    local s = redis.call('HMGET', key, 'leased', 'n', 'l' .. id)
    if s[3] then
      local held = num(string.match(s[3], '^([^:]+):'), 0)
      redis.call('HSET', key, 'leased', math.max(0, num(s[1], 0) - held),
        'n', math.max(0, num(s[2], 1) - 1))
      redis.call('HDEL', key, 'l' .. id)
    end
  elseif kind == 'k' then
    local key = prefix .. 'breaker:' .. suffix
    local s = redis.call('HMGET', key, 'version', 'votes', 'n', 'v' .. id)
    if s[4] then
      local votes = num(s[2], 0)
      if tonumber(s[4]) == num(s[1], 0) then votes = votes - 1 end
      redis.call('HSET', key, 'votes', math.max(0, votes), 'n', math.max(0, num(s[3], 1) - 1))
      redis.call('HDEL', key, 'v' .. id)
    end
  elseif kind == 't' then
    local key = prefix .. 'throttle:' .. suffix
    local s = redis.call('HMGET', key, 'r', 'a', 'o', 'n', 'c' .. id)
    if s[5] then
      local _, x, y, z = string.match(s[5], '^([^:]+):([^:]+):([^:]+):([^:]+)$')
      redis.call('HSET', key, 'r', math.max(0, num(s[1], 0) - num(x, 0)),
        'a', math.max(0, num(s[2], 0) - num(y, 0)), 'o', math.max(0, num(s[3], 0) - num(z, 0)),
        'n', math.max(0, num(s[4], 1) - 1))
      redis.call('HDEL', key, 'c' .. id)
    end
  elseif kind == 'p' then
    local key = prefix .. 'pacer:' .. suffix
    local s = redis.call('HMGET', key, 'n', 'p' .. id)
    if s[2] then
      redis.call('HSET', key, 'n', math.max(0, num(s[1], 1) - 1))
      redis.call('HDEL', key, 'p' .. id)
    end
  end
  return 'x'
end

local out = {}
for line in string.gmatch(ARGV[5], '[^\\n]+') do
  local f = {}
  for word in string.gmatch(line, '%S+') do f[#f + 1] = word end
  local op, id, suffix = f[1], member .. '.' .. f[2], f[3]
  if op == 'b' then
    out[#out + 1] = budget(id, suffix, tonumber(f[4]), tonumber(f[5]), tonumber(f[6]),
      tonumber(f[7]), tonumber(f[8]), tonumber(f[9]), tonumber(f[10]), tonumber(f[11]))
  elseif op == 'k' then
    out[#out + 1] = breaker(id, suffix, tonumber(f[4]), tonumber(f[5]), tonumber(f[6]), f[7],
      tonumber(f[8]))
  elseif op == 't' then
    out[#out + 1] = throttle(id, suffix, tonumber(f[4]), tonumber(f[5]), tonumber(f[6]))
  elseif op == 'p' then
    out[#out + 1] = pacer(id, suffix, tonumber(f[4]), need_of(f[5]), tonumber(f[6]))
  elseif op == 'x' then
    out[#out + 1] = leave(f[2], member .. '.' .. f[3], f[4])
  else
    return redis.error_reply('ERR retrymw: unknown record ' .. tostring(op))
  end
end

local seq = tonumber(redis.call('GET', prefix .. 'seq')) or 0
redis.call('PEXPIRE', prefix .. 'log', key_ttl)
if seq > 0 then redis.call('PEXPIRE', prefix .. 'seq', key_ttl) end
if seen > seq then
  flags = 'r'
elseif seen >= 0 and seen < seq then
  if redis.call('ZCARD', prefix .. 'log') >= LOG_SIZE then
    local oldest = redis.call('ZRANGE', prefix .. 'log', 0, 0, 'WITHSCORES')
    if tonumber(oldest[2]) > seen + 1 then flags = 'r' end
  end
  local news = redis.call('ZRANGEBYSCORE', prefix .. 'log', '(' .. seen, '+inf')
  if #news == 0 then flags = 'r' end
  if flags ~= 'r' then
    for i = 1, #news do
      local s = redis.call('HMGET', prefix .. 'breaker:' .. news[i], 'state', 'reopen', 'version')
      out[#out + 1] = 'c ' .. news[i] .. ' ' .. (s[1] or 'closed') .. ' ' .. num(s[2], 0) ..
        ' ' .. num(s[3], 0)
    end
  end
end
local head = now .. ' ' .. seq .. ' ' .. fleet_members .. ' ' .. flags
return head .. '\\n' .. table.concat(out, '\\n')
"""

#: The probe lease is the same script called with two keys, so that the script the
#: synchroniser's steps keep loaded is the one the request path runs: no ``NOSCRIPT`` there.
#:
#: KEYS: breaker hash, probes zset. ARGV: lease id, max_probes, lease_ttl_ms, key_ttl_ms.
#: Returns {granted, version, reopen, now}.
#:
#: A lease is granted only while the shared circuit is open past ``reopen`` (half-open) and fewer
#: than ``max_probes`` unexpired leases exist: exactly ``half_open_max_calls`` probes fleet-wide.
#: A lease whose holder died expires after ``lease_ttl`` and frees its slot.
PROBE = STEP
