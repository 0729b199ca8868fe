#!lua flags=no-writes
-- slidelog: read a key's usage per policy without recording anything
-- (Store.Peek). It reads the data script.lua keeps (see its header for
-- the layout) and writes nothing, so it runs on a server out of memory.
-- scripts.go joins lib.lua (bucket, top, whole, walk, scan, heads, rdue,
-- recheck, fmt, clock) in after the first line.
--
-- A field the decision script never writes (a stray write, see
-- docs/algorithm.md, "Damaged keys") is read as that script repairs it,
-- never as more room: a damaged sum or bound is recounted from the
-- buckets, a damaged cost or bucket counts as the limit. So is a sum
-- the decision script recounts though its form passed (recheck: one
-- below the bucket of now, or any when the recount is due, rdue), whose
-- recount is not stored. The reply's first value then has 2
-- added; nothing is written.
--
-- KEYS     as script.lua: the log, costs, state, buckets, recent
-- ARGV[1]  now in microseconds, or 0 to read the server's clock (TIME)
-- ARGV[2]  cost of the request to weigh (>= 1)
-- ARGV[3], ARGV[4], ARGV[5] ...  limit, window and precision (microseconds,
--          0 for the exact log) of each policy, as script.lua gets them
--
-- Returns {allowed, now, steady, remaining1, retry1, reset1, ...} as
-- script.lua's take does, for a take of cost that recorded nothing:
-- remaining is what is free before it.

local log, costs, bkt = KEYS[1], KEYS[2], KEYS[4]
local now = tonumber(ARGV[1])
local cost = tonumber(ARGV[2])
local npolicies = (#ARGV - 2) / 3
if not now or not cost or cost < 1 or npolicies < 1 or npolicies % 1 ~= 0 then
  return redis.error_reply('ERR slidelog: bad arguments')
end
if now == 0 then now = clock(0) end
-- big: the largest limit, what a damaged cost counts. sers: the series
-- of the bucketed policies, once each, as script.lua reads them; sof[i]
-- the index in sers of policy i's.
local big, damaged = 1, false
local sers, sof = {}, {}
for i = 1, npolicies do
  local limit, w, p = tonumber(ARGV[3 * i]), tonumber(ARGV[3 * i + 1]), tonumber(ARGV[3 * i + 2])
  if not limit or not w or not p or limit < 1 or w < 1 or p < 0 or p > w then
    return redis.error_reply('ERR slidelog: bad policy')
  end
  if limit > big then big = limit end
  if p > 0 then
    local name = ARGV[3 * i + 1] .. '/' .. ARGV[3 * i + 2]
    for j = 1, #sers do
      if sers[j].name == name then sof[i] = j end
    end
    if not sof[i] then
      sers[#sers + 1] = {name = name, w = w, p = p}
      sof[i] = #sers
    end
  end
end

-- A key of the wrong type (an operator's SET over it) is read as lost,
-- as script.lua's next decision deletes it (docs/algorithm.md, "Damaged
-- keys"), but costs of the wrong type count the limit for each entry (its
-- cost is not known): never more room. rcall runs a command on key and
-- returns nil for a key of the wrong type, which it then notes in lost.
local lost = {}
local function rcall(cmd, key, ...)
  if lost[key] then return nil end
  local r = redis.pcall(cmd, key, ...)
  if type(r) == 'table' and r.err then
    if not string.find(r.err, 'WRONGTYPE', 1, true) then return redis.call(cmd, key, ...) end
    lost[key], damaged = true, true
    return nil
  end
  return r
end

-- entries returns the members and times of the log's entries stamped
-- after cut, oldest first, with their costs (1 when costs has none).
local function entries(cut)
  local raw = rcall('ZRANGEBYSCORE', log, '(' .. fmt(cut), '+inf', 'WITHSCORES') or {}
  local members, ats, cs = {}, {}, {}
  for j = 1, #raw, 2 do
    members[#members + 1], ats[#ats + 1] = raw[j], tonumber(raw[j + 1])
  end
  for i = 1, #members, 500 do
    local last = math.min(i + 499, #members)
    local got = rcall('HMGET', costs, unpack(members, i, last))
    for j = 1, last - i + 1 do
      local c = 1
      if not got then c = 0 elseif got[j] then c = whole(got[j]) or 0 end
      if c < 1 then c, damaged = big, true end
      cs[i + j - 1] = c
    end
  end
  return ats, cs
end

-- The sums, bounds and buckets of now of every series, and the buckets'
-- expiry, in one HMGET (heads), as script.lua reads them; nil for
-- buckets of the wrong type.
local meta, span = nil, nil
if #sers > 0 then
  local fields
  fields, span = heads(sers, #sers, now)
  meta = rcall('HMGET', bkt, unpack(fields))
end

-- series reads the buckets of series j of sers: the units counting at
-- now, the first bucket that counts, the newest bucket, and the series'
-- name. limit is what a damaged bucket counts.
local function series(j, limit)
  local name, w, p = sers[j].name, sers[j].w, sers[j].p
  local lo, last = bucket(now - w, p), top(now, w, p)
  if not meta then return 0, lo, lo - 1, name end
  local rn, rf, rh = meta[3 * j - 2], meta[3 * j - 1], meta[3 * j]
  local n, f, h = whole(rn), whole(rf), whole(rh)
  -- recount reads every bucket of the series, as script.lua rebuilds a
  -- series whose sum or bounds are missing or damaged.
  local function recount()
    local sn, sh, drop, bad = scan(bkt, name, lo, last, limit)
    if rn or rf or rh or sn > 0 or #drop > 0 then damaged = true end
    return sn, lo, sh, name
  end
  if not rn and not rf and not rh and redis.call('EXISTS', bkt) == 0 then return 0, lo, lo - 1, name end
  if not n or not f or not h or f > h + 1 or h > last then return recount() end
  if rdue(meta, #sers, j, now, span) then
    -- script.lua's next decision recounts this series (and writes the
    -- recount), its recount being due: so does peek, which only
    -- reads it, once. What the decision compares the recount with, the
    -- sum less the buckets that stopped counting, flags it.
    local sn, sh, _, _, gone = scan(bkt, name, lo, last, limit, f)
    if not gone or sn ~= n - gone then damaged = true end
    return sn, lo, sh, name
  end
  if lo > f then
    -- Buckets from f to lo-1 stopped counting: subtract them, as
    -- script.lua drops them on its next call, reading them as it does
    -- (every field, when more passed than the hash holds). (Adding up
    -- what counts instead, when that was the shorter read, showed the
    -- buckets' room where a sum forged above them leaves the decision
    -- none.)
    local upto = math.min(lo - 1, h)
    if upto - f >= 64 and upto - f >= redis.call('HLEN', bkt) then
      local all = redis.call('HGETALL', bkt)
      local prefix = name .. ':'
      for k = 1, #all, 2 do
        if string.sub(all[k], 1, #prefix) == prefix then
          local b = whole(string.sub(all[k], #prefix + 1))
          if not b then return recount() end
          if b < lo then
            local u = whole(all[k + 1])
            if not u then return recount() end
            n = n - u
          end
        end
      end
    else
      for b = f, upto, 100 do
        local names = {}
        for j = b, math.min(b + 99, upto) do names[#names + 1] = name .. ':' .. fmt(j) end
        for _, v in ipairs(redis.call('HMGET', bkt, unpack(names))) do
          if v then
            local u = whole(v)
            if not u then return recount() end
            n = n - u
          end
        end
      end
    end
    if n < 0 then return recount() end
    f = lo
  end
  if h < f - 1 then h = f - 1 end
  if recheck(meta, #sers, j, now, span, n) then
    -- script.lua's next decision recounts this sum (and writes the
    -- recount): so does peek, which only reads it.
    local sn, sh = scan(bkt, name, lo, last, limit)
    if sn ~= n then damaged = true end
    return sn, lo, sh, name
  end
  return n, f, h, name
end

local newest = rcall('ZRANGE', log, -1, -1, 'WITHSCORES') or {}
local newest_at = newest[2] and tonumber(newest[2]) or nil

local allowed, steady = 1, 0
local reply = {0, now, 0}
for i = 1, npolicies do
  local limit, w, p = tonumber(ARGV[3 * i]), tonumber(ARGV[3 * i + 1]), tonumber(ARGV[3 * i + 2])
  local count, retry, reset, leave = 0, 0, 0, nil
  if p == 0 then
    local ats, cs = entries(now - w)
    for j = 1, #cs do count = count + cs[j] end
    if ats[1] then leave = ats[1] + w - now end
    if count + cost > limit then
      local k, acc = count + cost - limit, 0
      retry = w
      for j = 1, #cs do
        acc = acc + cs[j]
        if acc >= k then retry = ats[j] + w - now break end
      end
    end
    if newest_at and newest_at + w > now then reset = newest_at + w - now end
  else
    local n, f, h, name = series(sof[i], limit)
    count = n
    local need = 0
    if count + cost > limit then need = count + cost - limit end
    local first, last = nil, nil
    if not lost[bkt] then first, last = walk(bkt, name, f, h, need, limit) end
    if first then leave = (first + 1) * p + w - now end
    if last then
      retry = (last + 1) * p + w - now
    elseif need > 0 then
      retry = w
    end
    if n > 0 then reset = (h + 1) * p + w - now end
  end
  if count + cost > limit then allowed = 0 end
  if leave and (steady == 0 or leave < steady) then steady = leave end
  local remaining = limit - count
  if remaining < 0 then remaining = 0 end
  reply[3 * i + 1], reply[3 * i + 2], reply[3 * i + 3] = remaining, retry, reset
end
reply[1] = allowed
if damaged then reply[1] = allowed + 2 end
if allowed == 1 then steady = 0 end
reply[3] = steady
return reply
