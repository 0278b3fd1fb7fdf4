-- What a client may meet on any gateway, on the store: ephemeral keys (minted on one gateway, spent
-- once on any), per-client limits (connections per address across gateways, the connect rate), the
-- WebRTC call directory (which gateway holds a call), and the media-token secret. One call of this
-- script is one atomic step. Calling conventions as scheduler.lua: KEYS[1] the prefix, ARGV[1] the
-- operation, ARGV[2] the time in ms (-1: the server's clock).

-- (P, OP, NOW and A come from the header scripts.py puts before every script)

local function fmt(n) return string.format('%.0f', n) end
local function gkey(g, what) return P .. ':gw:' .. g .. ':' .. what end

local ops = {}

-- digest, grant json, ttl ms, max keys outstanding, owner, max per owner:
-- 'ok' | 'full' | 'owner_full'
function ops.mint_key()
  local index, owned = P .. ':eks', P .. ':eks:o:' .. A[5]
  redis.call('ZREMRANGEBYSCORE', index, '-inf', fmt(NOW))
  redis.call('ZREMRANGEBYSCORE', owned, '-inf', fmt(NOW))
  if redis.call('ZCARD', index) >= tonumber(A[4]) then return 'full' end
  if redis.call('ZCARD', owned) >= tonumber(A[6]) then return 'owner_full' end
  redis.call('SET', P .. ':ek:' .. A[1], A[2], 'PX', A[3])
  redis.call('ZADD', index, NOW + tonumber(A[3]), A[1])
  redis.call('ZADD', owned, NOW + tonumber(A[3]), A[1])
  if redis.call('PTTL', owned) < tonumber(A[3]) then redis.call('PEXPIRE', owned, A[3]) end
  return 'ok'
end

-- digest: the grant json, spent (false: unknown, spent or expired)
function ops.take_key()
  local grant = redis.call('GET', P .. ':ek:' .. A[1])
  redis.call('DEL', P .. ':ek:' .. A[1])
  redis.call('ZREM', P .. ':eks', A[1])
  if grant then
    local owner = cjson.decode(grant)['owner'] or ''
    redis.call('ZREM', P .. ':eks:o:' .. owner, A[1])
  end
  return grant
end

-- address, gateway, max connections (0: none), rate per s (0: none), burst:
-- 'ok' | 'rate' | 'held:<n>'
function ops.admit_client()
  local addr, gw, max, rate, burst = A[1], A[2], tonumber(A[3]), tonumber(A[4]), tonumber(A[5])
  if rate > 0 then
    local bucket = P .. ':bucket:' .. addr
    local f = redis.call('HMGET', bucket, 'tokens', 'at')
    local tokens = tonumber(f[1]) or burst
    local at = tonumber(f[2]) or NOW
    tokens = math.min(burst, tokens + (NOW - at) / 1000 * rate)
    if tokens < 1 then
      redis.call('HSET', bucket, 'tokens', string.format('%.17g', tokens), 'at', fmt(NOW))
      return 'rate'
    end
    redis.call('HSET', bucket, 'tokens', string.format('%.17g', tokens - 1), 'at', fmt(NOW))
    redis.call('PEXPIRE', bucket, math.ceil(burst / rate * 1000) + 1000) -- refilled: forgotten
  end
  local open = P .. ':open:' .. addr
  if max > 0 then
    local held = 0
    for _, n in ipairs(redis.call('HVALS', open)) do held = held + tonumber(n) end
    if held >= max then return 'held:' .. held end
  end
  redis.call('HINCRBY', open, gw, 1)
  redis.call('SADD', gkey(gw, 'addrs'), addr)
  return 'ok'
end

-- address, gateway
function ops.leave_client()
  local open = P .. ':open:' .. A[1]
  if redis.call('HINCRBY', open, A[2], -1) <= 0 then
    redis.call('HDEL', open, A[2])
    redis.call('SREM', gkey(A[2], 'addrs'), A[1])
  end
  return 'ok'
end

-- gateway, then pairs (address, connections): what it holds, put back after the store lost it
function ops.reassert_clients()
  local gw = A[1]
  for i = 2, #A, 2 do
    redis.call('HSET', P .. ':open:' .. A[i], gw, A[i + 1])
    redis.call('SADD', gkey(gw, 'addrs'), A[i])
  end
  return 'ok'
end

-- gateway, ttl ms, then call ids: the calls it holds (renewed every beat)
function ops.hold_calls()
  for i = 3, #A do redis.call('SET', P .. ':call:' .. A[i], A[1], 'PX', A[2]) end
  return 'ok'
end

-- call id, gateway: the call ended there
function ops.drop_call()
  if redis.call('GET', P .. ':call:' .. A[1]) == A[2] then redis.call('DEL', P .. ':call:' .. A[1]) end
  return 'ok'
end

-- call id: {gateway, its info json} or {} (no gateway holds it)
function ops.find_call()
  local gw = redis.call('GET', P .. ':call:' .. A[1])
  if not gw then return {} end
  return {gw, redis.call('HGET', P .. ':gwinfo', gw) or '{}'}
end

-- a fresh secret: the secret every gateway signs media links with (the first one kept)
function ops.media_secret()
  redis.call('SET', P .. ':media_secret', A[1], 'NX')
  return redis.call('GET', P .. ':media_secret')
end

local fn = ops[OP]
if fn == nil then error('unknown operation ' .. tostring(OP)) end
return fn()
