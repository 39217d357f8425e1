#!lua name=qm
-- Queue Manager's storage in Valkey. Every rule of a room lives in the engine (Rust,
-- engine/src/domain); these functions only store what an engine decided, and refuse to store
-- it when the engine decided from a room that has changed since (compare-and-set on the
-- room's seq). Nothing here decides anything about the line. Keys of room R, hash-tagged {R}
-- so a room lives on one Valkey Cluster slot, and every key a function touches arrives in KEYS:
--   m   hash: seq (the last landed event's), hold ('1' while a rebuild runs), credit (the
--       outflow credit its lease holder carries, for whoever takes the lease over)
--   e   zset: the newest landed events, score = seq, member = the event record as JSON. The
--       journal (Postgres) has everything older; an engine that sees a stale reply catches
--       up from here.
--   l   string: the engine holding the room's outflow lease
--   s   zset: sightings of ticket holders (QM-345), member = ticket, score = last seen ms
--   si  zset: sightings made by engines that do not hold the lease, for the holder to take
--   tc  hash: the targeting counters every engine adds to: g and r (the room's generation and
--       rule revision they count), unmatched, no_url, and per rule i: m<i> (matches) and a<i>
--       (the last match, ms)
-- Every check happens before the first write: a function is atomic but not all-or-nothing.

-- Reply statuses. The engine names the same numbers (engine/src/durable/valkey.rs); a test
-- reads this block and fails if the two disagree.
local LEASED_ELSEWHERE = -1
local HELD = -2
local MISSING = -3
local STALE = -12
local RENEWED = 1
local TOOK_OVER = 2

-- Most events one stale reply carries back; beyond that the engine reads them itself.
local MAX_STALE_EVENTS = 10000

-- The room's seq as `expected` may see it, or a status: held for a rebuild, or missing (a
-- Valkey that lost the room, when the engine knows events of it).
local function current_seq(keys, expected)
  local f = redis.call('HMGET', keys[1], 'seq', 'hold')
  if f[2] == '1' then return nil, HELD end
  local seq = tonumber(f[1])
  if not seq then
    if expected ~= 0 then return nil, MISSING end
    seq = 0
  end
  return seq, nil
end

-- Appends the events after `after` up to `seq` to `reply`, when e still holds all of them.
local function append_events(keys, reply, after, seq)
  if seq <= after or seq - after > MAX_STALE_EVENTS then return reply end
  local events = redis.call('ZRANGEBYSCORE', keys[2], '(' .. after, '+inf')
  if #events ~= seq - after then return reply end
  for _, event in ipairs(events) do reply[#reply + 1] = event end
  return reply
end

-- KEYS m e. ARGV: expected keep_after event... Lands the events as seq expected+1.. if the
-- room is still at `expected`, and forgets events at or below `keep_after` (journaled long
-- since). Answers { new seq }, or { STALE, seq, the events after expected... } when another
-- engine landed first, or { HELD } / { MISSING }.
local function land(keys, args)
  local expected, keep_after = tonumber(args[1]), tonumber(args[2])
  if not expected or not keep_after or #args < 3 then
    return redis.error_reply('qm_land needs expected, keep_after and at least one event')
  end
  local seq, status = current_seq(keys, expected)
  if status then return { status } end
  if seq ~= expected then return append_events(keys, { STALE, seq }, expected, seq) end
  for index = 3, #args do
    redis.call('ZADD', keys[2], expected + index - 2, args[index])
  end
  local landed = expected + #args - 2
  redis.call('HSET', keys[1], 'seq', landed)
  redis.call('ZREMRANGEBYSCORE', keys[2], '-inf', keep_after)
  return { landed }
end

-- KEYS m e. ARGV: after. Answers { seq, the events after `after`... } (the events only when e
-- holds all of them), or { HELD } / { MISSING }.
local function tail(keys, args)
  local after = tonumber(args[1])
  if not after then return redis.error_reply('qm_tail needs after') end
  local seq, status = current_seq(keys, after)
  if status then return { status } end
  return append_events(keys, { seq }, after, seq)
end

-- Appends `ticket, ms` pairs of a zset read WITHSCORES to `reply`.
local function append_pairs(reply, pairs)
  for index = 1, #pairs, 2 do
    reply[#reply + 1] = tonumber(pairs[index])
    reply[#reply + 1] = tonumber(pairs[index + 1])
  end
  return reply
end

-- KEYS m l s si. ARGV: engine lease_ms credit trim_before [ticket seen_ms]... Stores the
-- engine's sightings and asks for the room's outflow lease. Held elsewhere: the sightings
-- also wait in si for the holder; answers { LEASED_ELSEWHERE }. Renewed: stores the credit
-- and hands over si, { RENEWED, ticket, ms, ... }. Taken over (nobody held it): answers
-- { TOOK_OVER, the credit the last holder stored, every sighting in s as ticket, ms ... }.
-- Sightings older than trim_before are forgotten.
local function lease(keys, args)
  local engine, lease_ms, credit, trim_before = args[1], tonumber(args[2]), args[3], tonumber(args[4])
  if not engine or not lease_ms or not trim_before or (#args - 4) % 2 ~= 0 then
    return redis.error_reply('qm_lease needs engine, lease_ms, credit, trim_before, pairs')
  end
  local holder = redis.call('GET', keys[2])
  for index = 5, #args, 2 do
    redis.call('ZADD', keys[3], 'GT', args[index + 1], args[index])
    if holder and holder ~= engine then
      redis.call('ZADD', keys[4], 'GT', args[index + 1], args[index])
    end
  end
  if holder and holder ~= engine then return { LEASED_ELSEWHERE } end
  redis.call('SET', keys[2], engine, 'PX', lease_ms)
  redis.call('ZREMRANGEBYSCORE', keys[3], '-inf', '(' .. trim_before)
  if not holder then
    local stored = tonumber(redis.call('HGET', keys[1], 'credit')) or 0
    redis.call('DEL', keys[4])
    return append_pairs({ TOOK_OVER, stored }, redis.call('ZRANGE', keys[3], 0, -1, 'WITHSCORES'))
  end
  redis.call('HSET', keys[1], 'credit', credit)
  local inbox = redis.call('ZRANGE', keys[4], 0, -1, 'WITHSCORES')
  redis.call('DEL', keys[4])
  return append_pairs({ RENEWED }, inbox)
end

-- KEYS m e s si. ARGV: seq credit [ticket seen_ms]... Replaces the room with one rebuilt from
-- the journal at `seq` (taking back every landed event the journal lacks) and lifts the hold.
-- s keeps what it has and takes the engine's sightings on top.
local function restore(keys, args)
  local seq = tonumber(args[1])
  if not seq or (#args - 2) % 2 ~= 0 then
    return redis.error_reply('qm_restore needs seq, credit, pairs')
  end
  redis.call('DEL', keys[1], keys[2], keys[4])
  redis.call('HSET', keys[1], 'seq', seq, 'credit', args[2])
  for index = 3, #args, 2 do
    redis.call('ZADD', keys[3], 'GT', args[index + 1], args[index])
  end
  return { seq }
end

-- KEYS tc. ARGV: generation rev unmatched no_url [matches last_ms]... (one pair per rule).
-- Adds one engine's counts since its last flush. Counts of an older generation or revision
-- than the stored ones are dropped; newer ones start the hash again. Kept 30 days after the
-- last check.
local function count(keys, args)
  local generation, rev = tonumber(args[1]), tonumber(args[2])
  if not generation or not rev or (#args - 4) % 2 ~= 0 then
    return redis.error_reply('qm_count needs generation, rev, unmatched, no_url, pairs')
  end
  local stored = redis.call('HMGET', keys[1], 'g', 'r')
  local g, r = tonumber(stored[1]), tonumber(stored[2])
  if g and (g > generation or (g == generation and r > rev)) then
    return { 0 }
  end
  if g ~= generation or r ~= rev then
    redis.call('DEL', keys[1])
    redis.call('HSET', keys[1], 'g', generation, 'r', rev)
  end
  redis.call('HINCRBY', keys[1], 'unmatched', args[3])
  redis.call('HINCRBY', keys[1], 'no_url', args[4])
  for index = 5, #args, 2 do
    local rule = (index - 5) / 2
    local matches, last = tonumber(args[index]), tonumber(args[index + 1])
    if matches > 0 then
      redis.call('HINCRBY', keys[1], 'm' .. rule, matches)
      local known = tonumber(redis.call('HGET', keys[1], 'a' .. rule))
      if not known or last > known then
        redis.call('HSET', keys[1], 'a' .. rule, last)
      end
    end
  end
  redis.call('PEXPIRE', keys[1], 2592000000)
  return { 1 }
end

redis.register_function('qm_land', land)
redis.register_function('qm_tail', tail)
redis.register_function('qm_lease', lease)
redis.register_function('qm_restore', restore)
redis.register_function('qm_count', count)
