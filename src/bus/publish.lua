-- m0serve's publish on the Redis bus: one atomic step, run by Redis (EVALSHA)
-- for the server (src/bus/redis_bus.cpp embeds this file at build time) and
-- for the Python m0 package outside m0serve (m0/redis_bus.py reads it): the
-- next id, the event appended to its channel's stream, the event published.
-- Since the three happen in one script, id order is publish order across
-- every process, and an event is in the stream exactly when it was published.
--
-- Published on pub/sub in id order, one message a run (events of the batch
-- that follow each other on one channel), in one of two forms
-- (src/bus/redis_message.hpp reads them):
--   single   "ID\nEVENT\nRAW\nDATA": one event (RAW "1" or empty); the only
--            form before batched messages, kept byte for byte.
--   batched  "*1\n", then per event "ID ELEN DLEN RAW\n" EVENT DATA (ELEN,
--            DLEN byte lengths, RAW "1" or "0"): two or more events of a run,
--            at most `limit` bytes in all; a longer run is cut into several
--            messages, and an event that fits with no other goes alone,
--            single. One message a run, not a channel: a server holding two
--            channels of one batch hears its events in id order as they come.
-- A channel gets batched messages only when every subscriber reads them: a
-- reader subscribes to the readers' name m0:DB:r:CHANNEL in the same
-- SUBSCRIBE as m0:DB:e:CHANNEL, so the two counts are equal; any other
-- subscriber (an m0serve from before batched messages, during a rolling
-- deploy) makes them differ, and the channel gets a single message an event.
--
-- One event takes 5 keys and 5 arguments; a batch of N events repeats them N
-- times, event i's at KEYS[5i-4 .. 5i] and ARGV[5i-4 .. 5i], and is numbered,
-- kept and published in one step: ids consecutive, in the batch's order.
-- KEYS[1] the id counter          KEYS[2] the epoch: the first id of this data
-- KEYS[3] the channel's stream    KEYS[4] the history length the servers set
-- KEYS[5] the channel's mark: the highest id trimmed from its stream (a
--         cursor below it has a gap the stream cannot fill: m0-reset)
-- ARGV[1] the pub/sub channel, m0:DB:e:CHANNEL (its readers' name, m0:DB:r:CHANNEL, is
--         made from it)        ARGV[2] the history length, "" for KEYS[4] (else 64)
-- ARGV[3] the event name, "" for none
-- ARGV[4] the data
-- ARGV[5] "1" when the data is written to holds verbatim (a raw event:
--         Pushpin's http-stream content), "" or absent otherwise (absent:
--         only with one event)
-- The counter, epoch, history length and the history length argument are
-- read from the first event's places.
-- Returns the first event's id; a batch's are consecutive from it.
--
-- Ids are seeded from the clock like the in-process bus (unix ms x 1000), here
-- Redis's clock, on every publish: an id is never below the clock, so ids keep
-- growing when Redis comes back without its data. Numbers stay below 2^53, so
-- Lua's doubles hold them exactly; string.format('%d') writes them in full.
local n = math.floor(#KEYS / 5)
local t = redis.call('TIME')
local seed = tonumber(t[1]) * 1000000 + math.floor(tonumber(t[2]) / 1000) * 1000
local fresh = redis.call('EXISTS', KEYS[1]) == 0
local first = redis.call('INCRBY', KEYS[1], n) - n + 1
if first <= seed then
  first = seed + 1
  redis.call('SET', KEYS[1], string.format('%d', first + n - 1))
end
if fresh then
  redis.call('SET', KEYS[2], string.format('%d', first))
end
local maxlen = ARGV[2]
if maxlen == '' then
  maxlen = redis.call('GET', KEYS[4]) or '64'
end
local keep = tonumber(maxlen)
-- Each channel's stream, in the order first seen: trimmed once, after its
-- events are added. A stream given more of the batch's events than it keeps
-- is not given those the trim would drop in this same step: its mark is then
-- the last of them (every older entry goes too).
local streams, marks, order, sids, per, skipped = {}, {}, {}, {}, {}, {}
if keep > 0 then
  for i = 1, n do
    local stream = KEYS[5 * (i - 1) + 3]
    per[stream] = (per[stream] or 0) + 1
  end
end
for i = 1, n do
  local k, a = 5 * (i - 1), 5 * (i - 1)
  local stream = KEYS[k + 3]
  local sid = string.format('%d', first + i - 1)
  sids[i] = sid
  -- Stream entry ids are the m0 ids ("<id>-0").
  if keep <= 0 then
    redis.call('SET', KEYS[k + 5], sid)
  else
    if not streams[stream] then
      streams[stream] = 0
      marks[stream] = KEYS[k + 5]
      order[#order + 1] = stream
    end
    streams[stream] = streams[stream] + 1
    if streams[stream] <= per[stream] - keep then
      skipped[stream] = sid
    else
      redis.call('XADD', stream, sid .. '-0', 'e', ARGV[a + 3], 'd', ARGV[a + 4], 'r', ARGV[a + 5] or '')
    end
  end
end
-- The live messages (the header above). `limit`: redis_message.hpp's
-- kMaxBatchedMessage.
local limit = 262144
local batched = {}  -- pub/sub name -> whether every subscriber reads batched messages
local function reads_batched(pubsub)
  local b = batched[pubsub]
  if b == nil then
    b = false
    local db, name = string.match(pubsub, '^m0:(%d+):e:(.*)$')
    if db then
      local c = redis.call('PUBSUB', 'NUMSUB', pubsub, 'm0:' .. db .. ':r:' .. name)
      b = c[2] == c[4]
    end
    batched[pubsub] = b
  end
  return b
end
local function publish_single(i)
  local a = 5 * (i - 1)
  redis.call('PUBLISH', ARGV[a + 1], sids[i] .. '\n' .. ARGV[a + 3] .. '\n' .. (ARGV[a + 5] or '') .. '\n' .. ARGV[a + 4])
end
-- The run being gathered: its message's pieces, events, bytes, channel and first event.
local run, count, bytes, channel, head = {'*1\n'}, 0, 3, nil, 0
local function publish_run()
  if count == 1 then
    publish_single(head)
  elseif count > 1 then
    redis.call('PUBLISH', channel, table.concat(run))
  end
  run, count, bytes = {'*1\n'}, 0, 3
end
for i = 1, n do
  local a = 5 * (i - 1)
  local to = ARGV[a + 1]
  if count > 0 and to ~= channel then
    publish_run()
  end
  -- A run of one (the next event goes elsewhere) is single whoever listens:
  -- no count asked for a lone publish, nor for a batch of distinct channels.
  local alone = count == 0 and (i == n or ARGV[a + 6] ~= to)
  if alone or not reads_batched(to) then
    publish_single(i)
  else
    local event, data = ARGV[a + 3], ARGV[a + 4]
    local line = string.format('%s %d %d %s\n', sids[i], #event, #data, ARGV[a + 5] == '1' and '1' or '0')
    local size = #line + #event + #data
    if count > 0 and bytes + size > limit then
      publish_run()
    end
    if count == 0 then
      channel, head = to, i
    end
    run[#run + 1] = line
    run[#run + 1] = event
    run[#run + 1] = data
    count, bytes = count + 1, bytes + size
  end
end
publish_run()
-- Trimmed by hand, so the mark knows the newest entry that goes (Redis's own
-- max-deleted-entry-id counts XDEL, not trimming).
for _, stream in ipairs(order) do
  local over = redis.call('XLEN', stream) - keep
  local last = skipped[stream]
  if over > 0 then
    if not last then
      local gone = redis.call('XRANGE', stream, '-', '+', 'COUNT', over)
      local id = gone[#gone][1]
      last = string.sub(id, 1, string.find(id, '-', 1, true) - 1)
    end
    redis.call('XTRIM', stream, 'MAXLEN', keep)
  end
  if last then
    redis.call('SET', marks[stream], last)
  end
end
return first
