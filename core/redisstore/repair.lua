-- slidelog: rebuild a log whose keys hold values of the wrong type.
--
-- KEYS[1..n]  the keys of one log (see logKeys)
-- ARGV[1..n]  the type each must have ('zset' or 'hash')
--
-- Every key of the wrong type (an operator's SET over it, a stray write)
-- is deleted, as if it had been lost: the decision script rebuilds the
-- log from what is left (docs/algorithm.md, "Damaged keys"). Returns the
-- number of keys deleted.
local n = 0
for i = 1, #KEYS do
  local t = redis.call('TYPE', KEYS[i])['ok']
  if t ~= 'none' and t ~= ARGV[i] then
    redis.call('DEL', KEYS[i])
    n = n + 1
  end
end
return n
