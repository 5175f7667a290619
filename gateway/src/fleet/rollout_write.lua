-- One change to a model's shared rollout, as a compare-and-set on its generation.
-- KEYS[1] records (hash model -> record JSON), KEYS[2] generations (hash model -> n; kept
-- after a delete, the tombstone), KEYS[3] setting ids (hash model -> rev), KEYS[4]
-- progress (hash model -> "seq JSON"), KEYS[5] epoch.
-- ARGV[1] model, ARGV[2] mode: "put" (replace whatever is there), "change" or "delete"
-- (only if the generation is still ARGV[3]), ARGV[4] rev (put), ARGV[5] record JSON.
-- Returns {1, new generation}; {0, generation now} when stale; {-1, generation now} when
-- there is no record to change.
local model = ARGV[1]
local now = tonumber(redis.call('HGET', KEYS[2], model) or '0')
if ARGV[2] ~= 'put' then
  if redis.call('HEXISTS', KEYS[1], model) == 0 then
    return {-1, now}
  end
  if now ~= tonumber(ARGV[3]) then
    return {0, now}
  end
end
local gen = redis.call('HINCRBY', KEYS[2], model, 1)
if ARGV[2] == 'delete' then
  redis.call('HDEL', KEYS[1], model)
  redis.call('HDEL', KEYS[3], model)
  redis.call('HDEL', KEYS[4], model)
else
  redis.call('HSET', KEYS[1], model, ARGV[5])
  if ARGV[2] == 'put' then
    redis.call('HSET', KEYS[3], model, ARGV[4])
    redis.call('HDEL', KEYS[4], model)
  end
end
redis.call('INCR', KEYS[5])
return {1, gen}
