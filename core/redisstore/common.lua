#!lua
-- slidelog: the common path of a decision, alone. A take of cost 1 on
-- exact policies of a plain log, or of a key with no log (see script.lua
-- for the log's modes, and docs/algorithm.md, "The common path"). It names
-- only the log, and binds no more than it reads.
--
-- KEYS[1]  the log, a sorted set: member = request ID, score = time in microseconds
-- ARGV[1]  request ID (unique per call; retries of one call reuse it)
-- ARGV[2]  now in microseconds, or 0 to read the server's clock (TIME)
-- ARGV[3], ARGV[4] ...  limit and window (microseconds) of each policy
--
-- Returns what script.lua's take returns: {allowed, now, steady,
-- remaining1, retry1, reset1, remaining2, ...}. Returns {-1}, having
-- written nothing, when the full steps are needed: arguments it does not
-- take as they are (script.lua checks them), a log that is not plain (a
-- special log's odd expiry, no expiry, an expiry set by a limiter of
-- another retention, or a server without PEXPIRETIME), or a retry of a
-- recorded request (its ZADD NX adds nothing, or the denial finds it).
--
-- It reads the clock (TIME) and the log's expiry (PEXPIRETIME), counts
-- each window with ZCOUNT (scores are whole microseconds, so (now-W, +inf)
-- is [now-W+1, +inf)) and records with ZADD NX: four commands for an
-- admission, one of them a write. On a key with no log there is nothing to
-- count, and the log gets its expiry: TIME, PEXPIRETIME, ZADD, PEXPIREAT.
-- When the expiry falls short of now + retention, the entries that left
-- the retention are evicted and the expiry moves a quarter of the
-- retention past what is needed.
--
-- scripts.go joins lib.lua (clock, plain, plainx) in after the #!lua line.

local log, id = KEYS[1], ARGV[1]
local now = tonumber(ARGV[2])
local n = (#ARGV - 2) / 2
-- limit, longest: the first policy's limit and window; longest becomes
-- the longest window, the log's retention.
local limit, longest = tonumber(ARGV[3]), tonumber(ARGV[4])
if not now or n < 1 or n % 1 ~= 0 or not limit or not longest or limit < 1 or longest < 1 then return {-1} end
-- One policy, the commonest case, runs without a table until a denial:
-- each table and loop costs on every call, and this path runs for most
-- decisions. limits, windows, counts: per policy, for several.
local limits, windows, counts
if n > 1 then
  limits, windows = {limit}, {longest}
  for i = 2, n do
    local l, w = tonumber(ARGV[1 + 2 * i]), tonumber(ARGV[2 + 2 * i])
    if not l or not w or l < 1 or w < 1 then return {-1} end
    limits[i], windows[i] = l, w
    if w > longest then longest = w end
  end
end

local off
now, off = clock(now)
local x = redis.pcall('PEXPIRETIME', log)
if type(x) ~= 'number' or not plain(x, longest) then return {-1} end
local fresh = x == -2

-- Count each window: c for one policy; counts[i] for several, a window
-- that an earlier policy has counted once.
local c, deny = 0, false
if n == 1 then
  -- A log of the wrong type (a SET that kept the expiry) fails its first
  -- read, before any write: script.lua deletes it (pcall, same one call).
  if not fresh then c = redis.pcall('ZCOUNT', log, now - longest + 1, '+inf') end
  if type(c) ~= 'number' then return {-1} end
  deny = c >= limit
else
  counts = {}
  for i = 1, n do
    local ci = nil
    if fresh then ci = 0 end
    for j = 1, i - 1 do
      if ci then break end
      if windows[j] == windows[i] then ci = counts[j] end
    end
    if not ci then ci = redis.pcall('ZCOUNT', log, now - windows[i] + 1, '+inf') end
    if type(ci) ~= 'number' then return {-1} end
    counts[i] = ci
    if ci + 1 > limits[i] then deny = true end
  end
end

if not deny then
  if redis.call('ZADD', log, 'NX', now, id) == 0 then return {-1} end
  if fresh or x * 1000 - off < now + longest then
    if not fresh then redis.call('ZREMRANGEBYSCORE', log, '-inf', now - longest) end
    redis.call('PEXPIREAT', log, plainx(now + longest + math.floor(longest / 4) + off, longest))
  end
  if n == 1 then return {1, now, 0, limit - c - 1, 0, longest} end
  local reply = {1, now, 0}
  for i = 1, n do
    reply[3 * i + 1], reply[3 * i + 2], reply[3 * i + 3] = limits[i] - counts[i] - 1, 0, windows[i]
  end
  return reply
end
if n == 1 then limits, windows, counts = {limit}, {longest}, {c} end
if redis.call('ZSCORE', log, id) then return {-1} end

-- A denial (not a retry): script.lua's step 8 on the counts read.
local newest = redis.call('ZRANGE', log, -1, -1, 'WITHSCORES')
local newest_at = tonumber(newest[2])
local reply, steady, firsts = {0, now, 0}, 0, {}
for i = 1, n do
  local limit, w, c = limits[i], windows[i], counts[i]
  local first = firsts[w]
  if not first then
    first = redis.call('ZRANGEBYSCORE', log, now - w + 1, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
    firsts[w] = first
  end
  if first[2] then
    local leave = tonumber(first[2]) + w - now
    if steady == 0 or leave < steady then steady = leave end
  end
  local retry, reset, k = 0, 0, c + 1 - limit
  if k > 0 then
    local s = first[2]
    if k > 1 then
      s = redis.call('ZRANGEBYSCORE', log, now - w + 1, '+inf', 'WITHSCORES', 'LIMIT', k - 1, 1)[2]
    end
    -- A violated policy always has a retry: the window, if its units
    -- are not found.
    retry = w
    if s then retry = tonumber(s) + w - now end
  end
  if newest_at and newest_at + w > now then reset = newest_at + w - now end
  local remaining = limit - c
  if remaining < 0 then remaining = 0 end
  reply[3 * i + 1], reply[3 * i + 2], reply[3 * i + 3] = remaining, retry, reset
end
reply[3] = steady
return reply
