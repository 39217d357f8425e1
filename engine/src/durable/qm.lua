#!lua name=qm
-- Queue Manager's room operations in Valkey. Each function is one atomic operation on one
-- room; every key it touches arrives in KEYS and shares the room's hash tag {roomId}:
--   KEYS[1] m  hash: seq gen exists next head state rate opens maxc ttl qmax credit lastsec hold
--   KEYS[2] h  zset: holes (ejected waiting tickets above head), score = ticket
--   KEYS[3] p  zset: live passes, member = ticket, score = granted-at ms
--   KEYS[4] t  hash: waiting ticket -> identity (only tickets with an identity)
--   KEYS[5] i  hash: identity -> waiting tickets
--   KEYS[6] l  string: the engine holding the room's outflow lease
--   KEYS[7] q  hash: pre-queue handle -> identity ('' = none), until the draw
--   KEYS[8] qi hash: identity -> pre-queue entries
-- The engine's Rust domain (engine/src/domain) is the reference: these functions make the same
-- decisions and the engine builds the same event records from their replies.
--
-- Replies are arrays whose first element is the new seq (> 0) when an event was recorded,
-- 0 when nothing changed, or a negative status:
--   -1 another engine holds the lease   -2 the room is held for a rebuild
--   -3 the room is missing from Valkey   -4 no such room (deleted)
--   -5 identity cap reached              -6 the room is in bypass
--   -7 the room already exists          -8 the pre-queue is at its ceiling
--   -9 the handle is already taken       -10 the doors are open (no pre-queue)
--   -11 the pre-queue awaits its draw    -12 the draw was built on a stale room
--   -13 the doors are still shut (join the pre-queue)
-- Every check happens before the first write: a script is atomic but not all-or-nothing.

local MAX_PASS_TTL_MS = 86400000
local CREDIT_CAP = 60
local MAX_CATCH_UP_SECONDS = 5

local function num(value)
  if value == false or value == nil or value == '' then return nil end
  return tonumber(value)
end

-- Loads the fields every operation reads and answers the guard status (nil when usable).
local function load(keys)
  local f = redis.call('HMGET', keys[1], 'seq', 'exists', 'hold', 'next', 'head')
  if f[1] == false then return nil, -3 end
  if f[3] == '1' then return nil, -2 end
  local room = { seq = tonumber(f[1]), exists = f[2] == '1', next = num(f[4]) or 1, head = num(f[5]) or 1 }
  return room, nil
end

local function live(keys)
  local room, status = load(keys)
  if status then return nil, status end
  if not room.exists then return nil, -4 end
  return room, nil
end

local function bump(keys, room)
  room.seq = room.seq + 1
  redis.call('HSET', keys[1], 'seq', room.seq)
  return room.seq
end

local function effective_state(keys, now)
  local f = redis.call('HMGET', keys[1], 'state', 'opens')
  local opens = num(f[2])
  if opens and opens > now then return 'scheduled' end
  return f[1]
end

local function waiting(keys, room)
  return room.next - room.head - redis.call('ZCARD', keys[2])
end

local function release_identity(keys, ticket)
  local identity = redis.call('HGET', keys[4], ticket)
  if identity then
    redis.call('HDEL', keys[4], ticket)
    if redis.call('HINCRBY', keys[5], identity, -1) <= 0 then
      redis.call('HDEL', keys[5], identity)
    end
  end
end

-- Keeps the invariant that head is waiting (or the line is empty).
local function settle_head(keys, room)
  while redis.call('ZSCORE', keys[2], room.head) do
    redis.call('ZREM', keys[2], room.head)
    room.head = room.head + 1
  end
end

-- Admits the `admit` lowest waiting tickets; answers the first and last ticket of the range.
local function promote(keys, room, admit, now)
  local first = room.head
  local last = room.head + admit - 1
  local holes = redis.call('ZRANGE', keys[2], 0, -1)
  local skip = {}
  for _, hole in ipairs(holes) do
    local ticket = tonumber(hole)
    if ticket > last then break end
    skip[ticket] = true
    last = last + 1
  end
  for ticket = first, last do
    if not skip[ticket] then
      redis.call('ZADD', keys[3], now, ticket)
      release_identity(keys, ticket)
    end
  end
  redis.call('ZREMRANGEBYSCORE', keys[3], '-inf', '(' .. (now - MAX_PASS_TTL_MS))
  redis.call('ZREMRANGEBYSCORE', keys[2], '-inf', last)
  room.head = math.min(math.max(room.head, last + 1), room.next)
  settle_head(keys, room)
  redis.call('HSET', keys[1], 'head', room.head)
  return first, last
end

local function set_config(keys, args)
  -- args: state rate opens maxc ttl qmax pqmax (from index 2)
  redis.call('HSET', keys[1], 'state', args[2], 'rate', args[3], 'opens', args[4],
    'maxc', args[5], 'ttl', args[6], 'qmax', args[7], 'pqmax', args[8])
end

-- ARGV: now gen state rate opens maxc ttl qmax pqmax. Starts a fresh line; seq continues the
-- id's.
local function create(keys, args)
  local f = redis.call('HMGET', keys[1], 'seq', 'exists', 'hold')
  if f[3] == '1' then return { -2 } end
  if f[2] == '1' then return { -7 } end
  local seq = (num(f[1]) or 0) + 1
  redis.call('DEL', keys[1], keys[2], keys[3], keys[4], keys[5], keys[6], keys[7], keys[8])
  redis.call('HSET', keys[1], 'seq', seq, 'gen', args[2], 'exists', '1', 'next', 1, 'head', 1,
    'credit', 0, 'lastsec', '')
  set_config(keys, { args[1], args[3], args[4], args[5], args[6], args[7], args[8], args[9] })
  return { seq }
end

-- ARGV: now state rate opens maxc ttl qmax pqmax.
local function update(keys, args)
  local room, status = live(keys)
  if status then return { status } end
  set_config(keys, args)
  return { bump(keys, room) }
end

-- ARGV: now identity. Answers { seq, ticket }.
local function join(keys, args)
  local room, status = live(keys)
  if status then return { status } end
  local now = tonumber(args[1])
  local state = effective_state(keys, now)
  if state == 'scheduled' then return { -13 } end
  if redis.call('EXISTS', keys[7]) == 1 then return { -11 } end
  if state == 'bypass' then return { -6 } end
  local identity = args[2]
  if identity ~= '' then
    local cap = num(redis.call('HGET', keys[1], 'qmax'))
    if cap and (num(redis.call('HGET', keys[5], identity)) or 0) >= cap then return { -5 } end
  end
  local ticket = room.next
  redis.call('HSET', keys[1], 'next', ticket + 1)
  if identity ~= '' then
    redis.call('HSET', keys[4], ticket, identity)
    redis.call('HINCRBY', keys[5], identity, 1)
  end
  return { bump(keys, room), ticket }
end

-- ARGV: now engine lease_ms. One outflow slice for now's calendar second, run only by the
-- lease holder. Answers { seq, first, last, count, credit_after } when somebody passed.
-- An engine taking the lease over (the holder died, so the lease lapsed) starts with one
-- second's credit: the seconds the lease was vacant are not admitted in one burst.
local function tick(keys, args)
  local now, engine, lease_ms = tonumber(args[1]), args[2], args[3]
  local holder = redis.call('GET', keys[6])
  if holder and holder ~= engine then return { -1 } end
  local taking_over = not holder
  redis.call('SET', keys[6], engine, 'PX', lease_ms)
  local room, status = live(keys)
  if status then return { status } end
  local second = math.floor(now / 1000)
  local f = redis.call('HMGET', keys[1], 'lastsec', 'credit', 'rate', 'maxc', 'ttl')
  local last_second = num(f[1])
  local elapsed = 1
  if last_second then
    if second <= last_second then return { 0 } end
    elapsed = math.min(second - last_second, MAX_CATCH_UP_SECONDS)
    if taking_over then elapsed = 1 end
  end
  redis.call('HSET', keys[1], 'lastsec', second)
  if effective_state(keys, now) ~= 'active' then return { 0 } end
  -- Nobody passes before the pre-queue is drawn into the line.
  if redis.call('EXISTS', keys[7]) == 1 then return { 0 } end
  local credit = (num(f[2]) or 0) + tonumber(f[3]) * elapsed
  local admit = math.min(math.floor(credit / 60), waiting(keys, room))
  local max_concurrent = num(f[4])
  if max_concurrent then
    local active = redis.call('ZCOUNT', keys[3], '(' .. (now - tonumber(f[5])), '+inf')
    admit = math.min(admit, math.max(max_concurrent - active, 0))
  end
  local credit_after = math.min(credit - admit * 60, CREDIT_CAP)
  redis.call('HSET', keys[1], 'credit', credit_after)
  if admit <= 0 then return { 0 } end
  local first, last = promote(keys, room, admit, now)
  return { bump(keys, room), first, last, admit, credit_after }
end

-- ARGV: now count. Answers { seq, first, last, count }.
local function flush(keys, args)
  local room, status = live(keys)
  if status then return { status } end
  local now = tonumber(args[1])
  local admit = math.min(tonumber(args[2]), waiting(keys, room))
  if admit <= 0 then return { 0 } end
  local first, last = promote(keys, room, admit, now)
  return { bump(keys, room), first, last, admit }
end

-- ARGV: now ticket. Answers { seq, 1 } for a waiting ticket, { seq, 2 } for a revoked pass.
-- A pass older than a day has left the pass list and reads as not found (0).
local function eject(keys, args)
  local room, status = live(keys)
  if status then return { status } end
  local ticket = tonumber(args[2])
  if ticket >= room.head and ticket < room.next and not redis.call('ZSCORE', keys[2], ticket) then
    release_identity(keys, ticket)
    if ticket == room.head then
      room.head = room.head + 1
      settle_head(keys, room)
      redis.call('HSET', keys[1], 'head', room.head)
    else
      redis.call('ZADD', keys[2], ticket, ticket)
    end
    return { bump(keys, room), 1 }
  end
  if redis.call('ZSCORE', keys[3], ticket) then
    redis.call('ZREM', keys[3], ticket)
    return { bump(keys, room), 2 }
  end
  return { 0 }
end

-- ARGV: now. Answers { seq, waiting count, pre-queue count }.
local function purge(keys, args)
  local room, status = live(keys)
  if status then return { status } end
  local count = waiting(keys, room)
  local pre = redis.call('HLEN', keys[7])
  if count <= 0 and pre <= 0 then return { 0 } end
  redis.call('DEL', keys[2], keys[4], keys[5], keys[7], keys[8])
  redis.call('HSET', keys[1], 'head', room.next)
  return { bump(keys, room), count, pre }
end

-- ARGV: now field value [field value ...] (rate, state, opens, pqmax).
local function set_field(keys, args)
  local room, status = live(keys)
  if status then return { status } end
  for index = 2, #args, 2 do
    redis.call('HSET', keys[1], args[index], args[index + 1])
  end
  return { bump(keys, room) }
end

-- ARGV: now handle identity ceiling. A join before opensAt: enters the pre-queue.
local function prejoin(keys, args)
  local room, status = live(keys)
  if status then return { status } end
  local now, handle, identity, ceiling = tonumber(args[1]), args[2], args[3], tonumber(args[4])
  if effective_state(keys, now) ~= 'scheduled' then return { -10 } end
  if redis.call('HEXISTS', keys[7], handle) == 1 then return { -9 } end
  if redis.call('HLEN', keys[7]) >= ceiling then return { -8 } end
  if identity ~= '' then
    local cap = num(redis.call('HGET', keys[1], 'pqmax'))
    if cap and (num(redis.call('HGET', keys[8], identity)) or 0) >= cap then return { -5 } end
  end
  redis.call('HSET', keys[7], handle, identity)
  if identity ~= '' then redis.call('HINCRBY', keys[8], identity, 1) end
  return { bump(keys, room) }
end

-- ARGV: now seq handle... The draw, built by an engine from its replica at `seq` (the
-- permutation needs a crypto-grade source Lua lacks): the handles in drawn order take the next
-- tickets. Refused as stale unless the room is still at `seq` with exactly these entries, so two
-- engines drawing at once cannot both land. Answers { seq, first ticket }.
local function draw(keys, args)
  local room, status = live(keys)
  if status then return { status } end
  local now, expected = tonumber(args[1]), tonumber(args[2])
  if effective_state(keys, now) == 'scheduled' then return { 0 } end
  local count = #args - 2
  if room.seq ~= expected or redis.call('HLEN', keys[7]) ~= count then return { -12 } end
  local identities = {}
  for index = 3, #args do
    local identity = redis.call('HGET', keys[7], args[index])
    if not identity then return { -12 } end
    identities[index - 2] = identity
  end
  local first = room.next
  for index = 1, count do
    local identity = identities[index]
    if identity ~= '' then
      redis.call('HSET', keys[4], first + index - 1, identity)
      redis.call('HINCRBY', keys[5], identity, 1)
    end
  end
  redis.call('HSET', keys[1], 'next', first + count)
  redis.call('DEL', keys[7], keys[8])
  return { bump(keys, room), first }
end

local function delete(keys, args)
  local room, status = live(keys)
  if status then return { status } end
  redis.call('DEL', keys[2], keys[3], keys[4], keys[5], keys[6], keys[7], keys[8])
  redis.call('HSET', keys[1], 'exists', '0')
  return { bump(keys, room) }
end

-- ARGV: JSON {meta = {field = value...}, holes = [t...], passes = [[t, at]...],
-- identities = [[t, identity]...], prequeue = [[handle, identity]...]}. Replaces the room with a state rebuilt from the journal
-- and lifts the hold.
local function restore(keys, args)
  local state = cjson.decode(args[1])
  redis.call('DEL', keys[1], keys[2], keys[3], keys[4], keys[5], keys[7], keys[8])
  local meta = {}
  for field, value in pairs(state.meta) do
    meta[#meta + 1] = field
    meta[#meta + 1] = tostring(value)
  end
  redis.call('HSET', keys[1], unpack(meta))
  for _, hole in ipairs(state.holes) do redis.call('ZADD', keys[2], hole, hole) end
  for _, pass in ipairs(state.passes) do redis.call('ZADD', keys[3], pass[2], pass[1]) end
  for _, entry in ipairs(state.identities) do
    redis.call('HSET', keys[4], entry[1], entry[2])
    redis.call('HINCRBY', keys[5], entry[2], 1)
  end
  for _, entry in ipairs(state.prequeue or {}) do
    redis.call('HSET', keys[7], tostring(entry[1]), entry[2])
    if entry[2] ~= '' then redis.call('HINCRBY', keys[8], entry[2], 1) end
  end
  return { tonumber(state.meta.seq) }
end

redis.register_function('qm_create', create)
redis.register_function('qm_update', update)
redis.register_function('qm_join', join)
redis.register_function('qm_tick', tick)
redis.register_function('qm_flush', flush)
redis.register_function('qm_eject', eject)
redis.register_function('qm_purge', purge)
redis.register_function('qm_set', set_field)
redis.register_function('qm_delete', delete)
redis.register_function('qm_restore', restore)
redis.register_function('qm_prejoin', prejoin)
redis.register_function('qm_draw', draw)
