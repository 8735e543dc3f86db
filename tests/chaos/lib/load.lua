-- wrk script for the chaos test: one connection per thread (wrk -tN -cN), so request() and
-- response() strictly alternate and each response is paired with the request it answers.
-- Each request carries a random CF-IPCountry and, one time in two, a random X-DW-Sticky
-- key. For every response it records one line
--   <mono_ns> <status> <worker> <clock> <revision> <shard> <origin> <country> <sticky>
-- (mono_ns: CLOCK_MONOTONIC when the response arrived; clock: the worker's X-DW-Clock;
-- "-" for a missing header, "~" for the empty country / no sticky key).
-- Settings from the environment: DW_CHAOS_RECORDS (file prefix; thread i writes
-- <prefix>.<i>), DW_CHAOS_SEED, DW_CHAOS_DELAY_MS (pause between requests, default 4).
local ffi = require("ffi")
ffi.cdef [[
  typedef struct { long tv_sec; long tv_nsec; } dw_timespec;
  int clock_gettime(int clk_id, dw_timespec *tp);
]]
local ts = ffi.new("dw_timespec")
local function mono_ns()
  ffi.C.clock_gettime(1, ts)
  return string.format("%d%09d", tonumber(ts.tv_sec), tonumber(ts.tv_nsec))
end

local countries = { "DE", "AT", "CH", "FR", "GB", "NL", "SE", "PL", "BR", "MX", "US", "CA",
  "JP", "IN", "SG", "IT", "ES", "ZZ", "",
  -- The geography chain: countries only a continent bucket answers, subdivisions with and
  -- without keys of their own, no continent (XX, T1), a bucket's name (never the bucket).
  "SI", "KE", "AR", "US-CA", "DE-BY", "PT-11", "XX", "T1", "continent/EU" }
local stickies = { "u1", "u2", "u3", "u4", "u5", "u6", "u7", "u8" }

local threads = {}
local counter = 0
function setup(thread)
  counter = counter + 1
  thread:set("id", counter)
  table.insert(threads, thread)
end

local out
local pending_country, pending_sticky
local delay_ms

function init(args)
  math.randomseed(tonumber(os.getenv("DW_CHAOS_SEED") or "1") * 100 + id)
  delay_ms = tonumber(os.getenv("DW_CHAOS_DELAY_MS") or "4")
  out = assert(io.open(os.getenv("DW_CHAOS_RECORDS") .. "." .. id, "w"))
  out:setvbuf("full")
end

function delay()
  return delay_ms
end

function request()
  pending_country = countries[math.random(#countries)]
  local headers = { ["CF-IPCountry"] = pending_country }
  pending_sticky = nil
  if math.random(2) == 1 then
    pending_sticky = stickies[math.random(#stickies)]
    headers["X-DW-Sticky"] = pending_sticky
  end
  return wrk.format("GET", "/", headers)
end

-- A header by name, whatever its case: nginx passes PHP's spelling, OpenLiteSpeed lowercases.
local function header(headers, name)
  local value = headers[name]
  if value then return value end
  local lower = string.lower(name)
  for key, v in pairs(headers) do
    if string.lower(key) == lower then return v end
  end
  return "-"
end

function response(status, headers, body)
  local country = pending_country
  if country == nil then country = "?" elseif country == "" then country = "~" end
  out:write(mono_ns(), " ", status, " ", header(headers, "X-DW-Worker"), " ",
    header(headers, "X-DW-Clock"), " ", header(headers, "X-DW-Revision"), " ",
    header(headers, "X-DW-Shard"), " ", header(headers, "X-DW-Origin"), " ",
    country, " ", pending_sticky or "~", "\n")
  out:flush()
end
