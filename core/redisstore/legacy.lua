-- slidelog: the start of the decision script on Redis 6.2, in place of its
-- #!lua line, which 6.2 cannot parse (see store.go, legacyScriptSource).
--
-- Redis 7 refuses a #!lua script whole when it starts out of memory. Redis
-- 6.2 refuses only a script's first write, and only when that write is a
-- command that may need memory: a script whose first write frees memory
-- (ZREMRANGEBYSCORE, HDEL, DEL) then writes past maxmemory. This ZADD adds
-- and changes nothing (XX: no new member; GT with -inf: no score moves),
-- but it is such a command: a script that starts out of memory stops here,
-- having written nothing, with the error Redis 7 replies.
local oom = redis.pcall('ZADD', KEYS[1], 'XX', 'GT', '-inf', '')
if type(oom) == 'table' and oom.err and string.find(oom.err, 'OOM', 1, true) then
  return redis.error_reply("OOM command not allowed when used memory > 'maxmemory'.")
end
