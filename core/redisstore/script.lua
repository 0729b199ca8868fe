#!lua
-- slidelog: one atomic operation on a strict sliding-window log.
-- See docs/algorithm.md for the guarantee and each step.
--
-- KEYS[1]  the log, a sorted set: member = request ID, score = time in microseconds
-- KEYS[2]  costs, a hash: request ID -> cost, only for entries whose cost is not 1
-- KEYS[3]  state, a hash: per window W (microseconds, decimal) 'sW' is the running
--          sum of the costs of the entries stamped after the cut-point 'cW';
--          'r' is the retention (microseconds) some limiter needs until 'ru',
--          'x' when the keys expire, 'k' is set once costs has had a field.
--          While no entry of a cost other than 1 was recorded ('k' unset),
--          a window's sum is its count of entries, and no sums are kept.
-- ARGV[1]  operation: 'take' (decide and record), 'record' (record without a
--          check, at ARGV[5]) or 'refund' (remove the entry of ARGV[3])
-- ARGV[2]  now in microseconds, or 0 to read the server's clock (TIME)
-- ARGV[3]  request ID (unique per call; retries of one call reuse it)
-- ARGV[4]  cost: units the request needs (>= 1), recorded as one entry
-- ARGV[5]  record: the admission's time in microseconds; otherwise 0
-- ARGV[6], ARGV[7], ...  limit and window (microseconds) of each policy
--
-- Returns for 'take' {allowed, now, steady, remaining1, retry1, reset1,
-- remaining2, ...}, times in microseconds; steady is, on a denial, how long
-- until the first entry leaves any policy's window (0 on an admission).
-- Returns for 'record' and 'refund' {changed, now}.
--
-- Every number is a Lua double: integers up to 2^53 are exact, and the
-- client keeps limits, costs and times below it.

local log, costs, state = KEYS[1], KEYS[2], KEYS[3]
local op = ARGV[1]
local now = tonumber(ARGV[2])
local id = ARGV[3]
local cost = tonumber(ARGV[4])
local at = tonumber(ARGV[5])
local npolicies = (#ARGV - 5) / 2
if not now or not cost or not at or cost < 1 or npolicies % 1 ~= 0
    or (op ~= 'take' and op ~= 'record' and op ~= 'refund')
    or (op ~= 'refund' and npolicies < 1) then
  return redis.error_reply('ERR slidelog: bad arguments')
end
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- fmt spells an integer in full (tostring would round it to 14 digits).
local function fmt(n) return string.format('%.0f', n) end

local limits, windows, wkeys, longest = {}, {}, {}, 0
for i = 1, npolicies do
  local limit, window = tonumber(ARGV[4 + 2 * i]), tonumber(ARGV[5 + 2 * i])
  if not limit or not window or limit < 1 or window < 1 then
    return redis.error_reply('ERR slidelog: bad policy')
  end
  limits[i], windows[i], wkeys[i] = limit, window, fmt(window)
  if window > longest then longest = window end
end

local st = {}
local raw = redis.call('HGETALL', state)
for i = 1, #raw, 2 do st[raw[i]] = raw[i + 1] end
-- Entries of cost 1 have no field in costs. Until an entry of another cost
-- is recorded ('k'), a window's sum is its number of entries: ZCARD and
-- ZCOUNT give it, as fast as for a log without costs.
local weighted = st['k'] ~= nil

-- units returns the sum of the costs of the entries stamped in (lo, hi].
local function units(lo, hi)
  if not weighted then return redis.call('ZCOUNT', log, '(' .. lo, hi) end
  local members = redis.call('ZRANGEBYSCORE', log, '(' .. lo, hi)
  local total = #members
  for i = 1, #members, 500 do
    local cs = redis.call('HMGET', costs, unpack(members, i, math.min(i + 499, #members)))
    for j = 1, #cs do
      if cs[j] then total = total + tonumber(cs[j]) - 1 end
    end
  end
  return total
end

local replay = redis.call('ZSCORE', log, id)

-- Refund: remove the entry and its cost from every window that counts it.
if op == 'refund' then
  if not replay then return {0, now} end
  local s = tonumber(replay)
  local c = tonumber(redis.call('HGET', costs, id)) or 1
  local args = {}
  for f, v in pairs(st) do
    if string.sub(f, 1, 1) == 'c' and s > tonumber(v) then
      local w = string.sub(f, 2)
      args[#args + 1] = 's' .. w
      args[#args + 1] = fmt(tonumber(st['s' .. w]) - c)
    end
  end
  if #args > 0 then redis.call('HSET', state, unpack(args)) end
  redis.call('ZREM', log, id)
  redis.call('HDEL', costs, id)
  return {1, now}
end

-- 1. Retention follows the longest window of any limiter on this log: one
--    with a longer window than ours keeps its entries for as long as it
--    was last seen within its window (and a quarter more, so that its
--    mark is not rewritten on every call).
local retention = longest
local r, ru = tonumber(st['r']), tonumber(st['ru'])
local out = {}
if r and ru and ru > now and r > longest then
  retention = r
elseif r ~= longest or not ru or ru < now + longest then
  out[#out + 1], out[#out + 2] = 'r', fmt(longest)
  out[#out + 1], out[#out + 2] = 'ru', fmt(now + longest + math.floor(longest / 4))
end

-- 2. With costs: move every window's cut-point to now - W, subtracting
--    the entries it passes. Each entry is passed once per window, so this
--    is amortised O(1) per admission whatever the cost. A window longer
--    than the retention has lost entries: drop it (it is rebuilt when
--    next used).
local sums, cuts = {}, {}
local function build(i)
  local w = wkeys[i]
  if not sums[w] then
    cuts[w] = now - windows[i]
    sums[w] = units(fmt(cuts[w]), '+inf')
  end
end
if weighted then
  for f, v in pairs(st) do
    if string.sub(f, 1, 1) == 'c' then
      local w = string.sub(f, 2)
      local W = tonumber(w)
      if W > retention then
        redis.call('HDEL', state, 'c' .. w, 's' .. w)
      else
        local c, s = tonumber(v), tonumber(st['s' .. w])
        if now - W > c then
          s = s - units(fmt(c), fmt(now - W))
          c = now - W
        end
        sums[w], cuts[w] = s, c
      end
    end
  end
  for i = 1, npolicies do build(i) end
end

-- 3. Evict what left the retention. An entry stamped s counts in a window
--    while s > now - W, so it frees its units exactly at s + W.
local horizon = fmt(now - retention)
if weighted then
  local old = redis.call('ZRANGEBYSCORE', log, '-inf', horizon)
  for i = 1, #old, 500 do
    redis.call('HDEL', costs, unpack(old, i, math.min(i + 499, #old)))
  end
end
redis.call('ZREMRANGEBYSCORE', log, '-inf', horizon)

-- 4. Count every policy's window: its sum, or without costs its entries
--    (after step 3 the log holds exactly the retention, which ZCARD counts).
local counts, card = {}, nil
for i = 1, npolicies do
  if weighted then
    counts[i] = sums[wkeys[i]]
  elseif windows[i] == retention then
    card = card or redis.call('ZCARD', log)
    counts[i] = card
  else
    counts[i] = redis.call('ZCOUNT', log, '(' .. fmt(now - windows[i]), '+inf')
  end
end
-- A log with no entry may have been deleted: the entry that recreates it
-- needs an expiry.
local was_empty
if weighted then
  was_empty = true
  for _, s in pairs(sums) do
    if s ~= 0 then was_empty = false end
  end
else
  card = card or redis.call('ZCARD', log)
  was_empty = card == 0
end

-- add records an entry of cost stamped t in the log and in every window
-- whose cut-point it is after. The first entry of a cost other than 1
-- starts the running sums, from the counts of entries so far.
local function add(t)
  if cost ~= 1 and not weighted then
    for i = 1, npolicies do
      local w = wkeys[i]
      cuts[w], sums[w] = now - windows[i], redis.call('ZCOUNT', log, '(' .. fmt(now - windows[i]), '+inf')
    end
    weighted = true
    out[#out + 1], out[#out + 2] = 'k', '1'
  end
  redis.call('ZADD', log, fmt(t), id)
  if cost ~= 1 then redis.call('HSET', costs, id, fmt(cost)) end
  for w, c in pairs(cuts) do
    if t > c then sums[w] = sums[w] + cost end
  end
  for i = 1, npolicies do
    if t > now - windows[i] then counts[i] = counts[i] + cost end
  end
end

-- 5. Decide (take) or record without a check (record). A retry of a call
--    that was already recorded (its ID is in the log) reports it again and
--    records nothing.
local allowed, keep = 1, now + retention
if op == 'record' then
  allowed = 0
  if not replay and at > now - longest then
    add(at)
    allowed = 1
    if at + longest > keep then keep = at + longest end
  end
else
  if not replay then
    for i = 1, npolicies do
      if counts[i] + cost > limits[i] then allowed = 0 end
    end
    if allowed == 1 then add(now) end
  end
end

-- 6. Save the windows and keep every key for as long as an entry may
--    count: until x, which moves a quarter of the retention past what is
--    needed when it falls short, so that most calls set no expiry. A log
--    that was empty, or a costs hash written to (it may have emptied),
--    gets x as well.
if weighted then
  for w, s in pairs(sums) do
    out[#out + 1], out[#out + 2] = 's' .. w, fmt(s)
    out[#out + 1], out[#out + 2] = 'c' .. w, fmt(cuts[w])
  end
end
local x, renew = tonumber(st['x']), false
if not x or keep > x then
  x = keep + math.floor(retention / 4)
  renew = true
  out[#out + 1], out[#out + 2] = 'x', fmt(x)
end
if #out > 0 then redis.call('HSET', state, unpack(out)) end
local ttl = math.ceil((x - now) / 1000) + 1
if renew then
  redis.call('PEXPIRE', log, ttl)
  redis.call('PEXPIRE', state, ttl)
  if weighted then redis.call('PEXPIRE', costs, ttl) end
elseif allowed == 1 and not replay then
  if was_empty then redis.call('PEXPIRE', log, ttl) end
  if cost ~= 1 then redis.call('PEXPIRE', costs, ttl) end
end

if op == 'record' then return {allowed, now} end

-- 7. Remaining, retry-after and reset-after for every policy.
local admitted = allowed == 1 and not replay
local newest_at = nil
if admitted then
  newest_at = now
else
  local newest = redis.call('ZRANGE', log, -1, -1, 'WITHSCORES')
  newest_at = newest[2] and tonumber(newest[2]) or nil
end

-- unit_at returns the time of the entry holding the k-th oldest unit
-- stamped after cut: walking entries, not units, so a denial costs the
-- same whatever the costs.
local function unit_at(cut, k)
  if not weighted then
    local e = redis.call('ZRANGEBYSCORE', log, '(' .. cut, '+inf', 'WITHSCORES', 'LIMIT', k - 1, 1)
    return tonumber(e[2])
  end
  local offset, acc = 0, 0
  while true do
    local batch = redis.call('ZRANGEBYSCORE', log, '(' .. cut, '+inf', 'WITHSCORES', 'LIMIT', offset, 200)
    if #batch == 0 then return nil end
    local members = {}
    for j = 1, #batch, 2 do members[#members + 1] = batch[j] end
    local cs = redis.call('HMGET', costs, unpack(members))
    for j = 1, #members do
      acc = acc + (tonumber(cs[j]) or 1)
      if acc >= k then return tonumber(batch[2 * j]) end
    end
    offset = offset + #members
  end
end

local reply = {allowed, now, 0}
local steady = 0
for i = 1, npolicies do
  local limit, window = limits[i], windows[i]
  local count = counts[i]
  local retry = 0
  if allowed == 0 then
    local cut = fmt(cuts[wkeys[i]] or now - window)
    local first = redis.call('ZRANGEBYSCORE', log, '(' .. cut, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
    if first[2] then
      local leave = tonumber(first[2]) + window - now
      if steady == 0 or leave < steady then steady = leave end
    end
    if count + cost > limit then
      local s = unit_at(cut, count + cost - limit)
      if s then retry = s + window - now end
    end
  end
  local reset = 0
  if newest_at and newest_at + window > now then reset = newest_at + window - now end
  local remaining = limit - count
  if remaining < 0 then remaining = 0 end
  reply[3 * i + 1], reply[3 * i + 2], reply[3 * i + 3] = remaining, retry, reset
end
reply[3] = steady
return reply
