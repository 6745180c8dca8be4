-- m0serve's publish on the Redis bus: one atomic step, run by Redis (EVALSHA)
-- for the server (src/bus/redis_bus.cpp embeds this file at build time) and
-- for the Python m0 package outside m0serve (m0/redis_bus.py reads it): the
-- next id, the event appended to its channel's stream, the event published.
-- Since the three happen in one script, id order is publish order across
-- every process, and an event is in the stream exactly when it was published.
--
-- KEYS[1] the id counter          KEYS[2] the epoch: the first id of this data
-- KEYS[3] the channel's stream    KEYS[4] the history length the servers set
-- KEYS[5] the channel's mark: the highest id trimmed from its stream (a
--         cursor below it has a gap the stream cannot fill: m0-reset)
-- ARGV[1] the pub/sub channel     ARGV[2] the history length, "" for KEYS[4] (else 64)
-- ARGV[3] the event name, "" for none
-- ARGV[4] the data
-- ARGV[5] "1" when the data is written to holds verbatim (a raw event:
--         Pushpin's http-stream content), "" or absent otherwise
-- Returns the id.
--
-- Ids are seeded from the clock like the in-process bus (unix ms x 1000), here
-- Redis's clock, on every publish: an id is never below the clock, so ids keep
-- growing when Redis comes back without its data. Numbers stay below 2^53, so
-- Lua's doubles hold them exactly; string.format('%d') writes them in full.
local t = redis.call('TIME')
local seed = tonumber(t[1]) * 1000000 + math.floor(tonumber(t[2]) / 1000) * 1000
local fresh = redis.call('EXISTS', KEYS[1]) == 0
local id = redis.call('INCR', KEYS[1])
if id <= seed then
  id = seed + 1
  redis.call('SET', KEYS[1], string.format('%d', id))
end
if fresh then
  redis.call('SET', KEYS[2], string.format('%d', id))
end
local raw = ARGV[5] or ''
local maxlen = ARGV[2]
if maxlen == '' then
  maxlen = redis.call('GET', KEYS[4]) or '64'
end
local sid = string.format('%d', id)
-- Stream entry ids are the m0 ids ("<id>-0"). Trimmed by hand, so the mark
-- knows the newest entry that goes (Redis's own max-deleted-entry-id counts
-- XDEL, not trimming).
local keep = tonumber(maxlen)
if keep <= 0 then
  redis.call('SET', KEYS[5], sid)
else
  local over = redis.call('XLEN', KEYS[3]) + 1 - keep
  if over > 0 then
    local gone = redis.call('XRANGE', KEYS[3], '-', '+', 'COUNT', over)
    local last = gone[#gone][1]
    redis.call('SET', KEYS[5], string.sub(last, 1, string.find(last, '-', 1, true) - 1))
    redis.call('XTRIM', KEYS[3], 'MAXLEN', keep - 1)
  end
  redis.call('XADD', KEYS[3], sid .. '-0', 'e', ARGV[3], 'd', ARGV[4], 'r', raw)
end
redis.call('PUBLISH', ARGV[1], sid .. '\n' .. ARGV[3] .. '\n' .. raw .. '\n' .. ARGV[4])
return id
