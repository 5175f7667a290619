-- Admits one request against a tenant's limits, atomically, on the Redis clock.
-- KEYS[1] requests TAT, KEYS[2] tokens TAT, KEYS[3] leases (sorted set: lease id ->
-- expiry), KEYS[4] abandoned lease ids (sorted set: lease id -> expiry).
-- ARGV: rpm, burst, tpm, tokens, max_concurrent, lease id ('' for none), lease ttl (ms).
-- Every admission with a lease id holds a lease until it is settled; max_concurrent
-- counts them.
-- Returns {admitted, kind, wait_ms, remaining_requests, remaining_tokens, reset_tokens_ms}
-- with kind 0 admitted, 1 concurrency, 2 tokens, 3 requests, 4 abandoned (the gateway
-- gave up on this call and released it before it ran: nothing is changed); -1 for "no
-- such limit".
-- GCRA keeps one number per limit, the theoretical arrival time (TAT), in microseconds.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local rpm, burst = tonumber(ARGV[1]), tonumber(ARGV[2])
local tpm, tokens = tonumber(ARGV[3]), tonumber(ARGV[4])
local maxc, lease, ttl = tonumber(ARGV[5]), ARGV[6], tonumber(ARGV[7])
local MINUTE = 60000000

if lease ~= '' and redis.call('ZSCORE', KEYS[4], lease) then
  return {0, 4, 0, -1, -1, 0}
end

local rem_tokens, reset_tokens, tok_tat = -1, 0, nil
if tpm > 0 then
  local per = MINUTE / tpm
  local tat = math.max(tonumber(redis.call('GET', KEYS[2]) or now), now)
  local new = tat + tokens * per
  if new - now > MINUTE then
    local left = math.floor((MINUTE - (tat - now)) / per)
    return {0, 2, math.ceil((new - now - MINUTE) / 1000), -1, left, math.ceil((tat - now) / 1000)}
  end
  tok_tat = new
  rem_tokens = math.floor((MINUTE - (new - now)) / per)
  reset_tokens = math.ceil((new - now) / 1000)
end

local rem_requests, req_tat = -1, nil
if rpm > 0 then
  local per = MINUTE / rpm
  local tat = math.max(tonumber(redis.call('GET', KEYS[1]) or now), now)
  local new = tat + per
  if new - now > burst * per then
    return {0, 3, math.ceil((new - now - burst * per) / 1000), 0, rem_tokens, reset_tokens}
  end
  req_tat = new
  rem_requests = math.floor((burst * per - (new - now)) / per)
end

if lease ~= '' then
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
  if maxc > 0 and redis.call('ZCARD', KEYS[3]) >= maxc then
    return {0, 1, 1000, rem_requests, rem_tokens, reset_tokens}
  end
  redis.call('ZADD', KEYS[3], now + ttl * 1000, lease)
  redis.call('PEXPIRE', KEYS[3], ttl + 1000)
end
-- Each key lives as long as its state matters, plus a second.
if req_tat then
  redis.call('SET', KEYS[1], string.format('%.0f', req_tat), 'PX', math.ceil((req_tat - now) / 1000) + 1000)
end
if tok_tat then
  redis.call('SET', KEYS[2], string.format('%.0f', tok_tat), 'PX', math.ceil((tok_tat - now) / 1000) + 1000)
end
return {1, 0, 0, rem_requests, rem_tokens, reset_tokens}
