-- Settles an admitted request: gives back the tokens it reserved but did not use (or
-- charges what it used beyond them) and ends its concurrency lease.
-- KEYS[1] tokens TAT, KEYS[2] concurrency leases.
-- ARGV: tpm, reserved minus used tokens (negative: debt), lease id ('' for none).
local tpm, delta, lease = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
if tpm > 0 and delta ~= 0 then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local tat = tonumber(redis.call('GET', KEYS[1]) or now)
  -- A refund below "now" is a full bucket already: nothing older than now is kept.
  local new = math.max(tat - delta * (60000000 / tpm), now)
  if new > now then
    redis.call('SET', KEYS[1], string.format('%.0f', new), 'PX', math.ceil((new - now) / 1000) + 1000)
  else
    redis.call('DEL', KEYS[1])
  end
end
if lease ~= '' then
  redis.call('ZREM', KEYS[2], lease)
end
return 1
