#!lua name=qm
-- Queue Manager's room operations in Valkey. Each function is one atomic operation on one
-- room; every key it touches arrives in KEYS and shares the room's hash tag {roomId}:
--   KEYS[1] m  hash: seq gen exists next head state rate opens maxc ttl qmax credit lastsec hold
--              pres (presence window ms, '' = rule off)
--   KEYS[2] h  zset: holes (ejected waiting tickets above head), score = ticket
--   KEYS[3] p  zset: live passes, member = ticket, score = granted-at ms
--   KEYS[4] t  hash: waiting ticket -> identity (only tickets with an identity)
--   KEYS[5] i  hash: identity -> waiting tickets
--   KEYS[6] l  string: the engine holding the room's outflow lease
--   KEYS[7] s  zset: presence (QM-345), member = ticket, score = its holder's last sighting ms;
--              +inf = a waiting ticket with no recorded holder (always present). Sightings
--              come in batches (qm_seen, ZADD GT); join writes the first. A promoted +inf
--              ticket is rewritten as seen at its grant, so passes read one rule.
--   KEYS[8] n  zset: slotless passes (ghosts, the event's ns), member = ticket, score =
--              granted-at ms. Kept out of p so the tick only walks passes that can hold a
--              slot; eject and restore look in both.
--   KEYS[9] q  hash: pre-queue handle -> holder flag ('1'/'0') then identity, until the draw
--   KEYS[10] qi hash: identity -> pre-queue entries
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
-- Presence (QM-345): the Rust reference is engine/src/domain/presence.rs.
local MAX_EXAMINED_PER_SLICE = 10000
-- Longest presenceSec: sightings older than ttl + this can decide nothing and are trimmed.
local MAX_PRESENCE_MS = 3600000

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

-- ---------------------------------------------------------------------------------------------
-- Presence (ghost tickets, QM-345)
-- ---------------------------------------------------------------------------------------------

-- Whether a waiting ticket's holder is present: `seen` is its ZSCORE in s.
local function present(seen, now, window)
  if not window or seen == 'inf' then return true end
  if not seen then return false end
  return now < tonumber(seen) + window
end

-- Passes holding a maxConcurrent slot, counted up to `limit`: inside the ttl, not slotless
-- (those are in n, not p), and granted under presence ago or told since the grant.
local function slot_holders(keys, now, ttl, window, limit)
  if not window then
    return redis.call('ZCOUNT', keys[3], '(' .. (now - ttl), '+inf')
  end
  local passes = redis.call('ZRANGEBYSCORE', keys[3], '(' .. (now - ttl), '+inf', 'WITHSCORES')
  local holders = 0
  for i = 1, #passes, 2 do
    if holders >= limit then break end
    local grant = tonumber(passes[i + 1])
    local holds = now < grant + window
    if not holds then
      local seen = redis.call('ZSCORE', keys[7], passes[i])
      holds = seen and (seen == 'inf' or tonumber(seen) >= grant)
    end
    if holds then holders = holders + 1 end
  end
  return holders
end

-- One slice's batch: walks the line from head; present holders need `affordable` (credit and
-- slots), absent ones pass free; stops at the first present holder that cannot be paid for.
-- Answers how many pass and how many are paid for.
local function outflow_batch(keys, room, now, window, affordable)
  local count, paid, examined = 0, 0, 0
  local ticket = room.head
  while ticket < room.next and examined < MAX_EXAMINED_PER_SLICE do
    examined = examined + 1
    if not redis.call('ZSCORE', keys[2], ticket) then
      if present(redis.call('ZSCORE', keys[7], ticket), now, window) then
        if affordable <= 0 then break end
        affordable = affordable - 1
        paid = paid + 1
      end
      count = count + 1
    end
    ticket = ticket + 1
  end
  return count, paid
end

-- ARGV: now ticket seen_ms [ticket seen_ms ...]. A batch of sightings (an engine's status
-- calls and its gateways' stream heartbeats). A pass's sighting counts only within the window
-- after its grant: a slot given back stays given back. Nothing is journaled: answers { 0 }.
local function seen(keys, args)
  local room, status = live(keys)
  if status then return { status } end
  local window = num(redis.call('HGET', keys[1], 'pres'))
  for i = 2, #args - 1, 2 do
    local ticket, at = tonumber(args[i]), tonumber(args[i + 1])
    if ticket and at and ticket >= 1 and ticket < room.next then
      local granted = num(redis.call('ZSCORE', keys[3], ticket))
      local late = window and granted and at >= granted + window
      if not late and redis.call('ZSCORE', keys[7], ticket) ~= 'inf' then
        redis.call('ZADD', keys[7], 'GT', at, ticket)
      end
    end
  end
  return { 0 }
end

-- ---------------------------------------------------------------------------------------------

-- Admits the `admit` lowest waiting tickets; answers the first and last ticket of the range
-- and the ghosts among them (absent holders under the presence rule), ascending.
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
  local window = num(redis.call('HGET', keys[1], 'pres'))
  local ns = {}
  for ticket = first, last do
    if not skip[ticket] then
      local seen_at = redis.call('ZSCORE', keys[7], ticket)
      if present(seen_at, now, window) then
        redis.call('ZADD', keys[3], now, ticket)
      else
        redis.call('ZADD', keys[8], now, ticket)
        ns[#ns + 1] = ticket
      end
      if seen_at == 'inf' then redis.call('ZADD', keys[7], now, ticket) end
      release_identity(keys, ticket)
    end
  end
  redis.call('ZREMRANGEBYSCORE', keys[3], '-inf', '(' .. (now - MAX_PASS_TTL_MS))
  redis.call('ZREMRANGEBYSCORE', keys[8], '-inf', '(' .. (now - MAX_PASS_TTL_MS))
  redis.call('ZREMRANGEBYSCORE', keys[2], '-inf', last)
  room.head = math.min(math.max(room.head, last + 1), room.next)
  settle_head(keys, room)
  redis.call('HSET', keys[1], 'head', room.head)
  return first, last, ns
end

-- Appends the ghosts `ns` to a reply.
local function with_ns(reply, ns)
  for _, ticket in ipairs(ns) do reply[#reply + 1] = ticket end
  return reply
end

local function set_config(keys, args)
  -- args: state rate opens maxc ttl qmax pres pqmax (from index 2)
  redis.call('HSET', keys[1], 'state', args[2], 'rate', args[3], 'opens', args[4],
    'maxc', args[5], 'ttl', args[6], 'qmax', args[7], 'pres', args[8] or '', 'pqmax', args[9] or '')
end

-- ARGV: now gen state rate opens maxc ttl qmax pres pqmax. Starts a fresh line; seq continues
-- the id's.
local function create(keys, args)
  local f = redis.call('HMGET', keys[1], 'seq', 'exists', 'hold')
  if f[3] == '1' then return { -2 } end
  if f[2] == '1' then return { -7 } end
  local seq = (num(f[1]) or 0) + 1
  redis.call('DEL', keys[1], keys[2], keys[3], keys[4], keys[5], keys[6], keys[7], keys[8],
    keys[9], keys[10])
  redis.call('HSET', keys[1], 'seq', seq, 'gen', args[2], 'exists', '1', 'next', 1, 'head', 1,
    'credit', 0, 'lastsec', '')
  set_config(keys, { args[1], args[3], args[4], args[5], args[6], args[7], args[8], args[9],
    args[10] })
  return { seq }
end

-- ARGV: now state rate opens maxc ttl qmax pres pqmax.
local function update(keys, args)
  local room, status = live(keys)
  if status then return { status } end
  set_config(keys, args)
  return { bump(keys, room) }
end

-- ARGV: now identity holder ('1' when the ticket is bound to a session, '' for an
-- engine-internal caller: always present). Answers { seq, ticket }.
local function join(keys, args)
  local room, status = live(keys)
  if status then return { status } end
  local now = tonumber(args[1])
  local state = effective_state(keys, now)
  if state == 'scheduled' then return { -13 } end
  if redis.call('EXISTS', keys[9]) == 1 then return { -11 } end
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
  -- The join is the ticket's first sighting; a plain ZADD replaces whatever a taken-back
  -- ticket of the same number left behind.
  if args[3] == '1' then
    redis.call('ZADD', keys[7], now, ticket)
  else
    redis.call('ZADD', keys[7], '+inf', ticket)
  end
  return { bump(keys, room), ticket }
end

-- ARGV: now engine lease_ms. One outflow slice for now's calendar second, run only by the
-- lease holder. Answers { seq, first, last, count, credit_after, ns... } when somebody passed.
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
  local f = redis.call('HMGET', keys[1], 'lastsec', 'credit', 'rate', 'maxc', 'ttl', 'pres')
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
  if redis.call('EXISTS', keys[9]) == 1 then return { 0 } end
  local credit = (num(f[2]) or 0) + tonumber(f[3]) * elapsed
  local window = num(f[6])
  local ttl = tonumber(f[5])
  redis.call('ZREMRANGEBYSCORE', keys[7], '-inf', '(' .. (now - ttl - MAX_PRESENCE_MS))
  local affordable = math.floor(credit / 60)
  local max_concurrent = num(f[4])
  if max_concurrent then
    local active = slot_holders(keys, now, ttl, window, max_concurrent)
    affordable = math.min(affordable, math.max(max_concurrent - active, 0))
  end
  local admit, paid
  if window and tonumber(f[3]) == 0 then
    -- A room set to admit nobody admits nobody: ghosts ride with a moving line only.
    admit, paid = 0, 0
  elseif window then
    admit, paid = outflow_batch(keys, room, now, window, affordable)
  else
    admit = math.min(affordable, waiting(keys, room))
    paid = admit
  end
  local credit_after = math.min(credit - paid * 60, CREDIT_CAP)
  redis.call('HSET', keys[1], 'credit', credit_after)
  if admit <= 0 then return { 0 } end
  local first, last, ns = promote(keys, room, admit, now)
  return with_ns({ bump(keys, room), first, last, admit, credit_after }, ns)
end

-- ARGV: now count. Answers { seq, first, last, count, ns... }.
local function flush(keys, args)
  local room, status = live(keys)
  if status then return { status } end
  local now = tonumber(args[1])
  local admit = math.min(tonumber(args[2]), waiting(keys, room))
  if admit <= 0 then return { 0 } end
  local first, last, ns = promote(keys, room, admit, now)
  return with_ns({ bump(keys, room), first, last, admit }, ns)
end

-- ARGV: now ticket. Answers { seq, 1 } for a waiting ticket, { seq, 2 } for a revoked pass.
-- A pass older than a day has left the pass list and reads as not found (0).
local function eject(keys, args)
  local room, status = live(keys)
  if status then return { status } end
  local ticket = tonumber(args[2])
  if ticket >= room.head and ticket < room.next and not redis.call('ZSCORE', keys[2], ticket) then
    release_identity(keys, ticket)
    redis.call('ZREM', keys[7], ticket)
    if ticket == room.head then
      room.head = room.head + 1
      settle_head(keys, room)
      redis.call('HSET', keys[1], 'head', room.head)
    else
      redis.call('ZADD', keys[2], ticket, ticket)
    end
    return { bump(keys, room), 1 }
  end
  if redis.call('ZSCORE', keys[3], ticket) or redis.call('ZSCORE', keys[8], ticket) then
    redis.call('ZREM', keys[3], ticket)
    redis.call('ZREM', keys[8], ticket)
    return { bump(keys, room), 2 }
  end
  return { 0 }
end

-- ARGV: now. Answers { seq, waiting count, pre-queue count }.
local function purge(keys, args)
  local room, status = live(keys)
  if status then return { status } end
  local count = waiting(keys, room)
  local pre = redis.call('HLEN', keys[9])
  if count <= 0 and pre <= 0 then return { 0 } end
  redis.call('DEL', keys[2], keys[4], keys[5], keys[9], keys[10])
  -- The discarded tickets' sightings age out; the holderless ones never would.
  redis.call('ZREMRANGEBYSCORE', keys[7], '+inf', '+inf')
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

-- ARGV: now handle identity ceiling holder. A join before opensAt: enters the pre-queue. The
-- entry is stored as holder flag ('1' or '0') then identity, so the draw can write presence.
local function prejoin(keys, args)
  local room, status = live(keys)
  if status then return { status } end
  local now, handle, identity, ceiling = tonumber(args[1]), args[2], args[3], tonumber(args[4])
  if effective_state(keys, now) ~= 'scheduled' then return { -10 } end
  if redis.call('HEXISTS', keys[9], handle) == 1 then return { -9 } end
  if redis.call('HLEN', keys[9]) >= ceiling then return { -8 } end
  if identity ~= '' then
    local cap = num(redis.call('HGET', keys[1], 'pqmax'))
    if cap and (num(redis.call('HGET', keys[10], identity)) or 0) >= cap then return { -5 } end
  end
  local holder = args[5] == '1' and '1' or '0'
  redis.call('HSET', keys[9], handle, holder .. identity)
  if identity ~= '' then redis.call('HINCRBY', keys[10], identity, 1) end
  return { bump(keys, room) }
end

-- ARGV: now seq handle... The draw, built by an engine from its replica at `seq` (the
-- permutation needs a crypto-grade source Lua lacks): the handles in drawn order take the next
-- tickets. Refused as stale unless the room is still at `seq` with exactly these entries, so two
-- engines drawing at once cannot both land. A drawn ticket is seen at the draw, as a join is.
-- Answers { seq, first ticket }.
local function draw(keys, args)
  local room, status = live(keys)
  if status then return { status } end
  local now, expected = tonumber(args[1]), tonumber(args[2])
  if effective_state(keys, now) == 'scheduled' then return { 0 } end
  local count = #args - 2
  if room.seq ~= expected or redis.call('HLEN', keys[9]) ~= count then return { -12 } end
  local entries = {}
  for index = 3, #args do
    local entry = redis.call('HGET', keys[9], args[index])
    if not entry then return { -12 } end
    entries[index - 2] = entry
  end
  local first = room.next
  for index = 1, count do
    local ticket = first + index - 1
    local holder, identity = string.sub(entries[index], 1, 1), string.sub(entries[index], 2)
    if identity ~= '' then
      redis.call('HSET', keys[4], ticket, identity)
      redis.call('HINCRBY', keys[5], identity, 1)
    end
    if holder == '1' then
      redis.call('ZADD', keys[7], now, ticket)
    else
      redis.call('ZADD', keys[7], '+inf', ticket)
    end
  end
  redis.call('HSET', keys[1], 'next', first + count)
  redis.call('DEL', keys[9], keys[10])
  return { bump(keys, room), first }
end

local function delete(keys, args)
  local room, status = live(keys)
  if status then return { status } end
  redis.call('DEL', keys[2], keys[3], keys[4], keys[5], keys[6], keys[7], keys[8], keys[9],
    keys[10])
  redis.call('HSET', keys[1], 'exists', '0')
  return { bump(keys, room) }
end

-- ARGV: JSON {meta = {field = value...}, holes = [t...], passes = [[t, at]...],
-- slotless = [[t, at]...], identities = [[t, identity]...], seen = [[t, ms]...],
-- holderless = [t...], prequeue = [[handle, identity]...]}. Replaces the room with a state
-- rebuilt from the journal and lifts the hold. Sightings are not journaled: s keeps what it has
-- and takes the engine's own on top (ZADD GT); holderless waiting tickets are +inf again.
local function restore(keys, args)
  local state = cjson.decode(args[1])
  redis.call('DEL', keys[1], keys[2], keys[3], keys[4], keys[5], keys[8], keys[9], keys[10])
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
  for _, pass in ipairs(state.slotless or {}) do redis.call('ZADD', keys[8], pass[2], pass[1]) end
  for _, entry in ipairs(state.seen or {}) do
    redis.call('ZADD', keys[7], 'GT', entry[2], entry[1])
  end
  for _, ticket in ipairs(state.holderless or {}) do redis.call('ZADD', keys[7], '+inf', ticket) end
  for _, entry in ipairs(state.prequeue or {}) do
    redis.call('HSET', keys[9], tostring(entry[1]), entry[3] .. entry[2])
    if entry[2] ~= '' then redis.call('HINCRBY', keys[10], entry[2], 1) end
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
redis.register_function('qm_seen', seen)
redis.register_function('qm_prejoin', prejoin)
redis.register_function('qm_draw', draw)
