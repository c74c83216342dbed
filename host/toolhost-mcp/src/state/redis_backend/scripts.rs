//! The Lua scripts the backend runs on the server: each change that depends on a
//! record's state (lease expiry, cancel, heartbeat, finish) and each quota count is one
//! script, so it is atomic there and keeps time by the server's clock.

use redis::Script;

/// Lua shared by the scripts: the server's clock in ms, and a running task whose lease
/// ran out stored as failed (ARGV[1] is always the lease-expired message).
const PRELUDE: &str = r"
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function expire_lease(key)
  local st = redis.call('HGET', key, 'status')
  if st == 'working' or st == 'input_required' then
    local lease = tonumber(redis.call('HGET', key, 'lease') or '0') or 0
    local now = now_ms()
    if lease <= now then
      redis.call('HSET', key, 'status', 'failed', 'message', ARGV[1], 'updated', now)
    end
  end
end
local function running(key)
  local st = redis.call('HGET', key, 'status')
  return st == 'working' or st == 'input_required'
end
";

/// KEYS: task. ARGV: lease message, owner ('' = any), result cap.
const GET: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
if ARGV[2] ~= '' and redis.call('HGET', KEYS[1], 'owner') ~= ARGV[2] then return false end
expire_lease(KEYS[1])
local size = redis.call('HSTRLEN', KEYS[1], 'result')
if size > tonumber(ARGV[3]) then return redis.error_reply('TOOLARGE ' .. size) end
return redis.call('HGETALL', KEYS[1])
";

/// KEYS: task, owner set. ARGV: lease message, id, owner, status, created, updated,
/// ttl, lease ms, has message, message, has result, result.
const CREATE: &str = r"
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local ttl = tonumber(ARGV[7])
redis.call('HSET', KEYS[1], 'owner', ARGV[3], 'status', ARGV[4], 'created', ARGV[5],
  'updated', ARGV[6], 'ttl', ARGV[7], 'lease', now_ms() + tonumber(ARGV[8]))
if ARGV[9] == '1' then redis.call('HSET', KEYS[1], 'message', ARGV[10]) end
if ARGV[11] == '1' then redis.call('HSET', KEYS[1], 'result', ARGV[12]) end
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('SADD', KEYS[2], ARGV[2])
if redis.call('PTTL', KEYS[2]) < ttl then redis.call('PEXPIRE', KEYS[2], ttl) end
return 1
";

/// KEYS: task. ARGV: lease message, owner, reason.
const CANCEL: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then return 'none' end
if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[2] then return 'none' end
expire_lease(KEYS[1])
if not running(KEYS[1]) then return 'ended ' .. redis.call('HGET', KEYS[1], 'status') end
redis.call('HSET', KEYS[1], 'status', 'cancelled', 'message', ARGV[3], 'updated', now_ms())
return 'ok'
";

/// KEYS: task. ARGV: lease message, lease ms.
const HEARTBEAT: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then return 'gone' end
expire_lease(KEYS[1])
if not running(KEYS[1]) then return redis.call('HGET', KEYS[1], 'status') end
redis.call('HSET', KEYS[1], 'lease', now_ms() + tonumber(ARGV[2]))
return 'running'
";

/// KEYS: task. ARGV: lease message, status, has message, message, has result, result.
const FINISH: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
expire_lease(KEYS[1])
if not running(KEYS[1]) then return 0 end
redis.call('HSET', KEYS[1], 'status', ARGV[2], 'updated', now_ms())
if ARGV[3] == '1' then redis.call('HSET', KEYS[1], 'message', ARGV[4])
else redis.call('HDEL', KEYS[1], 'message') end
if ARGV[5] == '1' then redis.call('HSET', KEYS[1], 'result', ARGV[6]) end
return 1
";

/// KEYS: the counter's key without its window. ARGV: amount, limit, window ms. The
/// window's key (`KEY:INDEX`, the window's index in the server's clock) expires two
/// windows after it was made; an amount past the limit is taken back at once. Answers
/// -1 when counted, else the ms until the window ends.
const COUNT: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local amount = tonumber(ARGV[1])
local window = tonumber(ARGV[3])
local index = math.floor(now / window)
local key = KEYS[1] .. ':' .. string.format('%d', index)
local used = redis.call('INCRBY', key, amount)
if redis.call('PTTL', key) < 0 then redis.call('PEXPIRE', key, window * 2) end
if used > tonumber(ARGV[2]) then
  redis.call('DECRBY', key, amount)
  return (index + 1) * window - now
end
return -1
";

/// The scripts, each with the [`PRELUDE`] it uses, loaded once per backend.
pub(super) struct Scripts {
    pub(super) get: Script,
    pub(super) create: Script,
    pub(super) cancel: Script,
    pub(super) heartbeat: Script,
    pub(super) finish: Script,
    pub(super) count: Script,
}

impl Scripts {
    /// Every script, with the prelude where it uses it.
    pub(super) fn new() -> Self {
        Scripts {
            get: Script::new(&format!("{PRELUDE}{GET}")),
            create: Script::new(&format!("{PRELUDE}{CREATE}")),
            cancel: Script::new(&format!("{PRELUDE}{CANCEL}")),
            heartbeat: Script::new(&format!("{PRELUDE}{HEARTBEAT}")),
            finish: Script::new(&format!("{PRELUDE}{FINISH}")),
            count: Script::new(COUNT),
        }
    }
}
