#!lua
-- slidelog: one atomic operation on a strict sliding-window log, and on
-- bucketed windows for policies with a precision.
-- See docs/algorithm.md for the guarantee and each step.
-- scripts.go joins lib.lua (clock, fmt, tag, plain, plainx, bucket, walk,
-- scan, heads, rdue, recheck) in after the #!lua line.
--
-- KEYS[1]  the log, a sorted set: member = request ID, score = time in microseconds
-- KEYS[2]  costs, a hash: request ID -> cost, only for entries whose cost is not 1
-- KEYS[3]  state, a hash: per window W (microseconds, decimal) 'sW' is the running
--          sum of the costs of the entries stamped after the cut-point 'cW';
--          'r' is the retention (microseconds) some limiter needs until 'ru',
--          'x' when the keys expire, 'k' is set once costs has had a field.
--          While no entry of a cost other than 1 was recorded ('k' unset),
--          a window's sum is its count of entries, and no sums are kept.
-- KEYS[4]  buckets, a hash: per series S = 'W/P' (window and precision in
--          microseconds) 'S:b' is the units admitted in bucket b, the
--          interval [b*P, (b+1)*P); 'Sn' the sum of the buckets from 'Sf'
--          on (every bucket before Sf was deleted), 'Sh' the newest bucket
--          written, 'Sd' when it is next recounted from its buckets;
--          'x' when the hash expires.
-- KEYS[5]  recent, a sorted set of the latest admissions into buckets:
--          member = request ID followed by its cost when not 1, score =
--          time of the admission; at most RECENT members, none older than
--          RECENT_US (retries and refunds of older ones are not recognised).
-- ARGV[1]  operation: 'take' (decide and record), 'record' (record without a
--          check, at ARGV[5]) or 'refund' (remove what ARGV[3] recorded)
-- ARGV[2]  now in microseconds, or 0 to read the server's clock (TIME)
-- ARGV[3]  request ID (unique per call; retries of one call reuse it)
-- ARGV[4]  cost: units the request needs (>= 1), recorded as one entry
-- ARGV[5]  record: the admission's time in microseconds; otherwise 0
-- ARGV[6], ARGV[7], ARGV[8] ...  limit, window and precision (microseconds,
--          0 for the exact log) of each policy
--
-- Write-back (issue 30): operation 'takew' is a take that first records
-- the key's kept admissions, in the same run, so that no decision of the
-- key runs on a server that lacks them. Its ARGV[6] is k, the number of
-- kept admissions; ARGV[7] to ARGV[6 + 4k] are, per admission, its
-- request ID, cost, time (microseconds) and the identity of the server
-- known to hold it (0 for none); the policies follow. An admission is
-- recorded (as 'record' does, with this call's policies) unless this
-- server has that identity. The reply is take's with this server's
-- identity appended: a number from 1 to 2^52 derived from its run_id
-- (a new process) and its master_replid (a new one at every promotion),
-- or 0 when the server does not answer INFO.
-- The common path (common.lua) never carries kept admissions.
--
-- Returns for 'take' {allowed, now, steady, remaining1, retry1, reset1,
-- remaining2, ...}, times in microseconds; steady is, on a denial, how long
-- until the first entry leaves any policy's window (0 on an admission).
-- Returns for 'record' and 'refund' {changed, now}.
--
-- Every number is a Lua double: integers up to 2^53 are exact, and the
-- client keeps limits, costs and times below it.

local log, costs, state = KEYS[1], KEYS[2], KEYS[3]
local bkt, recent = KEYS[4], KEYS[5]
-- RECENT is 127 so that with the member being added the set holds at most
-- 128, the default zset-max-listpack-entries: it stays a compact listpack.
local RECENT, RECENT_US = 127, 60000000
local op = ARGV[1]
local now = tonumber(ARGV[2])
local id = ARGV[3]
local cost = tonumber(ARGV[4])
local at = tonumber(ARGV[5])
-- pb: the policies' arguments start after ARGV[pb] (write-back, 'takew').
local pb, nkept = 5, 0
if op == 'takew' then
  nkept = tonumber(ARGV[6])
  if not nkept or nkept < 0 or nkept % 1 ~= 0 then return redis.error_reply('ERR slidelog: bad arguments') end
  pb = 6 + 4 * nkept
end
local npolicies = (#ARGV - pb) / 3
if not now or not cost or not at or cost < 1 or npolicies % 1 ~= 0
    or (op ~= 'take' and op ~= 'record' and op ~= 'refund' and op ~= 'takew')
    or (op ~= 'refund' and npolicies < 1) then
  return redis.error_reply('ERR slidelog: bad arguments')
end
-- off is the server's clock minus now (µs): 0 unless the caller sends
-- its own time (tests). Expiries are the server's Unix ms: a time t of
-- this call is the server's t + off.
local off
now, off = clock(now)

-- repaired: this call found a field the script never writes (a stray
-- write: see docs/algorithm.md, "Damaged keys") and rebuilt what it
-- summarises, or counted it as the limit. The reply says so: its first
-- value gets 2 added, and the store logs it.
local repaired = false
local function flag(reply)
  if repaired then reply[1] = reply[1] + 2 end
  return reply
end

-- wrote: this call recorded an admission (a ZADD that added). The store
-- follows a call with WAIT and counts the replicas it answers as holding
-- what the call relies on: its admission, the kept admissions it carries,
-- a record. WAIT counts the replicas holding the last write of the
-- call's connection, and since Redis 7.2 (and on Valkey) a call that
-- propagates nothing does not move that mark, which may then lie before
-- what the call relies on (an admission made on another connection): a
-- 'takew' or 'record' that recorded nothing, or a retried take that
-- found its admission, therefore ends with mark, one write with no net
-- change (a field of the state hash set and deleted), so that the
-- replicas WAIT counts hold everything written before. A denial of a take
-- relies on nothing and writes nothing.
local wrote = false

-- A key of the wrong type (an operator's SET over it) fails every command
-- of its kind, and a run that fails part-way keeps what it wrote before
-- (an admission in the log but not in its bucket, a bucket dropped but
-- not from its sum). tcall runs the first command of this call on key
-- with redis.pcall, before any write that depends on what the key holds:
-- on WRONGTYPE the key is deleted and the repair flagged; then lost runs
-- if given (the log's: run starts again), otherwise the command runs
-- again on the key now missing, as for a lost key (docs/algorithm.md,
-- "Damaged keys"). Later commands on a key run as they are: its type
-- cannot change within the call.
local typed, RESTART = {}, {}
local function tcall(key, lost, cmd, ...)
  if typed[key] then return redis.call(cmd, key, ...) end
  local r = redis.pcall(cmd, key, ...)
  typed[key] = true
  if type(r) == 'table' and r.err then
    if not string.find(r.err, 'WRONGTYPE', 1, true) then error(r) end
    redis.call('DEL', key)
    repaired = true
    if lost then lost() end
    return redis.call(cmd, key, ...)
  end
  return r
end

local function mark()
  tcall(state, nil, 'HSET', '_', '1')
  redis.call('HDEL', state, '_')
end

-- Policies: exact ones (precision 0) work on the log, bucketed ones on
-- their series of buckets. limits, windows: per policy; series[i] the
-- series of a bucketed policy, nil for an exact one.
local limits, windows, wkeys, series = {}, {}, {}, {}
local longest, nexact = 0, 0
local sers, nsers = {}, 0 -- series by name: {w, p, n, f, h, dirty, big}
-- big: the largest limit, what a cost that is not a whole number counts
-- (a bucket's: the largest limit of its series), so that the windows
-- holding it admit nothing more until it leaves them.
local big = 0
for i = 1, npolicies do
  local limit, window, prec = tonumber(ARGV[pb - 2 + 3 * i]), tonumber(ARGV[pb - 1 + 3 * i]), tonumber(ARGV[pb + 3 * i])
  if not limit or not window or not prec or limit < 1 or window < 1 or prec < 0 or prec > window then
    return redis.error_reply('ERR slidelog: bad policy')
  end
  limits[i], windows[i] = limit, window
  if limit > big then big = limit end
  if prec == 0 then
    wkeys[i] = ARGV[pb - 1 + 3 * i]
    nexact = nexact + 1
    if window > longest then longest = window end
  else
    local name = ARGV[pb - 1 + 3 * i] .. '/' .. ARGV[pb + 3 * i]
    if not sers[name] then
      nsers = nsers + 1
      sers[name] = {w = window, p = prec, name = name, big = limit}
      sers[nsers] = sers[name]
    end
    series[i] = sers[name]
    if limit > sers[name].big then sers[name].big = limit end
  end
end

-- The log's mode, read from its expiry (PEXPIRETIME: the Unix ms at which
-- it expires, -1 for none, -2 when there is no log). A *plain* log is the
-- sorted set alone: every entry costs 1, and no other key describes it.
-- Its expiry is an even ms whose residue modulo 1024 is the tag of the
-- retention of the limiter that last set it (see tag). A *special* log
-- (an entry of another cost, the retention mark of another limiter, or a
-- hold) has an odd expiry, and its state hash records that same expiry
-- in 'x': a state hash whose 'x' is not the log's expiry belongs to a log
-- that was lost, and is not used. Redis 6.2 has no PEXPIRETIME (xlog is
-- nil): there every log is special and reads its state. On later
-- servers a take of cost 1 on exact policies runs common.lua first, which
-- hands over to this script, having written nothing, when the log is not
-- plain or the call is a retry.
-- run is one operation on the log (write-back: the script runs it once
-- per kept admission, then once for the take); everything it reads, it
-- reads again from the keys.
local function run(op, id, cost, at)
local xlog = nil
if nexact > 0 or op == 'refund' then
  xlog = redis.pcall('PEXPIRETIME', log)
  if type(xlog) ~= 'number' then xlog = nil end
end

-- at returns the time (µs, this call's clock) of a server expiry x (ms).
-- (tag, plain, plainx: lib.lua.)
local function at_(x) return x * 1000 - off end

local st = nil

-- The member of this request in recent: its ID, and its cost when not 1.
local rmember = id
if cost ~= 1 then rmember = id .. fmt(cost) end

-- rebuild sets the sum and bounds of series sr from its buckets, with
-- f the first that counts: it deletes the fields that do not count,
-- and writes big over a bucket whose units are not a whole number, so
-- that the window holding it admits nothing more until it leaves. It
-- returns whether it found a field of the series.
local function rebuild(sr, f)
  local n, h, drop, bad = scan(bkt, sr.name, f, top(now, sr.w, sr.p), sr.big)
  for k = 1, #drop, 500 do
    redis.call('HDEL', bkt, unpack(drop, k, math.min(k + 499, #drop)))
  end
  if #bad > 0 then
    local args = {}
    for k = 1, #bad do args[#args + 1], args[#args + 2] = bad[k], fmt(sr.big) end
    redis.call('HSET', bkt, unpack(args))
  end
  sr.n, sr.f, sr.h, sr.dirty, sr.built = n, f, h, true, true
  return n > 0 or #drop > 0 or #bad > 0
end

-- Buckets, step 1: read every series' sum and bounds, and drop the
-- buckets that stopped counting: bucket b counts while (b+1)*P > now - W,
-- that is from f = floor((now - W)/P) on. Each bucket is dropped once;
-- when more buckets passed than the hash holds fields, the fields are
-- read instead of the passed range. Sums and bounds that are missing beside
-- buckets, or are not whole numbers, or out of order, are rebuilt from
-- the buckets (rebuild), and so is a sum that a damaged bucket leaves.
--
-- A sum can also hold a number the script might have written, but
-- smaller than its buckets' (a stray write): it would admit what it does
-- not count for as long as the window stays full. The same HMGET reads
-- the bucket of now: a sum below its units is rebuilt at once. Nothing
-- cheap tells the rest from the truth: when a series' recount is due
-- (its mark 'Sd', read in the same HMGET, is not after now), it is
-- recounted from its buckets, and bsave sets 'Sd' a quarter of the
-- longest window later, which bounds that (rdue in lib.lua: a mark more
-- than that ahead is due as well).
local bx, bxold, bspan
if nsers > 0 then
  local fields
  fields, bspan = heads(sers, nsers, now)
  local meta = tcall(bkt, nil, 'HMGET', unpack(fields))
  local rx = meta[3 * nsers + 1]
  bxold = whole(rx)
  bx = bxold
  if rx and not bxold then
    -- An expiry the script never writes ("inf", "nan"): bsave writes it anew.
    sers[1].dirty, repaired = true, true
  end
  for j = 1, nsers do
    local sr = sers[j]
    local f = bucket(now - sr.w, sr.p)
    local rn, rf, rh = meta[3 * j - 2], meta[3 * j - 1], meta[3 * j]
    sr.n, sr.f, sr.h = whole(rn), whole(rf), whole(rh)
    if not rn and not rf and not rh and not bxold and redis.call('EXISTS', bkt) == 0 then
      -- A new series: no buckets.
      sr.n, sr.f, sr.h, sr.built = 0, f, f - 1, true
    elseif not sr.n or not sr.f or not sr.h or sr.f > sr.h + 1 or sr.h > top(now, sr.w, sr.p) then
      -- No sum and bounds, or damaged ones, beside buckets: rebuild them
      -- from the buckets. (A series with none is new, and gets them.)
      if rebuild(sr, f) or rn or rf or rh then repaired = true end
    elseif f > sr.f then
      local last = math.min(f - 1, sr.h)
      if last >= sr.f then
        local dropped, names, bad = 0, {}, false
        if last - sr.f >= 64 and last - sr.f >= redis.call('HLEN', bkt) then
          local all = redis.call('HGETALL', bkt)
          local prefix = sr.name .. ':'
          for k = 1, #all, 2 do
            local name = all[k]
            if string.sub(name, 1, #prefix) == prefix then
              local b = whole(string.sub(name, #prefix + 1))
              if not b then
                bad = true
              elseif b < f then
                names[#names + 1] = name
                local v = whole(all[k + 1])
                if v then dropped = dropped + v else bad = true end
              end
            end
          end
        else
          for b = sr.f, last do names[#names + 1] = sr.name .. ':' .. fmt(b) end
          local got = redis.call('HMGET', bkt, unpack(names))
          names = {}
          for k = 1, #got do
            if got[k] then
              names[#names + 1] = sr.name .. ':' .. fmt(sr.f + k - 1)
              local v = whole(got[k])
              if v then dropped = dropped + v else bad = true end
            end
          end
        end
        for k = 1, #names, 500 do
          redis.call('HDEL', bkt, unpack(names, k, math.min(k + 499, #names)))
        end
        sr.n = sr.n - dropped
        if bad or sr.n < 0 then
          -- A dropped bucket was damaged, or the sum did not hold what
          -- was dropped: rebuild the sum from the buckets left.
          rebuild(sr, f)
          repaired = true
        end
      end
      sr.f, sr.dirty = f, true
      if sr.h < f - 1 then sr.h = f - 1 end
    end
    if not sr.built and recheck(meta, nsers, j, now, bspan, sr.n) then
      -- Due, or the sum holds less than the bucket of now (a stray write,
      -- which the rebuild then always finds).
      local n = sr.n
      rebuild(sr, f)
      if n ~= sr.n then repaired = true end
    end
  end
end

-- brecord adds cost units at time t to every series whose window still
-- counts t's bucket; it returns whether any did.
local function brecord(t)
  local any = false
  for j = 1, nsers do
    local sr = sers[j]
    local b = bucket(t, sr.p)
    if b >= sr.f then
      local field = sr.name .. ':' .. fmt(b)
      local left = redis.pcall('HINCRBY', bkt, field, cost)
      if type(left) ~= 'number' or left < cost then
        -- The bucket held what the script never writes: it counts big.
        redis.call('HSET', bkt, field, fmt(sr.big + cost))
        rebuild(sr, sr.f)
        repaired = true
      else
        sr.n = sr.n + cost
        if b > sr.h then sr.h = b end
      end
      sr.dirty, any = true, true
    end
  end
  return any
end

-- bsave writes the series' sums and bounds back, and keeps the buckets
-- until the newest one stops counting, moving the expiry a quarter of the
-- window past it when it falls short, so that most calls set none.
local function bsave()
  local out, keep, span = {}, 0, 0
  for j = 1, nsers do
    local sr = sers[j]
    if sr.dirty then
      out[#out + 1], out[#out + 2] = sr.name .. 'n', fmt(sr.n)
      out[#out + 1], out[#out + 2] = sr.name .. 'f', fmt(sr.f)
      out[#out + 1], out[#out + 2] = sr.name .. 'h', fmt(sr.h)
      -- Recounted from its buckets (or new): its next recount is due a
      -- quarter of the longest window from now.
      if sr.built then out[#out + 1], out[#out + 2] = sr.name .. 'd', fmt(now + math.floor(bspan / 4)) end
    end
    local k = (sr.h + 1) * sr.p + sr.w
    if k > keep then keep = k end
    if sr.w > span then span = sr.w end
  end
  if #out == 0 then return end
  if not bx or keep > bx then
    bx = keep + math.floor(span / 4)
    out[#out + 1], out[#out + 2] = 'x', fmt(bx)
  end
  redis.call('HSET', bkt, unpack(out))
  if bx ~= bxold then redis.call('PEXPIRE', bkt, math.ceil((bx - now) / 1000) + 1) end
end

-- radd remembers this admission, at t, in recent, trimmed by age and
-- size; it returns false when it was already there (a retry).
local function radd(t)
  if tcall(recent, nil, 'ZADD', 'NX', fmt(t), rmember) == 0 then return false end
  wrote = true
  redis.call('ZREMRANGEBYSCORE', recent, '-inf', fmt(now - RECENT_US))
  redis.call('ZREMRANGEBYRANK', recent, 0, -RECENT - 1)
  redis.call('PEXPIRE', recent, math.ceil(RECENT_US / 1000))
  return true
end

-- rfind returns the member of this request in recent and its time, or
-- nil: by its ID and cost, else by its ID whatever the cost.
local function rfind()
  local s = tcall(recent, nil, 'ZSCORE', rmember)
  if s then return rmember, tonumber(s) end
  local all = redis.call('ZRANGE', recent, 0, -1, 'WITHSCORES')
  for k = 1, #all, 2 do
    if string.sub(all[k], 1, #id) == id and (#all[k] == #id or tonumber(string.sub(all[k], #id + 1))) then
      return all[k], tonumber(all[k + 1])
    end
  end
  return nil
end

-- lcall runs a command on the log. The log's first one finds a log of
-- the wrong type before anything of the exact section is written (the
-- series' sums, which step 1 may have changed, are saved first): the log
-- is deleted and the run starts again, with no log.
local function lcall(cmd, ...)
  return tcall(log, function()
    if nsers > 0 then bsave() end
    error(RESTART)
  end, cmd, ...)
end

-- Refund: remove the entry and its cost from every window that counts it,
-- and from the bucket it was counted in.
if op == 'refund' then
  local changed = 0
  -- The log is read first: one of the wrong type restarts the run (lcall)
  -- before the buckets' refund writes anything, so that the run that
  -- follows finds the admission among the recent ones, refunds it and
  -- reports it (the log, lost, holds nothing to refund).
  local s = lcall('ZSCORE', id)
  if nsers > 0 then
    local m, t = rfind()
    if m then
      local c = cost
      if #m == #id then c = 1 elseif m ~= rmember then c = tonumber(string.sub(m, #id + 1)) end
      for j = 1, nsers do
        local sr = sers[j]
        local b = bucket(t, sr.p)
        local left = nil
        if b >= sr.f and b <= sr.h then
          left = redis.pcall('HINCRBY', bkt, sr.name .. ':' .. fmt(b), -c)
          if type(left) ~= 'number' or left < 0 or sr.n < c then
            -- The bucket or the sum held what the script never writes
            -- (a bucket left with less than the refund, a sum less than
            -- it): the bucket counts big, the sum is rebuilt.
            redis.call('HSET', bkt, sr.name .. ':' .. fmt(b), fmt(sr.big))
            rebuild(sr, sr.f)
            repaired, left = true, nil
          else
            sr.n, sr.dirty = sr.n - c, true
          end
          if left and left <= 0 then
            redis.call('HDEL', bkt, sr.name .. ':' .. fmt(b))
            -- The newest bucket emptied: the newest one left is older.
            while b == sr.h and sr.h >= sr.f do
              local names = {}
              for k = sr.h - 1, math.max(sr.f, sr.h - 100), -1 do names[#names + 1] = sr.name .. ':' .. fmt(k) end
              local got = #names > 0 and redis.call('HMGET', bkt, unpack(names)) or {}
              local found = nil
              for k = 1, #got do
                if got[k] then found = sr.h - k break end
              end
              if found then
                sr.h = found
              else
                sr.h = math.max(sr.f - 1, sr.h - 1 - #names)
                b = sr.h
              end
            end
          end
        end
      end
      redis.call('ZREM', recent, m)
      changed = 1
    end
    bsave()
  end
  if not s then return flag({changed, now}) end
  s = tonumber(s)
  if xlog and xlog % 2 == 0 then
    -- A plain log: the entry is all there is.
    lcall('ZREM', id)
    return flag({1, now})
  end
  -- damaged: the entry's cost, or a window's cut or sum, is not what the
  -- script writes; then every sum is deleted, and rebuilt from the log
  -- when next used.
  local c, damaged = tcall(costs, nil, 'HGET', id), false
  if c then
    c = whole(c)
    if not c or c < 1 then damaged = true end
  else
    c = 1
  end
  local raw = tcall(state, nil, 'HGETALL')
  local args = {}
  if xlog then
    -- A state hash of another life of the log is not adjusted.
    for i = 1, #raw, 2 do
      if raw[i] == 'x' and tonumber(raw[i + 1]) ~= xlog then raw = {} break end
    end
  end
  for i = 1, #raw, 2 do
    local f = raw[i]
    local cut = whole(raw[i + 1])
    if string.sub(f, 1, 1) == 'c' and not cut then
      damaged = true
    elseif string.sub(f, 1, 1) == 'c' and s > cut then
      local w, found = string.sub(f, 2), false
      for j = 1, #raw, 2 do
        if raw[j] == 's' .. w then
          local sum = whole(raw[j + 1])
          if not sum or not c or sum < c then damaged = true else found = true end
          args[#args + 1] = 's' .. w
          args[#args + 1] = fmt((sum or 0) - (c or 0))
        end
      end
      if not found then damaged = true end
    end
  end
  if damaged then
    args = {}
    for i = 1, #raw, 2 do
      local k = string.sub(raw[i], 1, 1)
      if k == 'c' or k == 's' then args[#args + 1] = raw[i] end
    end
    if #args > 0 then redis.call('HDEL', state, unpack(args)) end
    repaired = true
  elseif #args > 0 then
    redis.call('HSET', state, unpack(args))
  end
  lcall('ZREM', id)
  tcall(costs, nil, 'HDEL', id)
  return flag({1, now})
end

-- The exact log (skipped when every policy is bucketed).
local weighted, retention, out = false, longest, {}
local counts, sums, cuts = {}, {}, {}
-- special: the log keeps a state hash (see the log's mode above). nolog:
-- there is no log. nocosts: costs were recorded but the costs hash is
-- gone (all such entries left, or it was lost): every entry counts 1.
-- hold: keep every entry until then (µs), for a limiter of another
-- retention whose expiry a plain log had. stale: the state hash holds
-- fields of another life of the log, deleted before it is written.
local nolog = xlog == -2
-- foreign: an even expiry without this limiter's tag, set by a limiter of
-- another retention (or by a version of this script that kept a state
-- hash for every log): read as a special log that lost its state.
local foreign = xlog ~= nil and xlog >= 0 and xlog % 2 == 0 and xlog % 1024 ~= tag(longest)
local special = xlog == nil or not plain(xlog, longest)
local nocosts, hold, newhold, stale, evicted = false, 0, false, false, false

-- convert makes a plain log special, deleting what an earlier life of the
-- log left in the state and costs keys; the marks start with this limiter.
local function convert()
  if special then return end
  special, st = true, {}
  redis.call('DEL', state, costs)
  out[#out + 1], out[#out + 2] = 'r', fmt(longest)
  out[#out + 1], out[#out + 2] = 'ru', fmt(now + longest + math.floor(longest / 4))
end

-- units returns the sum of the costs of the entries stamped in (lo, hi].
-- A cost that is not a whole number from 1 on (a stray write) counts big,
-- the largest limit: it is written so, and recount is set, since the
-- running sums counted another cost for it.
local recount = false
local function units(lo, hi)
  if not weighted or nocosts then return lcall('ZCOUNT', '(' .. lo, hi) end
  local members = lcall('ZRANGEBYSCORE', '(' .. lo, hi)
  local total = #members
  for i = 1, #members, 500 do
    local cs = tcall(costs, nil, 'HMGET', unpack(members, i, math.min(i + 499, #members)))
    for j = 1, #cs do
      if cs[j] then
        local c = whole(cs[j])
        if not c or c < 1 then
          c, recount, repaired = big, true, true
          tcall(costs, nil, 'HSET', members[i + j - 1], fmt(big))
        end
        total = total + c - 1
      end
    end
  end
  return total
end

if nexact > 0 then
  st = {}
  if special then
    local raw = tcall(state, nil, 'HGETALL')
    for i = 1, #raw, 2 do st[raw[i]] = raw[i + 1] end
    if next(st) and xlog and tonumber(st['x']) ~= xlog and (tonumber(st['x']) or 0) > 1e14 then
      -- The state of a script that kept one for every log (its x in µs):
      -- valid, but its expiry is rewritten.
      st['x'] = nil
    elseif next(st) and ((xlog and tonumber(st['x']) ~= xlog) or (not xlog and redis.call('EXISTS', log) == 0)) then
      -- The state of a log that was lost (or, on Redis 6.2, is gone).
      stale, st = true, {}
      if not xlog then redis.call('DEL', costs) end
    end
    -- Without PEXPIRETIME (Redis 6.2) nothing checks x against the log's
    -- expiry: one the script never writes ("nan", 1e300) would never
    -- move, or fail PEXPIREAT. It is written anew, as for a lost state.
    if st['x'] and not whole(st['x']) then st['x'], repaired = nil, true end
    -- Entries of cost 1 have no field in costs. Until an entry of another
    -- cost is recorded ('k'), a window's sum is its number of entries. A
    -- special log that lost its state is rebuilt as weighted, from the
    -- costs that are left.
    weighted = st['k'] ~= nil or (next(st) == nil and not nolog and (xlog ~= nil or redis.call('EXISTS', costs) == 1))
    if not weighted then
      -- Sums are kept only once 'k' is set: a state with a sum but no 'k'
      -- lost it (a stray HDEL), and its costs count again.
      for f in pairs(st) do
        if string.sub(f, 1, 1) == 's' then weighted, repaired = true, true break end
      end
    end
    if weighted and not st['k'] then out[#out + 1], out[#out + 2] = 'k', '1' end
    -- A hold, a retention and its mark are whole numbers (whole): one the
    -- script never writes ("inf", "nan", 1e300) would make an expiry no
    -- command takes. What a damaged one kept is not known: every entry is
    -- held until the keys' expiry (the state's x, else the log's), which
    -- outlasts any hold and mark written before it, so that no limiter of
    -- a longer retention loses entries its window counts; the hold is
    -- written, and a damaged mark rewritten (step 1).
    local h = whole(st['h'])
    if (st['h'] and not h) or (st['r'] and not whole(st['r'])) or (st['ru'] and not whole(st['ru'])) then
      local x = whole(st['x']) or xlog
      h, newhold, repaired = h or 0, true, true
      if x and x > 0 and at_(x) > h then h = at_(x) end
    end
    if h and h > now then hold = h end
    if foreign and at_(xlog) > hold then
      -- Keep every entry until the other limiter's expiry, as its
      -- retention mark would.
      hold, newhold = at_(xlog), true
    end
  end

  -- 1. Retention follows the longest window of any limiter on this log:
  --    one with a longer window than ours keeps its entries for as long as
  --    it was last seen within its window (and a quarter more, so that its
  --    mark is not rewritten on every call). A plain log has one retention.
  if special then
    local r, ru = whole(st['r']), whole(st['ru'])
    if r and ru and ru > now and r > longest then
      retention = r
    elseif r ~= longest or not ru or ru < now + longest then
      out[#out + 1], out[#out + 2] = 'r', fmt(longest)
      out[#out + 1], out[#out + 2] = 'ru', fmt(now + longest + math.floor(longest / 4))
    end
  end

  -- A costs hash lost beside its log leaves sums too high (stricter, never
  -- looser): when the expiry is due to move (at least once per quarter of
  -- the retention), a missing costs hash makes every sum a count again.
  -- The same moment recounts every sum from the log (below): a member
  -- written into the log by hand, which no sum ever held, would keep a
  -- sum short by its units once the cut passed it; this bounds that to
  -- a quarter of the retention.
  local due = weighted and (not tonumber(st['x']) or at_(tonumber(st['x'])) < now + retention)
  if due then
    nocosts = redis.call('EXISTS', costs) == 0
  end

  -- 2. With costs: move every window's cut-point to now - W, subtracting
  --    the entries it passes. Each entry is passed once per window, so this
  --    is amortised O(1) per admission whatever the cost. A window longer
  --    than the retention has lost entries: drop it (it is rebuilt when
  --    next used). Without the costs hash, every sum is rebuilt as a count.
  --    A cut or sum that is not what the script writes (a stray write:
  --    not a whole number, a cut after now, a sum less than what leaves
  --    it) is deleted, and the sum rebuilt from the log like a missing
  --    one; a damaged cost (see units) rebuilds every sum.
  if weighted then
    local wins = {}
    for f, v in pairs(st) do
      if string.sub(f, 1, 1) == 'c' then
        local w = string.sub(f, 2)
        local W = whole(w)
        local c, s = whole(v), whole(st['s' .. w])
        if not W or W < 1 or fmt(W) ~= w or not c or not s or c > now then
          redis.call('HDEL', state, 'c' .. w, 's' .. w)
          repaired = true
        elseif W > retention or nocosts then
          redis.call('HDEL', state, 'c' .. w, 's' .. w)
        else
          if now - W > c then
            local passed = units(fmt(c), fmt(now - W))
            s, c = s - passed, now - W
          end
          -- Every entry costs at least one unit, so a sum below the
          -- count of its window's entries holds less than the log: a
          -- stray write of a smaller number, or a member written into
          -- the log by hand, which no sum ever held, once the cut passed
          -- it. Checked on every read of the sum (one ZCOUNT, O(log n)),
          -- so that no decision trusts such a sum.
          if s < 0 or s < lcall('ZCOUNT', '(' .. fmt(c), '+inf') then
            recount, repaired = true, true
          end
          sums[w], cuts[w], wins[w] = s, c, W
        end
      end
    end
    for i = 1, npolicies do
      local w = wkeys[i]
      if w and not sums[w] then
        cuts[w], wins[w] = now - windows[i], windows[i]
        sums[w] = units(fmt(cuts[w]), '+inf')
      end
    end
    if recount or due then
      -- Costs read above were rewritten, or the expiry is due to move:
      -- every sum counts the log anew. A sum that differs, not being one
      -- of a rewrite, held what the script never wrote.
      for w, W in pairs(wins) do
        local s = units(fmt(now - W), '+inf')
        if not recount and s ~= sums[w] then repaired = true end
        cuts[w], sums[w] = now - W, s
      end
    end
  end

  -- 3. Evict what left the retention. An entry stamped s counts in a
  --    window while s > now - W, so it frees its units exactly at s + W.
  --    Nothing is evicted under a hold; a plain log evicts when its expiry
  --    is due to move.
  if hold == 0 and not nolog and (special or at_(xlog) < now + longest) then
    local horizon = fmt(now - retention)
    if weighted and not nocosts then
      local old = lcall('ZRANGEBYSCORE', '-inf', horizon)
      for i = 1, #old, 500 do
        tcall(costs, nil, 'HDEL', unpack(old, i, math.min(i + 499, #old)))
      end
    end
    evicted = lcall('ZREMRANGEBYSCORE', '-inf', horizon) > 0
  end

  -- 4. Count every exact policy's window: its sum, or without costs its
  --    entries.
  local byw = {}
  for i = 1, npolicies do
    local w = wkeys[i]
    if not w then
      -- bucketed
    elseif weighted then
      counts[i] = sums[w]
    else
      if not byw[w] then
        byw[w] = 0
        if not nolog then byw[w] = lcall('ZCOUNT', '(' .. fmt(now - windows[i]), '+inf') end
      end
      counts[i] = byw[w]
    end
  end
end
for i = 1, npolicies do
  if series[i] then counts[i] = series[i].n end
end

-- add records an entry of cost stamped t in the log and in every window
-- whose cut-point it is after; it returns false when the log already
-- holds this ID (a retry of a call that was recorded), recording nothing.
-- The first entry of a cost other than 1 makes the log special and
-- starts the running sums, from the counts of entries so far.
local function add(t)
  if lcall('ZADD', 'NX', fmt(t), id) == 0 then return false end
  wrote = true
  if cost ~= 1 and not weighted then
    convert()
    for i = 1, npolicies do
      local w = wkeys[i]
      if w then
        -- The count already holds this entry when t is in the window.
        local n = lcall('ZCOUNT', '(' .. fmt(now - windows[i]), '+inf')
        if t > now - windows[i] then n = n - 1 end
        cuts[w], sums[w] = now - windows[i], n
      end
    end
    weighted, nocosts = true, false
    out[#out + 1], out[#out + 2] = 'k', '1'
  end
  if cost ~= 1 then
    tcall(costs, nil, 'HSET', id, fmt(cost))
    nocosts = false
  end
  for w, c in pairs(cuts) do
    if t > c then sums[w] = sums[w] + cost end
  end
  for i = 1, npolicies do
    if wkeys[i] and t > now - windows[i] then counts[i] = counts[i] + cost end
  end
  return true
end

-- replayed reports whether this call's ID was already recorded: a retry
-- of a call that ran (go-redis resends a command after a timeout or EOF).
local function replayed()
  if nexact > 0 then return lcall('ZSCORE', id) ~= false end
  return tcall(recent, nil, 'ZSCORE', rmember) ~= false
end

-- 5. Decide (take) or record without a check (record). Recording is
--    ZADD NX, so the first send of an ID costs no lookup: a retry of a
--    call that was recorded finds its ID and records nothing (and is
--    reported admitted again). Only a denial looks the ID up.
local allowed, added, keep = 1, false, now + retention
if op == 'record' then
  allowed = 0
  local fresh = true
  if nexact > 0 then
    if at > now - longest then
      fresh = add(at)
      added = fresh
      if at + longest > keep then keep = at + longest end
    elseif nsers > 0 then
      fresh = not replayed()
    end
  end
  if fresh and nsers > 0 then
    -- Stamped more than the shortest bucketed window ahead (a recorder
    -- whose clock runs ahead of the server's), it counts in the buckets
    -- as if stamped that window ahead, as the memory store counts it: a
    -- bucket any distance ahead would be read as damaged (past top) by
    -- the next call and dropped. It then counts from now until a window
    -- after that bucket, over every window holding the server's time of
    -- the call.
    local bt = at
    for j = 1, nsers do
      if bt > now + sers[j].w then bt = now + sers[j].w end
    end
    if radd(bt) and brecord(bt) then added = true end
  end
  if added then allowed = 1 end
else
  for i = 1, npolicies do
    if counts[i] + cost > limits[i] then allowed = 0 end
  end
  if allowed == 1 then
    local fresh = true
    if nexact > 0 then
      fresh = add(now)
      added = fresh
    end
    if fresh and nsers > 0 and (radd(now) or nexact > 0) then
      brecord(now)
      added = true
    end
  elseif replayed() then
    allowed = 1
  end
end
if nsers > 0 then bsave() end

-- 6. Save the windows and keep every key for as long as an entry may
--    count. A special log's keys expire at x (an odd ms, recorded in the
--    state), which moves a quarter of the retention past what is needed
--    when it falls short, so that most calls set no expiry; a log that
--    had no key, or a costs hash written to (it may have emptied), gets x
--    as well. A plain log's expiry moves the same way, to an even ms
--    carrying its retention's tag.
if nexact > 0 then
  if special then
    if weighted then
      for w, s in pairs(sums) do
        out[#out + 1], out[#out + 2] = 's' .. w, fmt(s)
        out[#out + 1], out[#out + 2] = 'c' .. w, fmt(cuts[w])
      end
    end
    if newhold then out[#out + 1], out[#out + 2] = 'h', fmt(hold) end
    if hold > keep then keep = hold end
    local x, renew = tonumber(st['x']), false
    if not x or keep > at_(x) then
      x = math.ceil((keep + math.floor(retention / 4) + off) / 1000)
      if x % 2 == 0 then x = x + 1 end
      renew = true
      out[#out + 1], out[#out + 2] = 'x', fmt(x)
    end
    if renew and xlog and not weighted and hold == 0 and retention == longest then
      -- Nothing left that needs the state (no costs, no other limiter's
      -- retention, no hold): the log becomes plain again.
      redis.call('DEL', state)
      redis.call('PEXPIREAT', log, plainx(keep + math.floor(longest / 4) + off, longest))
    elseif renew then
      if stale then redis.call('DEL', state) end
      redis.call('HSET', state, unpack(out))
      redis.call('PEXPIREAT', log, x)
      redis.call('PEXPIREAT', state, x)
      if weighted then redis.call('PEXPIREAT', costs, x) end
    else
      if stale then redis.call('DEL', state) end
      if #out > 0 then redis.call('HSET', state, unpack(out)) end
    end
    if not renew and added then
      if nolog or evicted or (not xlog and redis.call('PTTL', log) == -1) then redis.call('PEXPIREAT', log, x) end
      if cost ~= 1 then redis.call('PEXPIREAT', costs, x) end
    end
  elseif added and (nolog or at_(xlog) < keep) then
    redis.call('PEXPIREAT', log, plainx(keep + math.floor(longest / 4) + off, longest))
  end
end

if op == 'record' then return flag({allowed, now}) end

-- 7. Remaining, retry-after and reset-after for every policy.
local newest_at = nil
if added then
  newest_at = now
elseif nexact > 0 then
  local newest = lcall('ZRANGE', -1, -1, 'WITHSCORES')
  newest_at = newest[2] and tonumber(newest[2]) or nil
end

-- unit_at returns the time of the entry holding the k-th oldest unit
-- stamped after cut: walking entries, not units, so a denial costs the
-- same whatever the costs.
local function unit_at(cut, k)
  if not weighted then
    local e = lcall('ZRANGEBYSCORE', '(' .. cut, '+inf', 'WITHSCORES', 'LIMIT', k - 1, 1)
    return tonumber(e[2])
  end
  local offset, acc = 0, 0
  while true do
    local batch = lcall('ZRANGEBYSCORE', '(' .. cut, '+inf', 'WITHSCORES', 'LIMIT', offset, 200)
    if #batch == 0 then return nil end
    local members = {}
    for j = 1, #batch, 2 do members[#members + 1] = batch[j] end
    local cs = tcall(costs, nil, 'HMGET', unpack(members))
    for j = 1, #members do
      local c = 1
      if cs[j] then c = whole(cs[j]) or 0 end
      if c < 1 then c = big end
      acc = acc + c
      if acc >= k then return tonumber(batch[2 * j]) end
    end
    offset = offset + #members
  end
end

local reply = {allowed, now, 0}
local steady = 0
for i = 1, npolicies do
  local limit, window, sr = limits[i], windows[i], series[i]
  local count = counts[i]
  local retry, reset = 0, 0
  if sr then
    count = sr.n
    local need = 0
    if count + cost > limit then need = count + cost - limit end
    if allowed == 0 then
      local first, last = walk(bkt, sr.name, sr.f, sr.h, need, sr.big)
      if first then
        local leave = (first + 1) * sr.p + window - now
        if steady == 0 or leave < steady then steady = leave end
      end
      if last then
        retry = (last + 1) * sr.p + window - now
      elseif need > 0 then
        retry = window
      end
    end
    if sr.n > 0 then reset = (sr.h + 1) * sr.p + window - now end
  else
    if allowed == 0 then
      local cut = fmt(cuts[wkeys[i]] or now - window)
      local first = lcall('ZRANGEBYSCORE', '(' .. cut, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
      if first[2] then
        local leave = tonumber(first[2]) + window - now
        if steady == 0 or leave < steady then steady = leave end
      end
      if count + cost > limit then
        -- A violated policy always has a retry: the window, when the
        -- units to leave are not found (a log that lost entries).
        local s = unit_at(cut, count + cost - limit)
        retry = window
        if s then retry = s + window - now end
      end
    end
    if newest_at and newest_at + window > now then reset = newest_at + window - now end
  end
  local remaining = limit - count
  if remaining < 0 then remaining = 0 end
  reply[3 * i + 1], reply[3 * i + 2], reply[3 * i + 3] = remaining, retry, reset
end
reply[3] = steady
return flag(reply)
end

-- go runs run, and once more when it stopped at a log of the wrong type,
-- which it deleted (see lcall).
local function go(op, id, cost, at)
  local ok, r = pcall(run, op, id, cost, at)
  if ok then return r end
  if r ~= RESTART then error(r, 0) end
  return run(op, id, cost, at)
end

if op ~= 'takew' then
  local reply = go(op, id, cost, at)
  -- A take admitted without a write is a retry that found its admission.
  if not wrote and (op == 'record' or (op == 'take' and reply[1] % 2 == 1)) then
    local was = repaired
    mark()
    if repaired and not was then reply[1] = reply[1] + 2 end
  end
  return reply
end

-- Write-back (issue 30): this server's identity, then every kept
-- admission it does not hold, then the take.
-- A server that refuses INFO (a renamed command, an ACL) has identity 0:
-- every kept admission is recorded, and stays unknown to the client.
local si, ri = redis.pcall('INFO', 'server'), redis.pcall('INFO', 'replication')
local ident = 0
if type(si) == 'string' and type(ri) == 'string' then
  local runid, replid = string.match(si, 'run_id:(%x+)'), string.match(ri, 'master_replid:(%x+)')
  if runid and replid then ident = tonumber(string.sub(redis.sha1hex(runid .. replid), 1, 13), 16) + 1 end
end
for e = 0, nkept - 1 do
  local eid, ecost, eat, eserver = ARGV[7 + 4 * e], tonumber(ARGV[8 + 4 * e]), tonumber(ARGV[9 + 4 * e]), tonumber(ARGV[10 + 4 * e])
  if not ecost or ecost < 1 or not eat or eat < 1 or not eserver then
    return redis.error_reply('ERR slidelog: bad arguments')
  end
  if ident == 0 or eserver ~= ident then go('record', eid, ecost, eat) end
end
local reply = go('take', id, cost, at)
if not wrote then
  local was = repaired
  mark()
  if repaired and not was then reply[1] = reply[1] + 2 end
end
reply[#reply + 1] = ident
return reply
