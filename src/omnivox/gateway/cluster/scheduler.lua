-- The scheduler on Redis: every operation of RedisStore is one call of this script, so Redis runs it
-- as one atomic step, and every mutation ends in the one dispatch(). It is the WorkerPool of
-- gateway/scheduling/pool.py moved verbatim; the differential test holds the two to the same
-- assignments. The constants (TASKS, CAP, BUSY, SLOTTED, PIPELINE, TRANS, ALPHA, UNTAKEN_MS) come from the
-- Python side's source of truth, prepended by scripts.py.
--
-- KEYS[1] is the key prefix (it carries the hash tag, so every key lives in one cluster slot).
-- ARGV[1] is the operation, ARGV[2] the time in ms (-1: the server's clock), the rest its arguments.

-- (P, OP, NOW and A come from the header scripts.py puts before every script)

local IS_BUSY = {BUSY_STREAMING = true, DUPLEX_ACTIVE = true, DUPLEX_PAUSED = true}

local function wkey(w) return P .. ':w:' .. w end
local function tkey(t) return P .. ':t:' .. t end
local function qkey(task) return P .. ':q:' .. task end
local function gkey(g, what) return P .. ':gw:' .. g .. ':' .. what end
local function fmt(n) return string.format('%.0f', n) end

local function touch() redis.call('INCR', P .. ':ver') end

local function able(w_able, cap) return string.find(w_able or '', ',' .. cap .. ',', 1, true) ~= nil end

-- ---- workers

local function set_state(w, new)
  local wk = wkey(w)
  local cur = redis.call('HGET', wk, 'state')
  if cur ~= new and not TRANS[cur][new] then
    error('illegal_transition: worker state ' .. tostring(cur) .. ' -> ' .. new)
  end
  redis.call('HSET', wk, 'state', new, 'offline_ms', new == 'OFFLINE' and fmt(NOW) or '')
  if new == 'IDLE' then
    redis.call('ZADD', P .. ':idle', redis.call('HGET', wk, 'order'), w)
  else
    redis.call('ZREM', P .. ':idle', w)
  end
  touch()
end

local function observe(task, seconds)
  local eta = P .. ':eta'
  redis.call('HINCRBY', eta, task .. ':n', 1)
  local prev = redis.call('HGET', eta, task .. ':ema')
  local ema = seconds
  if prev then ema = ALPHA * seconds + (1 - ALPHA) * tonumber(prev) end
  redis.call('HSET', eta, task .. ':ema', string.format('%.17g', ema))
end

-- end the worker's assignment: its ticket (if it was ours to track) is gone; returns that ticket's
-- task and enqueue time, or nil
local function finish(w)
  local wk = wkey(w)
  local t = redis.call('HGET', wk, 'ticket')
  local done = nil
  if t and t ~= '' then
    local th = tkey(t)
    local f = redis.call('HMGET', th, 'task', 'enq_ms', 'gw')
    if f[1] then
      done = {task = f[1], enq = tonumber(f[2])}
      redis.call('DEL', th)
      redis.call('SREM', gkey(f[3], 'tickets'), t)
    end
  end
  redis.call('HSET', wk, 'ticket', '', 'task', '')
  return done
end

local function slots_used()
  local n = 0
  for _, w in ipairs(redis.call('ZRANGE', P .. ':workers', 0, -1)) do
    local f = redis.call('HMGET', wkey(w), 'state', 'engine', 'task')
    if IS_BUSY[f[1]] and f[2] == PIPELINE and SLOTTED[f[3]] then n = n + 1 end
  end
  return n
end

-- ---- the one dispatch point

local function route(task, hash, able_idx, iw)
  if #able_idx == 0 then return nil end
  if task == 'streaming' and hash ~= '' then
    for _, i in ipairs(able_idx) do
      if iw[i].cached == hash then return i end
    end
  end
  for _, i in ipairs(able_idx) do
    if iw[i].cached == '' then return i end
  end
  local best = nil
  for _, i in ipairs(able_idx) do
    if best == nil or iw[i].used < iw[best].used then best = i end
  end
  return best
end

local function assign(tid, task, w)
  local wk = wkey(w.id)
  set_state(w.id, BUSY[task]) -- busy in the same step: never assigned twice
  local epoch = redis.call('HINCRBY', wk, 'epoch', 1)
  local th = tkey(tid)
  local f = redis.call('HMGET', th, 'hash', 'gw', 'seq')
  local hit = (f[1] ~= '' and f[1] == w.cached) and '1' or '0'
  redis.call('HSET', wk, 'ticket', tid, 'task', task, 'busy_ms', fmt(NOW))
  redis.call('ZREM', qkey(task), tid)
  redis.call('HSET', th, 'state', 'assigned', 'worker', w.id, 'epoch', epoch, 'hit', hit)
  local u = redis.call('HMGET', wk, 'url', 'engine')
  -- the assignment goes to the gateway holding the ticket's client, whoever's operation made it
  redis.call('XADD', gkey(f[2], 'inbox'), 'MAXLEN', '~', '100000', '*',
    'k', 'assigned', 't', tid, 'w', w.id, 'u', u[1], 'e', u[2], 'q', task, 'ep', epoch, 'h', hit, 'b', fmt(NOW))
  return {tid, w.id, u[1], u[2], task, epoch, hit, f[2], fmt(NOW)}
end

local function dispatch()
  local out = {}
  local hold = redis.call('GET', P .. ':hold')
  if hold and tonumber(hold) > NOW then return out end -- the store restarted: gateways re-assert first
  local idle = redis.call('ZRANGE', P .. ':idle', 0, -1)
  if #idle == 0 then return out end
  local iw = {}
  for i, w in ipairs(idle) do
    local f = redis.call('HMGET', wkey(w), 'able', 'engine', 'cached', 'cache_used')
    iw[i] = {id = w, able = f[1], engine = f[2], cached = f[3] or '', used = tonumber(f[4]) or 0}
  end
  local slots = redis.call('HGET', P .. ':pipe', 'slots')
  local free = nil
  if slots and slots ~= '' then free = tonumber(slots) - slots_used() end
  local blocked = {}
  while #iw > 0 do
    -- the oldest head among the queues some idle worker may still serve
    local task, tid, seq = nil, nil, nil
    for _, q in ipairs(TASKS) do
      if not blocked[q] then
        local head = redis.call('ZRANGE', qkey(q), 0, 0, 'WITHSCORES')
        if #head > 0 and (seq == nil or tonumber(head[2]) < seq) then
          task, tid, seq = q, head[1], tonumber(head[2])
        end
      end
    end
    if task == nil then break end
    local no_slot = free ~= nil and SLOTTED[task] and free <= 0
    local able_idx = {}
    for i, w in ipairs(iw) do
      if able(w.able, CAP[task]) and not (no_slot and w.engine == PIPELINE) then
        able_idx[#able_idx + 1] = i
      end
    end
    local hash = redis.call('HGET', tkey(tid), 'hash') or ''
    local pick = route(task, hash, able_idx, iw)
    if pick == nil then
      -- nobody idle serves this type: none of its later tickets either (the idle set only shrinks)
      blocked[task] = true
    else
      local w = iw[pick]
      if free ~= nil and SLOTTED[task] and w.engine == PIPELINE then free = free - 1 end
      table.remove(iw, pick)
      out[#out + 1] = assign(tid, task, w)
    end
  end
  return out
end

local function mark_offline(w, guard)
  local wk = wkey(w)
  local f = redis.call('HMGET', wk, 'state', 'epoch')
  if not f[1] or f[1] == 'OFFLINE' then return {} end
  if guard ~= '' and f[2] ~= guard then return {} end -- a newer assignment: not ours to call lost
  finish(w)
  redis.call('HSET', wk, 'cached', '')
  set_state(w, 'OFFLINE')
  return dispatch() -- a now-impossible ticket may need failing; others keep moving
end

-- the worker's assignment ends; returns what the freed worker was dispatched to
local function release(w, tid, keep, cached, confirmed)
  local wk = wkey(w)
  local f = redis.call('HMGET', wk, 'state', 'ticket', 'busy_ms')
  if not f[1] or not IS_BUSY[f[1]] then return {} end -- already released, or lost meanwhile
  if tid ~= '' and f[2] ~= tid then return {} end -- that assignment is over: never free a later one
  local done = finish(w)
  if done then
    local started = tonumber(f[3]) or done.enq
    observe(done.task, (NOW - started) / 1000)
  end
  if keep ~= '1' then
    redis.call('HSET', wk, 'cached', cached, 'cache_used', redis.call('INCR', P .. ':clock'), 'cache_ms', fmt(NOW))
  end
  redis.call('HSET', wk, 'busy_ms', '')
  redis.call('HINCRBY', wk, 'served', 1)
  if confirmed ~= '1' then
    touch()
    return {}
  end
  set_state(w, 'IDLE')
  return dispatch()
end

local function remove_ticket(tid, task, gw)
  redis.call('ZREM', qkey(task), tid)
  redis.call('DEL', tkey(tid))
  redis.call('SREM', gkey(gw, 'tickets'), tid)
end

local function queued_total()
  local n = 0
  for _, q in ipairs(TASKS) do n = n + redis.call('ZCARD', qkey(q)) end
  return n
end

local function next_seq()
  -- seeded from the clock: after a restart empty, new tickets still come after re-asserted ones
  redis.call('SET', P .. ':seq', fmt(NOW * 1000), 'NX')
  return redis.call('INCR', P .. ':seq')
end

local function new_worker(w, url, caps, able_caps)
  local order = redis.call('INCR', P .. ':wseq')
  redis.call('HSET', wkey(w), 'url', url, 'state', 'LOADING', 'engine', '', 'caps', caps, 'able', able_caps,
    'cached', '', 'cache_used', 0, 'cache_ms', '', 'ticket', '', 'task', '', 'busy_ms', '', 'epoch', 0,
    'failures', 0, 'offline_ms', '', 'error', '', 'kv', 0, 'voices', '[]', 'served', 0, 'order', order)
  redis.call('ZADD', P .. ':workers', order, w)
  redis.call('HSET', P .. ':wurl', url, w)
  touch()
end

-- a queued ticket steps out of the line until NOW + grace, keeping its seq: its client may come
-- back to any gateway with its resume token (ops.reattach); nobody waits behind it meanwhile
local function orphan_ticket(tid, task, gw, grace)
  redis.call('ZREM', qkey(task), tid)
  redis.call('SREM', gkey(gw, 'tickets'), tid)
  redis.call('HSET', tkey(tid), 'state', 'orphaned', 'gw', '')
  redis.call('ZADD', P .. ':orphans', NOW + grace, tid)
  touch()
end

-- orphans whose grace is over are gone for good
local function sweep_orphans()
  for _, tid in ipairs(redis.call('ZRANGEBYSCORE', P .. ':orphans', '-inf', fmt(NOW))) do
    redis.call('DEL', tkey(tid))
    redis.call('ZREM', P .. ':orphans', tid)
  end
end

local function reap_gateway(g, grace)
  sweep_orphans()
  for _, tid in ipairs(redis.call('SMEMBERS', gkey(g, 'tickets'))) do
    local f = redis.call('HMGET', tkey(tid), 'state', 'task', 'worker')
    if f[1] == 'queued' and grace > 0 then
      orphan_ticket(tid, f[2], g, grace) -- its client may come back to another gateway
    else
      if f[1] == 'queued' then
        redis.call('ZREM', qkey(f[2]), tid) -- its client is gone; everyone behind moves up
      elseif f[1] == 'assigned' then
        -- its session ended with the gateway, unconfirmed: the worker saw its relay drop and winds
        -- down; it stays busy until its own health says it is free
        release(f[3], tid, '1', '', '0')
      end
      redis.call('DEL', tkey(tid))
    end
  end
  redis.call('DEL', gkey(g, 'tickets'), gkey(g, 'inbox'))
  redis.call('ZREM', P .. ':gws', g)
  redis.call('HDEL', P .. ':gwinfo', g)
  for _, w in ipairs(redis.call('ZRANGE', P .. ':workers', 0, -1)) do
    if redis.call('GET', P .. ':mon:' .. w) == g then redis.call('DEL', P .. ':mon:' .. w) end
  end
  for _, addr in ipairs(redis.call('SMEMBERS', gkey(g, 'addrs'))) do
    redis.call('HDEL', P .. ':open:' .. addr, g)
  end
  redis.call('DEL', gkey(g, 'addrs'))
  touch()
end

-- ---- operations

local ops = {}

-- gw, ticket id, task, history hash ('' = none), max queue
function ops.enqueue()
  local gw, tid, task, hash, max_queue = A[1], A[2], A[3], A[4], tonumber(A[5])
  local seen = redis.call('HMGET', tkey(tid), 'seq', 'enq_ms')
  if seen[1] then return {'ok', seen[1], {}, seen[2]} end -- sent again: it ran (its events say the rest)
  local workers = redis.call('ZRANGE', P .. ':workers', 0, -1)
  if #workers > 0 then
    local any = false
    for _, w in ipairs(workers) do
      local f = redis.call('HMGET', wkey(w), 'state', 'able')
      if f[1] ~= 'ERROR' and able(f[2], CAP[task]) then any = true break end
    end
    if not any then return {'no_capable_worker'} end
  end
  local seq = next_seq()
  redis.call('HSET', tkey(tid), 'task', task, 'hash', hash, 'gw', gw, 'seq', seq, 'state', 'queued',
    'enq_ms', fmt(NOW))
  redis.call('ZADD', qkey(task), seq, tid)
  redis.call('SADD', gkey(gw, 'tickets'), tid)
  touch()
  local out = dispatch()
  if redis.call('HGET', tkey(tid), 'state') == 'queued' and queued_total() > max_queue then
    remove_ticket(tid, task, gw) -- it was last: nobody else moved
    return {'queue_full'}
  end
  return {'ok', seq, out, fmt(NOW)}
end

-- ticket id: a queued ticket leaves; its gateway hears it was cancelled
function ops.cancel()
  local tid = A[1]
  local f = redis.call('HMGET', tkey(tid), 'state', 'task', 'gw')
  if f[1] ~= 'queued' then return {0} end
  remove_ticket(tid, f[2], f[3])
  redis.call('XADD', gkey(f[3], 'inbox'), 'MAXLEN', '~', '100000', '*', 'k', 'cancelled', 't', tid)
  touch()
  return {1, dispatch()}
end

-- ticket id, gw: its waiter on gw is going; a queued ticket leaves, an assigned one gives its
-- worker back (nothing if the ticket is another gateway's now: its client came back there)
function ops.withdraw()
  local tid, gw = A[1], A[2]
  local f = redis.call('HMGET', tkey(tid), 'state', 'task', 'gw', 'worker')
  if gw and f[3] ~= gw then return {'gone', {}} end
  if f[1] == 'queued' then
    remove_ticket(tid, f[2], f[3])
    touch()
    return {'cancelled', dispatch()}
  elseif f[1] == 'assigned' then
    local out = release(f[4], tid, '1', '', '1')
    redis.call('DEL', tkey(tid))
    redis.call('SREM', gkey(f[3], 'tickets'), tid)
    return {'released', out}
  end
  return {'gone', {}}
end

-- ticket id, grace ms, gw: its waiter on gw is going but its client may come back; a queued
-- ticket steps out of the line keeping its place, an assigned one gives its worker back (as
-- withdraw); nothing if the ticket is no longer gw's (its client came back on another gateway)
function ops.orphan()
  local tid, grace, gw = A[1], tonumber(A[2]), A[3]
  sweep_orphans()
  local f = redis.call('HMGET', tkey(tid), 'state', 'task', 'gw')
  if f[3] ~= gw then return {'gone', {}} end
  if f[1] == 'queued' then
    orphan_ticket(tid, f[2], f[3], grace)
    return {'orphaned', dispatch()}
  end
  A = {tid, gw}
  return ops.withdraw()
end

-- gw, ticket id, task: the place of a client that came back, now gw's: an orphan goes back into
-- the line at its seq; a ticket still queued (its old connection not seen gone yet, or its gateway
-- dead and not reaped yet) keeps its place, and its old gateway hears it was cancelled there
function ops.reattach()
  local gw, tid, task = A[1], A[2], A[3]
  sweep_orphans()
  local f = redis.call('HMGET', tkey(tid), 'state', 'task', 'seq', 'enq_ms', 'gw')
  if f[2] ~= task or (f[1] ~= 'orphaned' and f[1] ~= 'queued') then return {'gone'} end
  if f[1] == 'orphaned' then
    redis.call('ZREM', P .. ':orphans', tid)
    redis.call('ZADD', qkey(task), f[3], tid)
  elseif f[5] ~= gw then
    redis.call('SREM', gkey(f[5], 'tickets'), tid)
    redis.call('XADD', gkey(f[5], 'inbox'), 'MAXLEN', '~', '100000', '*', 'k', 'cancelled', 't', tid)
  end
  redis.call('HSET', tkey(tid), 'state', 'queued', 'gw', gw)
  redis.call('SADD', gkey(gw, 'tickets'), tid)
  touch()
  return {'ok', f[3], dispatch(), f[4]}
end

-- gw, ticket id, worker, epoch, task, hash, seq, enq_ms, lost ('1'/'0'): the worker of this
-- assignment did not take its session (stale, busy, or unreachable: lost): the ticket goes back into
-- the line at its seq for the next worker. A worker still on this assignment stays busy (nothing
-- measured, nothing served) until its own health says it is free; a lost one goes OFFLINE (unless
-- assigned anew since). 'gone' when the ticket is not gw's to put back: queued or orphaned
-- already, another gateway's (its client came back there), or another assignment's
function ops.requeue()
  local gw, tid, w, epoch, task, hash, seq, enq = A[1], A[2], A[3], A[4], A[5], A[6], A[7], A[8]
  sweep_orphans()
  local f = redis.call('HMGET', tkey(tid), 'state', 'gw', 'worker', 'epoch')
  if f[1] and (f[1] ~= 'assigned' or f[2] ~= gw or f[3] ~= w or f[4] ~= epoch) then return {'gone'} end
  local wf = redis.call('HMGET', wkey(w), 'ticket', 'epoch')
  if A[9] == '1' then
    mark_offline(w, epoch)
  elseif wf[1] == tid and wf[2] == epoch then
    finish(w)
    redis.call('HSET', wkey(w), 'busy_ms', '')
  end
  redis.call('HSET', tkey(tid), 'task', task, 'hash', hash, 'gw', gw, 'seq', seq, 'state', 'queued',
    'enq_ms', enq)
  redis.call('HDEL', tkey(tid), 'worker', 'epoch', 'hit')
  redis.call('ZADD', qkey(task), seq, tid)
  redis.call('SADD', gkey(gw, 'tickets'), tid)
  touch()
  return {'ok', dispatch()}
end

-- worker, ticket, keep ('1': keep the cached hash), cached hash, confirmed ('1'/'0')
function ops.release()
  return {'ok', release(A[1], A[2], A[3], A[4], A[5])}
end

-- worker, guard epoch ('' = none)
function ops.mark_offline()
  return {'ok', mark_offline(A[1], A[2])}
end

-- worker, ticket, paused ('1'/'0')
function ops.set_paused()
  local wk = wkey(A[1])
  local f = redis.call('HMGET', wk, 'state', 'ticket')
  if f[2] ~= A[2] then return {'ok'} end
  if f[1] == 'DUPLEX_ACTIVE' or f[1] == 'DUPLEX_PAUSED' then
    set_state(A[1], A[3] == '1' and 'DUPLEX_PAUSED' or 'DUPLEX_ACTIVE')
  end
  return {'ok'}
end

-- url, wished id ('' = none), a fresh id, max workers, default caps json, default able
function ops.register()
  local url, wished, fresh, max_workers = A[1], A[2], A[3], tonumber(A[4])
  local known = redis.call('HGET', P .. ':wurl', url)
  if known then return {'ok', known, 0} end
  if redis.call('ZCARD', P .. ':workers') >= max_workers then return {'too_many_workers'} end
  local w = wished
  if w == '' or redis.call('EXISTS', wkey(w)) == 1 then w = fresh end
  new_worker(w, url, A[5], A[6])
  return {'ok', w, 1}
end

-- worker, state, error, engine, caps json, able, voices json, kv length, cached hash, epoch seen,
-- problems json:
-- the worker's hash after it, and what it dispatched
function ops.report_health()
  local w, reported = A[1], A[2]
  local wk = wkey(w)
  if redis.call('EXISTS', wk) == 0 then return {} end
  redis.call('HSET', wk, 'engine', A[4], 'caps', A[5], 'able', A[6], 'voices', A[7], 'problems', A[11])
  local out = {}
  local f = redis.call('HMGET', wk, 'state', 'ticket', 'epoch', 'busy_ms')
  local epoch = tonumber(f[3])
  if IS_BUSY[f[1]] and f[2] ~= '' and reported == 'IDLE' and epoch > 0 then
    local seen = tonumber(A[10])
    -- The invariant: a worker this store holds busy is freed within a bounded time once no live
    -- session holds it, on the worker's own word (its IDLE report with the epoch it last took):
    -- - it took this assignment's session (seen >= epoch) and is free again, yet no release came
    --   (the gateway relaying it lost track of it in a store failure): the session is over;
    -- - it never took it (seen < epoch) though UNTAKEN_MS have passed since the assignment: no
    --   gateway is about to open it (one opens its worker within its connect timeout, or is reaped
    --   with its lease), so the assignment is dead: one whose event its gateway set aside, one a
    --   gateway still holds for a client long gone, re-asserted into a store restarted empty.
    -- Fencing holds: a newer session's assignment is younger than UNTAKEN_MS until taken, and
    -- once taken the worker reports busy, then its epoch; a late release names an older ticket.
    local since = tonumber(f[4])
    if seen >= epoch then
      out = release(w, f[2], '1', '', '1')
    elseif since ~= nil and NOW - since >= UNTAKEN_MS then
      -- a waiter that missed its assignment hears its ticket is over (its client gets an error, not
      -- an endless wait); nothing was served: nothing measured, nothing counted
      local gw = redis.call('HGET', tkey(f[2]), 'gw')
      if gw and gw ~= '' then
        redis.call('XADD', gkey(gw, 'inbox'), 'MAXLEN', '~', '100000', '*', 'k', 'cancelled', 't', f[2])
      end
      finish(w)
      redis.call('HSET', wk, 'busy_ms', '')
      set_state(w, 'IDLE')
      out = dispatch()
    end
  end
  if tonumber(A[10]) > epoch then redis.call('HSET', wk, 'epoch', A[10]) end
  f = redis.call('HMGET', wk, 'state', 'ticket')
  local cur = f[1]
  local serving = IS_BUSY[cur] and f[2] ~= ''
  if not serving and not IS_BUSY[reported] then
    -- the worker's own hash is the truth about its cache (it may have restarted empty)
    redis.call('HSET', wk, 'kv', A[8], 'cached', A[9])
  end
  redis.call('HSET', wk, 'failures', 0, 'error', A[3])
  if not serving then
    local target = 'IDLE'
    if reported == 'LOADING' or reported == 'ERROR' or IS_BUSY[reported] then target = reported end
    if target ~= cur and not (IS_BUSY[target] and cur ~= 'IDLE') then
      set_state(w, target)
      if target == 'IDLE' then out = dispatch() end
    end
  end
  return {redis.call('HGETALL', wk), out}
end

-- worker, failures before offline
function ops.report_unreachable()
  local wk = wkey(A[1])
  if redis.call('EXISTS', wk) == 0 then return {'ok', {}} end
  local n = redis.call('HINCRBY', wk, 'failures', 1)
  if n >= tonumber(A[2]) and not IS_BUSY[redis.call('HGET', wk, 'state')] then
    return {'ok', mark_offline(A[1], '')}
  end
  return {'ok', {}}
end

-- ms offline after which a worker is forgotten
function ops.forget_offline()
  local gone = {}
  for _, w in ipairs(redis.call('ZRANGE', P .. ':workers', 0, -1)) do
    local wk = wkey(w)
    local f = redis.call('HMGET', wk, 'state', 'offline_ms', 'url')
    if f[1] == 'OFFLINE' and f[2] ~= '' and NOW - tonumber(f[2]) > tonumber(A[1]) then
      redis.call('DEL', wk, P .. ':mon:' .. w)
      redis.call('ZREM', P .. ':workers', w)
      redis.call('ZREM', P .. ':idle', w)
      redis.call('HDEL', P .. ':wurl', f[3])
      gone[#gone + 1] = {w, f[3]}
      touch()
    end
  end
  return gone
end

-- report json, slots ('' = no limit)
function ops.set_pipeline()
  redis.call('SET', P .. ':pipeline', A[1])
  redis.call('HSET', P .. ':pipe', 'at', fmt(NOW))
  local cur = redis.call('HGET', P .. ':pipe', 'slots') or ''
  if cur ~= A[2] then
    redis.call('HSET', P .. ':pipe', 'slots', A[2])
    touch()
    return {'ok', dispatch()}
  end
  return {'ok', {}}
end

function ops.pipeline()
  local report = redis.call('GET', P .. ':pipeline')
  if not report then return {} end
  local f = redis.call('HMGET', P .. ':pipe', 'at', 'slots')
  return {report, f[1], f[2], slots_used(), fmt(NOW)}
end

function ops.workers()
  local out = {}
  for _, w in ipairs(redis.call('ZRANGE', P .. ':workers', 0, -1)) do
    out[#out + 1] = {w, redis.call('HGETALL', wkey(w)), redis.call('GET', P .. ':mon:' .. w) or ''}
  end
  return {fmt(NOW), out}
end

-- what positions and waits are computed from: per task its queued tickets with their seq, the
-- workers' states and busy times, the measured durations
function ops.queue_state()
  local queues = {}
  for i, q in ipairs(TASKS) do queues[i] = redis.call('ZRANGE', qkey(q), 0, -1, 'WITHSCORES') end
  local workers = {}
  for _, w in ipairs(redis.call('ZRANGE', P .. ':workers', 0, -1)) do
    local f = redis.call('HMGET', wkey(w), 'state', 'task', 'busy_ms')
    workers[#workers + 1] = {f[1], f[2], f[3]}
  end
  return {fmt(NOW), queues, workers, redis.call('HGETALL', P .. ':eta')}
end

-- the same for a gateway's notifier, compact: per task only the seqs, packed (MessagePack) in one
-- string, so a pass over 10,000 queued tickets costs the gateway a few milliseconds, not hundreds
function ops.queue_seqs()
  local seqs = {}
  for i, q in ipairs(TASKS) do
    local flat = redis.call('ZRANGE', qkey(q), 0, -1, 'WITHSCORES')
    local list = {}
    for j = 2, #flat, 2 do list[#list + 1] = tonumber(flat[j]) end
    seqs[i] = list
  end
  local workers = {}
  for _, w in ipairs(redis.call('ZRANGE', P .. ':workers', 0, -1)) do
    local f = redis.call('HMGET', wkey(w), 'state', 'task', 'busy_ms')
    workers[#workers + 1] = {f[1], f[2], f[3]}
  end
  return {fmt(NOW), cmsgpack.pack(seqs), workers, redis.call('HGETALL', P .. ':eta')}
end

function ops.tickets()
  local out = {}
  for _, tid in ipairs(A) do
    out[#out + 1] = redis.call('HGETALL', tkey(tid))
  end
  return {fmt(NOW), out}
end

function ops.queue_length()
  return queued_total()
end

-- seq: how many queued tickets come before it, and how many are queued
function ops.rank()
  local before = 0
  for _, q in ipairs(TASKS) do before = before + redis.call('ZCOUNT', qkey(q), '-inf', '(' .. A[1]) end
  return {before, queued_total()}
end

-- gw, the boot id it knows ('' = none yet), lease ms, info json, a fresh boot id, hold ms
function ops.beat()
  local gw, known, lease, info, fresh, hold = A[1], A[2], tonumber(A[3]), A[4], A[5], tonumber(A[6])
  local boot = redis.call('GET', P .. ':boot')
  local status = 'ok'
  if not boot then
    boot = fresh
    redis.call('SET', P .. ':boot', boot)
    redis.call('SET', P .. ':boot_ms', fmt(NOW))
    if known ~= '' then
      redis.call('SET', P .. ':hold', fmt(NOW + hold)) -- the store lost its state: re-assert first
      status = 'fresh'
    else
      status = 'joined'
    end
  elseif boot ~= known then
    status = known == '' and 'joined' or 'fresh'
    local since = tonumber(redis.call('GET', P .. ':boot_ms') or '0')
    if known ~= '' and NOW - since < hold then redis.call('SET', P .. ':hold', fmt(since + hold)) end
  elseif not redis.call('ZSCORE', P .. ':gws', gw) then
    status = 'reaped' -- it paused past its lease: the others dropped what it held
  end
  redis.call('ZADD', P .. ':gws', NOW + lease, gw)
  redis.call('HSET', P .. ':gwinfo', gw, info)
  return {status, boot, fmt(NOW)}
end

-- the gateway reaping: every gateway whose lease ran out (never itself)
-- the reaping gateway, grace ms for the dead ones' waiters (0: they are dropped)
function ops.reap()
  sweep_orphans()
  local dead = redis.call('ZRANGEBYSCORE', P .. ':gws', '-inf', '(' .. fmt(NOW))
  local out = {}
  for _, g in ipairs(dead) do
    if g ~= A[1] then
      reap_gateway(g, tonumber(A[2] or '0'))
      out[#out + 1] = g
    end
  end
  local given = {}
  local hold = redis.call('GET', P .. ':hold')
  if hold and tonumber(hold) <= NOW then
    redis.call('DEL', P .. ':hold') -- the hold is over: whatever waits is served now
    given = dispatch()
  elseif #out > 0 then
    given = dispatch()
  end
  return {out, given}
end

-- a gateway leaving for good (a clean shutdown): as if reaped, at once
-- gw, grace ms for its waiters
function ops.leave()
  reap_gateway(A[1], tonumber(A[2] or '0'))
  return {'ok', dispatch()}
end

function ops.gateways()
  local out = {}
  local live = redis.call('ZRANGE', P .. ':gws', 0, -1, 'WITHSCORES')
  for i = 1, #live, 2 do
    out[#out + 1] = {live[i], live[i + 1], redis.call('HGET', P .. ':gwinfo', live[i]) or '{}'}
  end
  return {fmt(NOW), out}
end

-- gw, lease ms: the workers this gateway health-checks (an even share of them)
function ops.monitors()
  local gw, lease = A[1], tonumber(A[2])
  local workers = redis.call('ZRANGE', P .. ':workers', 0, -1)
  local live = math.max(1, redis.call('ZCOUNT', P .. ':gws', fmt(NOW), '+inf'))
  local limit = math.ceil(#workers / live)
  local mine = {}
  for _, w in ipairs(workers) do
    if redis.call('GET', P .. ':mon:' .. w) == gw then
      if #mine < limit then
        redis.call('PEXPIRE', P .. ':mon:' .. w, lease)
        mine[#mine + 1] = w
      else
        redis.call('DEL', P .. ':mon:' .. w) -- more than its share: another gateway takes it
      end
    end
  end
  for _, w in ipairs(workers) do
    if #mine >= limit then break end
    if redis.call('SET', P .. ':mon:' .. w, gw, 'PX', lease, 'NX') then mine[#mine + 1] = w end
  end
  local out = {}
  for _, w in ipairs(mine) do out[#out + 1] = {w, redis.call('HGET', wkey(w), 'url')} end
  return out
end

-- gw, then n queued (ticket, seq, task, hash, enq_ms) and m active (ticket, worker, url, epoch,
-- task, busy_ms, seq, enq_ms): what this gateway holds, put back after the store lost it
function ops.reassert()
  local gw, n = A[1], tonumber(A[2])
  local i = 3
  local top = 0
  for _ = 1, n do
    local tid, seq, task, hash, enq = A[i], tonumber(A[i + 1]), A[i + 2], A[i + 3], A[i + 4]
    i = i + 5
    local state = redis.call('HGET', tkey(tid), 'state')
    if state == false then
      redis.call('HSET', tkey(tid), 'task', task, 'hash', hash, 'gw', gw, 'seq', fmt(seq), 'state', 'queued',
        'enq_ms', enq)
      redis.call('ZADD', qkey(task), seq, tid)
      redis.call('SADD', gkey(gw, 'tickets'), tid)
    elseif state == 'orphaned' then
      -- the reap of this gateway kept its place for its client to come back; the client never
      -- left (the gateway lived on): it takes it back, as ops.reattach would
      redis.call('ZREM', P .. ':orphans', tid)
      redis.call('HSET', tkey(tid), 'state', 'queued', 'gw', gw)
      redis.call('ZADD', qkey(task), redis.call('HGET', tkey(tid), 'seq'), tid)
      redis.call('SADD', gkey(gw, 'tickets'), tid)
    end
    if seq > top then top = seq end
  end
  local m = tonumber(A[i])
  i = i + 1
  for _ = 1, m do
    local tid, w, url, epoch, task, busy, seq, enq = A[i], A[i + 1], A[i + 2], tonumber(A[i + 3]), A[i + 4],
      A[i + 5], A[i + 6], A[i + 7]
    i = i + 8
    local wk = wkey(w)
    local owner = redis.call('HGET', P .. ':wurl', url)
    if owner == false and redis.call('EXISTS', wk) == 0 then
      new_worker(w, url, '{"streaming":true}', ',streaming,')
      owner = w
    end
    local f = redis.call('HMGET', wk, 'ticket', 'epoch')
    if owner == w and (f[1] == '' or f[1] == tid) and tonumber(f[2]) <= epoch then
      -- a state restored, not a transition: the worker serves this ticket, whatever was thought
      redis.call('HSET', wk, 'state', BUSY[task], 'ticket', tid, 'task', task, 'busy_ms', busy, 'epoch', epoch,
        'offline_ms', '')
      redis.call('ZREM', P .. ':idle', w)
      redis.call('HSET', tkey(tid), 'task', task, 'hash', '', 'gw', gw, 'seq', seq, 'state', 'assigned',
        'worker', w, 'epoch', epoch, 'hit', '0', 'enq_ms', enq)
      redis.call('SADD', gkey(gw, 'tickets'), tid)
    end
  end
  redis.call('SET', P .. ':seq', fmt(NOW * 1000), 'NX') -- as next_seq would: later than before the restart
  if top > tonumber(redis.call('GET', P .. ':seq')) then redis.call('SET', P .. ':seq', fmt(top)) end
  touch()
  return {'ok', dispatch()}
end

local fn = ops[OP]
if fn == nil then error('unknown operation ' .. tostring(OP)) end
return fn()
