-- wrk script for the e2e load: rotates CF-IPCountry over the example's countries and
-- records, for every response, "status worker clock revision" (X-DW-Worker, X-DW-Clock,
-- X-DW-Revision); done() writes every thread's records to $DW_E2E_RECORDS.
local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

local countries = { "DE", "AT", "CH", "FR", "GB", "NL", "SE", "PL", "BR", "MX", "US", "CA",
  "JP", "IN", "SG", "ZZ" }
local requests = {}
local next_request = 0

function init(args)
  for i, country in ipairs(countries) do
    requests[i] = wrk.format("GET", "/", { ["CF-IPCountry"] = country })
  end
  records = {}
  recorded = 0
end

function request()
  next_request = next_request % #requests + 1
  return requests[next_request]
end

-- A header by name, whatever its case: nginx passes PHP's spelling, OpenLiteSpeed lowercases.
local function header(headers, name)
  local value = headers[name]
  if value then
    return value
  end
  local lower = string.lower(name)
  for key, v in pairs(headers) do
    if string.lower(key) == lower then
      return v
    end
  end
  return "-"
end

function response(status, headers, body)
  recorded = recorded + 1
  records[recorded] = status .. " " .. header(headers, "X-DW-Worker") .. " "
    .. header(headers, "X-DW-Clock") .. " " .. header(headers, "X-DW-Revision")
end

function done(summary, latency, requests)
  local out = assert(io.open(os.getenv("DW_E2E_RECORDS"), "w"))
  for _, thread in ipairs(threads) do
    local got = thread:get("records") or {}
    for _, line in ipairs(got) do
      out:write(line, "\n")
    end
  end
  out:close()
end
