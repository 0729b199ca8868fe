-- slidelog: forget an identity's log (Store.Reset).
--
-- KEYS[1..n]  the keys of one log (see logKeys)
--
-- Deletes them all in one run. It carries no #!lua line: Redis then
-- checks memory per command, and DEL, which frees memory, runs even when
-- the server is out of memory. Returns {number of keys deleted}, the
-- array the store's pipelines read.
return {redis.call('DEL', unpack(KEYS))}
