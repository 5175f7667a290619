-- One change to a model's shared rollout, as a compare-and-set on its generation.
-- KEYS[1] records (hash model -> record JSON), KEYS[2] generations (hash model -> n; kept
-- after a delete, the tombstone), KEYS[3] setting ids (hash model -> rev), KEYS[4]
-- progress (hash model -> "seq JSON"), KEYS[5] epoch, KEYS[6] the store's id.
-- ARGV[1] model, ARGV[2] mode: "put" (replace whatever is there), "restore" (put, only
-- into a store that has neither a record nor a generation for the model: one that lost
-- its data), "change" or "delete" (only if the generation is still ARGV[3]), ARGV[4] rev
-- (put, restore), ARGV[5] record JSON, ARGV[6] an id for the store if it has none.
-- Returns {1, new generation}; {0, generation now} when stale; {-1, generation now} when
-- there is no record to change.
local model = ARGV[1]
local now = tonumber(redis.call('HGET', KEYS[2], model) or '0')
redis.call('SETNX', KEYS[6], ARGV[6])
if ARGV[2] == 'restore' then
  if now > 0 or redis.call('HEXISTS', KEYS[1], model) == 1 then
    return {0, now}
  end
elseif ARGV[2] ~= 'put' then
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
  if ARGV[2] == 'put' or ARGV[2] == 'restore' then
    redis.call('HSET', KEYS[3], model, ARGV[4])
    redis.call('HDEL', KEYS[4], model)
  end
end
redis.call('INCR', KEYS[5])
return {1, gen}
