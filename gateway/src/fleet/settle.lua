-- Settles an admitted request: gives back the tokens it reserved but did not use (or
-- charges what it used beyond them) and ends its lease. Idempotent: it acts only while the
-- lease is held, and ends it, so a settlement replayed after a lost answer changes nothing.
-- KEYS[1] tokens TAT, KEYS[2] leases, KEYS[3] abandoned lease ids.
-- ARGV: tpm, reserved minus used tokens (negative: debt), lease id, abandoned (1: the
-- gateway gave up on the admission, which may not have run yet), lease ttl (ms).
-- Returns 1 when it settled the lease, 0 when there was nothing to settle.
local tpm, delta, lease = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
local abandoned, ttl = ARGV[4] == '1', tonumber(ARGV[5])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
if redis.call('ZREM', KEYS[2], lease) == 0 then
  -- Settled before, expired, or (abandoned) not run yet: then it never will.
  if abandoned then
    redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
    redis.call('ZADD', KEYS[3], now + ttl * 1000, lease)
    redis.call('PEXPIRE', KEYS[3], ttl + 1000)
  end
  return 0
end
if tpm > 0 and delta ~= 0 then
  local tat = tonumber(redis.call('GET', KEYS[1]) or now)
  -- A refund below "now" is a full bucket already: nothing older than now is kept.
  local new = math.max(tat - delta * (60000000 / tpm), now)
  if new > now then
    redis.call('SET', KEYS[1], string.format('%.0f', new), 'PX', math.ceil((new - now) / 1000) + 1000)
  else
    redis.call('DEL', KEYS[1])
  end
end
return 1
