#!lua
-- slidelog: write an admission decided elsewhere (by a limiter's local
-- fallback while this node was failing) into the log, idempotently.
--
-- KEYS[1]  the identity's sorted set
-- ARGV[1]  the admission's time in microseconds
-- ARGV[2]  request ID (as the decision script's ARGV[2])
-- ARGV[3]  cost
-- ARGV[4]  the longest window of the limiter's policies, microseconds
--
-- Returns {1} when it recorded, {0} when the ID was already in the log or
-- the admission has left every window.
local key = KEYS[1]
local at, id, cost, longest = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
if not at or not cost or not longest or cost < 1 or longest < 1 then
  return redis.error_reply('ERR slidelog: bad arguments')
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
if at <= now - longest or redis.call('ZSCORE', key, id) then
  return {0}
end
local args, n = {}, 0
for c = 1, cost do
  n = n + 2
  args[n - 1] = at
  args[n] = (c == 1) and id or (id .. c)
  if n == 1000 or c == cost then
    redis.call('ZADD', key, unpack(args, 1, n))
    n = 0
  end
end
local ttl = math.ceil((at + longest - now) / 1000) + 1
if redis.call('PTTL', key) < ttl then
  redis.call('PEXPIRE', key, ttl)
end
return {1}
