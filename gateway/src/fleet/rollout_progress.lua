-- The pre-warm progress of a shared rollout, from the gateway that runs it. Written only
-- while the rollout is still the setting ARGV[2] (not replaced, not deleted) and only when
-- newer than what is stored (ARGV[3], that gateway's sequence), so a late or reordered
-- write never goes back and never recreates an ended rollout.
-- KEYS[1] setting ids (hash model -> rev), KEYS[2] progress (hash model -> "seq JSON"),
-- KEYS[3] epoch. ARGV[1] model, ARGV[2] rev, ARGV[3] seq, ARGV[4] progress JSON.
-- Returns 1 when written, 0 when not.
local model = ARGV[1]
if redis.call('HGET', KEYS[1], model) ~= ARGV[2] then
  return 0
end
local old = redis.call('HGET', KEYS[2], model)
if old then
  local seq = tonumber(string.match(old, '^(%d+) '))
  if seq and seq >= tonumber(ARGV[3]) then
    return 0
  end
end
redis.call('HSET', KEYS[2], model, ARGV[3] .. ' ' .. ARGV[4])
redis.call('INCR', KEYS[3])
return 1
