-- slidelog: what the scripts share, written once. scripts.go joins the
-- functions each of script.lua, common.lua and peek.lua calls (and those
-- they call) into it right after its first line (#!lua), at package
-- init, so each script's text, and so its SHA1, is one constant per
-- build; their Redis 6.2 variants drop that line (legacy.lua takes its
-- place in script.lua's). Only functions, no command, one per paragraph
-- (paragraphs are separated by blank lines; one that defines no function
-- is not joined in). A script run defines every function joined into it,
-- whether it calls it or not, so each script gets only those it names.

-- clock returns now (µs) and off, the server's clock minus now: now is
-- the server's time (TIME) when the caller sent 0 (off 0), otherwise the
-- caller's (tests), and then a server expiry x (ms) is this call's time
-- x * 1000 - off.
local function clock(now)
  local t = redis.call('TIME')
  local server = tonumber(t[1]) * 1000000 + tonumber(t[2])
  if now == 0 then return server, 0 end
  return now, server - now
end

-- fmt spells an integer in full (tostring would round it to 14 digits).
local function fmt(n) return string.format('%.0f', n) end

-- A plain log (see script.lua, "the log's mode") is the sorted set alone;
-- its expiry is an even server ms whose residue modulo 1024 is the tag of
-- the retention r (µs) of the limiter that last set it: tag names r, so
-- that a limiter knows whether it set the expiry itself. Two retentions
-- share a tag only when their milliseconds differ by a multiple of 509
-- (for whole seconds: by a multiple of 509 s).
local function tag(r) return 2 * (math.floor(r / 1000) % 509) end

-- plain reports whether x, the log's PEXPIRETIME (-2: no log), is no log
-- or a plain log of retention r.
local function plain(x, r)
  return x == -2 or (x >= 0 and x % 2 == 0 and x % 1024 == tag(r))
end

-- plainx is the first server ms at or after the server time t (µs) that
-- carries the tag of r: a plain log's expiry.
local function plainx(t, r)
  local ms = math.ceil(t / 1000)
  return ms + (tag(r) - ms % 1024) % 1024
end

-- Buckets (policies with a precision): bucket b of width p is the
-- interval [b*p, (b+1)*p); series 'W/P' of the hash bkt holds field
-- 'W/P:b', the units admitted in bucket b.

-- bucket returns the index of the bucket of width p holding time t,
-- floor(t/p), corrected for the rounding of the division.
local function bucket(t, p)
  local b = math.floor(t / p)
  if b * p > t then b = b - 1 elseif (b + 1) * p <= t then b = b + 1 end
  return b
end

-- top returns the newest bucket of width p a series of window w may
-- hold at now: the bucket of now, and a window's more for a clock that
-- went back.
local function top(now, w, p) return bucket(now, p) + math.ceil(w / p) end

-- whole returns v, a field the scripts wrote as a whole number (a count
-- of units, a cost, a sum, a bucket's index, a time), as a number: nil
-- when it is missing or not such a number (a stray write: a word, a
-- fraction, a negative number), which the scripts never write.
local function whole(v)
  local n = tonumber(v)
  if n and n >= 0 and n < 9007199254740992 and n % 1 == 0 then return n end
  return nil
end

-- walk returns, for the series name of bkt whose buckets f to h may hold
-- units, the first bucket that holds units and the bucket holding the
-- k-th oldest unit (nil when k is 0 or more than the series holds),
-- reading the buckets oldest first, 100 at a time. A bucket whose units
-- are not a whole number counts big.
local function walk(bkt, name, f, h, k, big)
  local first, acc, b = nil, 0, f
  while b <= h do
    local names = {}
    for j = b, math.min(b + 99, h) do names[#names + 1] = name .. ':' .. fmt(j) end
    local got = redis.call('HMGET', bkt, unpack(names))
    for j = 1, #names do
      if got[j] then
        first = first or b + j - 1
        acc = acc + (whole(got[j]) or big)
        if k > 0 and acc >= k then return first, b + j - 1 end
      end
    end
    if k <= 0 and first then return first, nil end
    b = b + 100
  end
  return first, nil
end

-- scan reads every field of the series name of bkt (HGETALL), for a
-- series whose sum or bounds are damaged: it returns the units of its
-- buckets from lo on, a bucket whose units are not a whole number
-- counting big (never fewer than it may stand for), and the newest of
-- them (lo - 1 when there is none); then the fields that do not count
-- (buckets before lo or after last, names of no bucket) and the buckets
-- whose units are not a whole number, for a script that repairs them;
-- and, given from, the units of the buckets from `from` to lo - 1, which
-- a sum of the buckets from `from` on holds but no longer counts (nil
-- when one of them is not a whole number).
local function scan(bkt, name, lo, last, big, from)
  local all = redis.call('HGETALL', bkt)
  local prefix = name .. ':'
  local n, h, drop, bad, gone = 0, lo - 1, {}, {}, 0
  for k = 1, #all, 2 do
    local field = all[k]
    if string.sub(field, 1, #prefix) == prefix then
      local suffix = string.sub(field, #prefix + 1)
      local b = whole(suffix)
      if not b or fmt(b) ~= suffix or b < lo or b > last then
        drop[#drop + 1] = field
        if from and gone and b and b >= from and b < lo and fmt(b) == suffix then
          local v = whole(all[k + 1])
          if v then gone = gone + v else gone = nil end
        end
      else
        local v = whole(all[k + 1])
        if not v then v, bad[#bad + 1] = big, field end
        n = n + v
        if b > h then h = b end
      end
    end
  end
  return n, h, drop, bad, gone
end

-- A series' sum n may also hold a number the script might have written but
-- smaller than its buckets' (a stray write), which no check of its form
-- finds: a decision (script.lua, "Buckets, step 1") recounts a sum that
-- passed those checks from its buckets (scan) when it holds less than the
-- bucket of now, and any series whose recount is due (rdue).
-- peek.lua reads the sums as that decision does, without writing.

-- heads returns the fields of the bucket hash that one HMGET reads for
-- the series sr[1] to sr[k] (tables with name, w and p) at now: 3j-2 to 3j
-- series j's sum, first and newest bucket, 3k+1 the hash's expiry 'x',
-- 3k+1+j series j's bucket of now, 4k+1+j series j's recount mark 'Sd';
-- and span, the longest window of the series.
local function heads(sr, k, now)
  local fields, span = {}, 0
  for j = 1, k do
    local s = sr[j]
    fields[3 * j - 2], fields[3 * j - 1], fields[3 * j] = s.name .. 'n', s.name .. 'f', s.name .. 'h'
    fields[3 * k + 1 + j] = s.name .. ':' .. fmt(bucket(now, s.p))
    fields[4 * k + 1 + j] = s.name .. 'd'
    if s.w > span then span = s.w end
  end
  fields[3 * k + 1] = 'x'
  return fields, span
end

-- rdue reports whether series j is recounted from its buckets at now:
-- when its recount mark 'Sd', read by heads into meta, is missing, not
-- after now, or more than a quarter of span ahead (a clock that went
-- back, a stray write, a limiter of a longer span). A decision that
-- recounts a series sets its mark a quarter of span later. (The mark is
-- not the expiry 'x': a Record stamped ahead moves 'x' as far ahead as
-- its bucket, and the recount would wait as long. It is one per series,
-- not one per hash: a decision recounts only its own series, and a
-- mark one limiter kept moving would leave another limiter's series,
-- sharing the hash, never recounted.)
local function rdue(meta, k, j, now, span)
  local d = whole(meta[4 * k + 1 + j])
  return not d or d <= now or d > now + math.floor(span / 4)
end

-- recheck reports whether series j's sum n, read by heads into meta and
-- of a form that passed, is recounted from its buckets: when the recount
-- is due (rdue), or n holds less than the bucket of now.
local function recheck(meta, k, j, now, span, n)
  local cur = whole(meta[3 * k + 1 + j])
  return rdue(meta, k, j, now, span) or (cur ~= nil and n < cur)
end
