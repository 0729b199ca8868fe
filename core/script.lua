#!lua
-- slidelog: one atomic decision of a strict sliding-window log.
-- See docs/algorithm.md for the guarantee and each step.
--
-- KEYS[1]  the identity's sorted set: member = request entry, score = time in microseconds
-- ARGV[1]  now in microseconds, or 0 to read the server's clock (TIME)
-- ARGV[2]  request ID (unique per call; retries of one call reuse it)
-- ARGV[3]  cost: number of entries the request needs (>= 1)
-- ARGV[4], ARGV[5], ...  limit and window (microseconds) of each policy
--
-- Returns {allowed, now, remaining1, retry1, reset1, remaining2, ...}, times in microseconds.

local key = KEYS[1]
local now = tonumber(ARGV[1])
local id = ARGV[2]
local cost = tonumber(ARGV[3])
local npolicies = (#ARGV - 3) / 2
if not now or not cost or cost < 1 or npolicies < 1 or npolicies % 1 ~= 0 then
  return redis.error_reply('ERR slidelog: bad arguments')
end
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end

local limits, windows, longest = {}, {}, 0
for i = 1, npolicies do
  local limit, window = tonumber(ARGV[2 + 2 * i]), tonumber(ARGV[3 + 2 * i])
  if not limit or not window or limit < 1 or window < 1 then
    return redis.error_reply('ERR slidelog: bad policy')
  end
  limits[i], windows[i] = limit, window
  if window > longest then longest = window end
end

-- 1. Evict what left the longest window. An entry stamped s counts while
--    s > now - window, so it frees its slot exactly at s + window.
redis.call('ZREMRANGEBYSCORE', key, '-inf', now - longest)

-- 2. A retry of a call that was already recorded reports, and records nothing.
local replay = redis.call('ZSCORE', key, id) ~= false

-- 3. Count each policy's window; admit only if every one has room. After
--    step 1 the set holds exactly the longest window, so ZCARD counts it.
local counts, allowed, card = {}, 1, nil
for i = 1, npolicies do
  if windows[i] == longest then
    card = card or redis.call('ZCARD', key)
    counts[i] = card
  else
    counts[i] = redis.call('ZCOUNT', key, now - windows[i] + 1, '+inf')
  end
  if not replay and counts[i] + cost > limits[i] then allowed = 0 end
end

-- 4. Record the admitted request: cost entries, ID then ID..'2', ID..'3', ...
if allowed == 1 and not replay then
  local args, n = {}, 0
  for c = 1, cost do
    n = n + 2
    args[n - 1] = now
    args[n] = (c == 1) and id or (id .. c)
    if n == 1000 or c == cost then
      redis.call('ZADD', key, unpack(args, 1, n))
      n = 0
    end
  end
  redis.call('PEXPIRE', key, math.ceil(longest / 1000) + 1)
  for i = 1, npolicies do counts[i] = counts[i] + cost end
end

-- 5. Remaining, retry-after and reset-after for every policy. An admission
--    is the newest entry; otherwise look it up.
local newest_at = nil
if allowed == 1 and not replay then
  newest_at = now
else
  local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  newest_at = newest[2] and tonumber(newest[2]) or nil
end
local out = {allowed, now}
for i = 1, npolicies do
  local limit, window, count = limits[i], windows[i], counts[i]
  local retry = 0
  if allowed == 0 and count + cost > limit then
    -- The (count + cost - limit)-th oldest entry in the window must leave.
    local nth = redis.call('ZRANGEBYSCORE', key, now - window + 1, '+inf', 'WITHSCORES', 'LIMIT', count + cost - limit - 1, 1)
    retry = tonumber(nth[2]) + window - now
  end
  local reset = 0
  if newest_at and newest_at + window > now then reset = newest_at + window - now end
  local remaining = limit - count
  if remaining < 0 then remaining = 0 end
  out[#out + 1] = remaining
  out[#out + 1] = retry
  out[#out + 1] = reset
end
return out
