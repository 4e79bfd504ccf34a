-- wrk script: POST one JSON body per request, taken in turn from a file (one body per line),
-- so that every request of a run can carry a text the server has not seen; or GET the path
-- (METHOD GET, the file's lines ignored). At the end, print one JSON line with the counts and
-- the latency percentiles (microseconds).
--   wrk -s load.lua URL -- PATH TOKEN BODIES_FILE [METHOD]
local bodies = {}
local next_body = 0
local path, headers, method

function init(args)
   path = args[1]
   method = args[4] or "POST"
   headers = {}
   if method == "POST" then
      headers["Content-Type"] = "application/json"
   end
   if args[2] ~= "" then
      headers["Authorization"] = "Bearer " .. args[2]
   end
   for line in io.lines(args[3]) do
      bodies[#bodies + 1] = line
   end
end

function request()
   if method ~= "POST" then
      return wrk.format(method, path, headers)
   end
   next_body = next_body + 1
   local body = bodies[((next_body - 1) % #bodies) + 1]
   return wrk.format("POST", path, headers, body)
end

function done(summary, latency, requests)
   local e = summary.errors
   io.write(string.format(
      '{"requests":%d,"duration_us":%d,"connect":%d,"read":%d,"write":%d,"status":%d,' ..
      '"timeout":%d,"p50_us":%d,"p95_us":%d,"p99_us":%d,"max_us":%d}\n',
      summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,
      latency:percentile(50), latency:percentile(95), latency:percentile(99), latency.max))
end
