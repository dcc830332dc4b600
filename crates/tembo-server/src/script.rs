//! The Lua 5.1 interpreter behind EVAL, and the script cache.
//!
//! A script runs on the executor like any command: nothing else runs while
//! it does, so it is atomic; its writes join the pending batch, so they
//! become durable with the group's commit, before its reply goes out.
//! Inside it, `redis.call` and `redis.pcall` run commands through the same
//! table as clients do (minus the ones a script may not run), and replies
//! cross between RESP and Lua by Redis's conversion rules.
//!
//! A script that runs past `busy-reply-threshold` (default 5 s) runs on, as
//! in Redis, while the other clients are answered BUSY and may kill it
//! (`crate::busy`; the instruction hook here is where it looks). The
//! interpreter loads the base, table,
//! string and math libraries, plus `cjson` and `bit` (`crate::script_libs`),
//! `cmsgpack` (`crate::script_msgpack`) and `struct`
//! (`crate::script_struct`). Each run gets its own environment over the
//! shared globals, with read-only views of the libraries, so no script can
//! change what the next one sees; new globals are refused ("Attempt to
//! modify a readonly table"), as in Redis 7.
//!
//! The sandbox is Redis's as Debian ships 7.0.15, security fixes in: no
//! bytecode is ever compiled ([`compile_text`]; Lua 5.1 runs it
//! unchecked), no `getfenv`, `setfenv` or `newproxy`, and the 5.1 flaws
//! scripts could reach in mlua's vendored Lua (`unpack`'s count overflow,
//! `load`'s unanchored chunk name) are closed by checks in the prelude
//! before the C code runs.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use mlua::{Function, HookTriggers, Lua, LuaOptions, StdLib, Table, Value, Variadic, VmState};

use crate::cmd::{self, CmdError};
use crate::exec::Ctx;
use crate::resp::Reply;

/// Most memory the interpreter may hold (all scripts and their data).
pub const SCRIPT_MEMORY_LIMIT: usize = 1 << 30;

/// Past this much interpreter memory, a full collection follows a script.
const GC_AFTER_BYTES: usize = 64 << 20;
/// Redis's garbage-collection rhythm for scripts: a step of this many
/// kilobytes every [`GC_STEP_EVERY`] scripts (a step per script cost 15%
/// of EVAL throughput on a small heap; this costs none measurable).
const GC_STEP_KB: i32 = 50;
/// See [`GC_STEP_KB`].
const GC_STEP_EVERY: u64 = 50;

/// Commands a script may not run (besides those flagged `noscript`).
const DENIED: &[&str] = &[
    "eval",
    "evalsha",
    "eval_ro",
    "evalsha_ro",
    "script",
    "subscribe",
    "psubscribe",
    "unsubscribe",
    "punsubscribe",
    "ssubscribe",
    "sunsubscribe",
];

/// Lua code run once per interpreter: protects the string metatable and
/// wraps `loadstring` (no binary chunks; a loaded chunk gets its caller's
/// environment, not the shared globals).
const PRELUDE: &str = r#"
local ro_mt = {__newindex = function() error("Attempt to modify a readonly table", 2) end}
ro_mt.__metatable = setmetatable({}, ro_mt)
local function readonly(t)
  return setmetatable({}, {__index = t, __newindex = ro_mt.__newindex, __metatable = ro_mt.__metatable})
end
getmetatable("").__metatable = readonly(string)
local raw_loadstring, raw_setfenv, raw_getfenv = loadstring, setfenv, getfenv
-- Scripts have no getfenv, setfenv or newproxy, as in Redis with its fix
-- for CVE-2025-46818 (lua-enable-deprecated-api off): an environment or a
-- __gc metamethod could carry code into another user's script.
getfenv, setfenv, newproxy = nil, nil, nil
-- Lua 5.1's unpack counts its results in a C int: `unpack(t, -2, 2^31-1)`
-- overflowed, passed the stack check and pushed values until the server
-- died (CVE-2025-46817). Its arguments are checked here as luaB_unpack
-- checks them, with Redis's fixed count, before the C function runs.
local raw_unpack, fmod = unpack, math.fmod
-- C's (int)(ptrdiff_t)d on x86-64: truncated, out of range as INT64_MIN,
-- then wrapped to 32 bits.
local function c_int(d)
  if d ~= d or d >= 2^63 or d < -2^63 then return 0 end
  d = fmod(d, 2^32)
  d = d - fmod(d, 1)
  if d >= 2^31 then d = d - 2^32 elseif d < -2^31 then d = d + 2^32 end
  return d
end
local function unpack_int(v, n)
  local d = tonumber(v)
  if d == nil then error("bad argument #" .. n .. " to 'unpack' (number expected, got " .. type(v) .. ")", 3) end
  return c_int(d)
end
unpack = function(...)
  local nargs = select('#', ...)
  local t, i, e = ...
  if type(t) ~= 'table' then
    error("bad argument #1 to 'unpack' (table expected, got " .. (nargs == 0 and "no value" or type(t)) .. ")", 2)
  end
  if i == nil then i = 1 else i = unpack_int(i, 2) end
  if e == nil then e = #t else e = unpack_int(e, 3) end
  if i > e then return end
  -- Lua's C stack holds 8,000 values, the arguments among them.
  if e - i >= 2147483647 or nargs + e - i + 1 > 8000 then error("too many results to unpack", 2) end
  if nargs == 1 then return raw_unpack(t) elseif nargs == 2 then return raw_unpack(t, i) end
  return raw_unpack(t, i, e)
end
-- `luaL_checklstring`/`luaL_optstring` for the Lua wrappers below: a
-- number is read as its text; anything else is argument `n`'s error.
local function string_arg(v, n, fname, nargs)
  local tv = type(v)
  if tv == 'string' then return v end
  if tv == 'number' then return tostring(v) end
  error("bad argument #" .. n .. " to '" .. fname .. "' (string expected, got " .. (n > nargs and "no value" or tv) .. ")", 3)
end
-- Compiles source text into a chunk run in `env`. Redis's Lua has no
-- loader for bytecode (5.1 loads it unchecked: a crafted chunk reads and
-- writes the server's memory), so a binary chunk gets what its parser
-- says of the first byte; the message is the parser's own, for `name`.
local function compile(s, name, env)
  if string.byte(s, 1) == 27 then
    local _, e = raw_loadstring("\1", name)
    return nil, string.sub(e, 1, -9) .. "char(27)'"
  end
  local chunk, e = raw_loadstring(s, name)
  if chunk then raw_setfenv(chunk, env) end
  return chunk, e
end
-- Errors as Redis 7.0 shapes them. `redis.call` (Rust) raises its
-- command's error as a Rust error value, as other Rust helpers raise
-- theirs; `error_text` gives such a value's text (and whether it is a
-- command's error reply, code included). A run's message handler, called
-- where the error was raised, turns what was raised into a table
-- {err = text, source = chunk, line = n}: a command's error keeps its
-- text, anything else but a table with `err` becomes "ERR " and its text.
-- The reply then names the place ("... script: <sha>, on @user_script:3.").
-- The scripts' `pcall` hands back the text of such an error, not a table
-- (Redis 7.0 replaces `pcall` the same way). Scripts have no `debug`
-- library: `tembo_raised_at` reads the stack from Rust.
local raised_at, error_text = tembo_raised_at, tembo_error_text
tembo_raised_at, tembo_error_text = nil, nil
-- The interpreter's hook (time limit, SCRIPT KILL) watches one Lua thread
-- at a time (mlua's rule), so a coroutine takes it while it runs and gives
-- it back when it yields or ends: `hook_on` hooks the coroutine, `rehook`
-- hooks the thread that resumed it again.
-- (Unhooked, `while true do end` inside a coroutine held the server for
-- ever.) `coroutine.wrap` is made on the same `resume`.
local hook_on, rehook = tembo_hook_on, tembo_rehook
tembo_hook_on, tembo_rehook = nil, nil
-- (The locals are named after the functions whose argument errors name
-- them: "bad argument #1 to 'resume'".)
local resume, wrap = coroutine.resume, coroutine.create
-- `resume` itself may raise (too many results to move): the hook comes
-- back to the resuming thread whatever happens, and the results stay in
-- Lua (through Rust, mlua would read them back as its values).
local protect = pcall
local function resumed(ok, ...)
  rehook()
  if ok then return ... end
  error((...), 0)
end
local hooked_resume = function(co, ...)
  if type(co) ~= 'thread' then error("bad argument #1 to 'resume' (coroutine expected)", 2) end
  hook_on(co)
  return resumed(protect(resume, co, ...))
end
coroutine.resume = hooked_resume
local function wrapped(ok, ...)
  if ok then return ... end
  error((...), 2)
end
coroutine.wrap = function(f)
  if type(f) ~= 'function' then error("bad argument #1 to 'wrap' (Lua function expected)", 2) end
  local co = wrap(f)
  return function(...)
    return wrapped(hooked_resume(co, ...))
  end
end
local raw_pcall = pcall
local function on_error(err)
  local text, is_reply = error_text(err)
  if text ~= nil then
    err = {err = is_reply and text or 'ERR ' .. text}
  elseif type(err) ~= 'table' or err.err == nil then
    err = {err = 'ERR ' .. tostring(err)}
  end
  local source, line = raised_at()
  if source ~= nil then err.source, err.line = source, line end
  return err
end
local function caught(ok, ...)
  if ok then return true, ... end
  local err = ...
  local text = error_text(err)
  if text ~= nil then return false, text end
  if type(err) == 'table' and type(err.err) == 'string' then return false, err.err end
  return false, err
end
pcall = function(f, ...)
  return caught(raw_pcall(f, ...))
end
local raw_setmetatable, raw_getmetatable = setmetatable, getmetatable
-- struct.pack (Rust) takes its values in a table: mlua reads a number
-- under 2^-52 passed straight to Rust as 0, a table's items exactly.
local pack_values = struct.pack
struct.pack = function(...) return pack_values(select('#', ...), {...}) end
local libs = {"redis", "cjson", "cmsgpack", "bit", "struct", "string", "math", "table", "coroutine"}
local G = _G
local function missing(n)
  error("Script attempted to access nonexistent global variable '" .. tostring(n) .. "'", 3)
end
-- What a script or a library function sees as globals while it runs,
-- besides the shared ones: read-only views of the libraries, and _G,
-- setmetatable, and loadstring and load compiling into its environment.
local function runtime_vars(env)
  local vars = {}
  for _, n in ipairs(libs) do vars[n] = readonly(G[n]) end
  vars._G = env
  vars.setmetatable = function(t, mt)
    if raw_getmetatable(t) == ro_mt.__metatable then error("Attempt to modify a readonly table", 2) end
    return raw_setmetatable(t, mt)
  end
  vars.loadstring = function(...)
    local nargs = select('#', ...)
    local s, name = ...
    s = string_arg(s, 1, 'loadstring', nargs)
    if name == nil then name = s else name = string_arg(name, 2, 'loadstring', nargs) end
    return compile(s, name, env)
  end
  -- 5.1's load runs the reader while the chunk's name is not yet anchored
  -- (CVE-2025-49844, a use after free): the reader is drained here first,
  -- and the text compiled as loadstring compiles it. What the reader
  -- raises, or a piece that is not a string, is load's error result,
  -- shaped by the run's message handler as 5.1's protected parser does.
  vars.load = function(...)
    local nargs = select('#', ...)
    local reader, name = ...
    if name == nil then name = "=(load)" else name = string_arg(name, 2, 'load', nargs) end
    if type(reader) ~= 'function' then
      error("bad argument #1 to 'load' (function expected, got " .. (nargs == 0 and "no value" or type(reader)) .. ")", 2)
    end
    local parts = {}
    while true do
      local ok, piece = xpcall(reader, on_error)
      if not ok then return nil, piece end
      if piece == nil then break end
      local tp = type(piece)
      if tp ~= 'string' and tp ~= 'number' then
        -- Raised as the C reader raises it: at the line that called load.
        local _, e = raw_pcall(error, "reader function must return a string", 3)
        return nil, on_error(e)
      end
      piece = tostring(piece)
      if piece == '' then break end
      parts[#parts + 1] = piece
    end
    return compile(table.concat(parts), name, env)
  end
  return vars
end
-- Each run gets its own environment: an empty table whose reads fall
-- through to the run's own names, then to the shared globals, and whose
-- writes are refused; the libraries are read-only views.
tembo_run = function(f, keys, argv)
  local env = {}
  local vars = runtime_vars(env)
  vars.KEYS, vars.ARGV = keys, argv
  raw_setmetatable(env, {
    __index = function(t, n)
      local v = vars[n]
      if v == nil then v = G[n] end
      if v == nil then missing(n) end
      return v
    end,
    __newindex = ro_mt.__newindex,
    __metatable = ro_mt.__metatable,
  })
  raw_setfenv(f, env)
  return xpcall(f, on_error)
end
-- FUNCTION LOAD: runs a library's body in an environment that, while it
-- loads, holds only the library API (`redis.register_function`, `log`, the
-- version), and afterwards resolves like a script's, so the functions it
-- registered see the full `redis` API when they are called. Returns true
-- and the registrations, or false and the error.
local known_flags = {["no-writes"] = true, ["allow-oom"] = true, ["allow-stale"] = true,
  ["no-cluster"] = true, ["allow-cross-slot-keys"] = true}
local bad_name = "Library names can only contain letters, numbers, or underscores(_) and must be at least one character long"
tembo_load_library = function(chunk)
  local loading = true
  local registered, seen = {}, {}
  local function register(...)
    if not loading then error("redis.register_function can only be called on FUNCTION LOAD command", 2) end
    local n = select('#', ...)
    local name, callback, description, flags
    if n == 1 then
      local t = ...
      if type(t) ~= "table" then
        error("calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).", 2)
      end
      for k, v in pairs(t) do
        if type(k) ~= "string" then error("named argument key given to redis.register_function is not a string", 2) end
        local lk = string.lower(k)
        if lk == "function_name" then
          if type(v) ~= "string" then error("function_name argument given to redis.register_function must be a string", 2) end
          name = v
        elseif lk == "description" then
          if type(v) ~= "string" then error("description argument given to redis.register_function must be a string", 2) end
          description = v
        elseif lk == "callback" then
          if type(v) ~= "function" then error("callback argument given to redis.register_function must be a function", 2) end
          callback = v
        elseif lk == "flags" then
          if type(v) ~= "table" then error("flags argument to redis.register_function must be a table representing function flags", 2) end
          flags = {}
          for _, f in ipairs(v) do
            if type(f) ~= "string" or not known_flags[string.lower(f)] then error("unknown flag given", 2) end
            flags[#flags + 1] = string.lower(f)
          end
        else
          error("unknown argument given to redis.register_function", 2)
        end
      end
      if name == nil then error("redis.register_function must get a function name argument", 2) end
      if callback == nil then error("redis.register_function must get a callback argument", 2) end
    elseif n == 2 then
      name, callback = ...
      if type(name) ~= "string" then error("first argument to redis.register_function must be a string", 2) end
      if type(callback) ~= "function" then error("second argument to redis.register_function must be a function", 2) end
    else
      error("wrong number of arguments to redis.register_function", 2)
    end
    if not string.find(name, "^[%w_]+$") then error(bad_name, 2) end
    local lname = string.lower(name)
    if seen[lname] then error("Function already exists in the library", 2) end
    seen[lname] = true
    registered[#registered + 1] = {name, callback, description or false, flags or {}}
  end
  local api = {register_function = register}
  for k, v in pairs(G.redis) do
    if type(k) == "string" and (k == "log" or string.sub(k, 1, 4) == "LOG_" or string.sub(k, 1, 6) == "REDIS_") then
      api[k] = v
    end
  end
  local api_view = raw_setmetatable({}, {
    __index = function(_, n)
      local v = api[n]
      if v == nil then missing(n) end
      return v
    end,
    __newindex = ro_mt.__newindex,
    __metatable = ro_mt.__metatable,
  })
  local env = {}
  local vars = runtime_vars(env)
  raw_setmetatable(env, {
    __index = function(t, n)
      local v
      if loading then
        if n == "redis" then v = api_view end
      else
        v = vars[n]
        if v == nil then v = G[n] end
      end
      if v == nil then missing(n) end
      return v
    end,
    __newindex = ro_mt.__newindex,
    __metatable = ro_mt.__metatable,
  })
  raw_setfenv(chunk, env)
  local ok, err = raw_pcall(chunk)
  loading = false
  if not ok then return false, err end
  return true, registered
end
tembo_fcall = function(f, keys, args)
  return xpcall(function() return f(keys, args) end, on_error)
end
"#;

const INSTALL: &str = r#"
return function(call, pc, setresp, acl_check)
  redis.call = call
  redis.pcall = pc
  redis.setresp = setresp
  redis.acl_check_cmd = acl_check
end
"#;

/// A compiled script and its source.
struct Cached {
    source: Vec<u8>,
    function: Function,
}

mod functions;
pub use functions::LoadPolicy;

/// The interpreter, the cache of scripts by SHA-1, the function libraries,
/// and the time limit.
pub struct Engine {
    lua: Lua,
    cache: HashMap<String, Cached>,
    libs: functions::Libraries,
    install: Function,
    run: Function,
    load_library: Function,
    fcall: Function,
    /// What the instruction hook watches (also the interpreter's app data).
    watch: SharedWatch,
    /// Scripts and functions run (for the collection rhythm).
    runs: u64,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").field("scripts", &self.cache.len()).finish()
    }
}

/// Compiles `code`, named `@{name}`, as Lua source text. Lua 5.1 loads
/// bytecode unchecked (a crafted chunk reads and writes the server's
/// memory); Redis's Lua has no loader for it, so its parser meets the
/// binary chunk's first byte and says so: the same error here.
pub(crate) fn compile_text(lua: &Lua, code: &[u8], name: &str) -> mlua::Result<Function> {
    if code.first() == Some(&0x1b) {
        return Err(mlua::Error::SyntaxError {
            message: format!("{name}:1: unexpected symbol near 'char(27)'"),
            incomplete_input: false,
        });
    }
    lua.load(code).set_name(format!("@{name}")).set_mode(mlua::ChunkMode::Text).into_function()
}

/// The lower-case SHA-1 hex digest of `source`, a script's id.
pub fn sha1hex(source: &[u8]) -> String {
    sha1_smol::Sha1::from(source).digest().to_string()
}

fn lua_err(e: mlua::Error) -> CmdError {
    CmdError::err(format!("Lua interpreter: {e}"))
}

impl Engine {
    /// A fresh interpreter with Redis's script environment.
    pub fn new() -> Result<Engine, CmdError> {
        let lua = Lua::new_with(StdLib::TABLE | StdLib::STRING | StdLib::MATH, LuaOptions::new()).map_err(lua_err)?;
        let globals = lua.globals();
        for unsafe_fn in ["loadfile", "dofile", "print"] {
            globals.raw_set(unsafe_fn, Value::Nil).map_err(lua_err)?;
        }
        crate::script_libs::install(&lua).map_err(lua_err)?;
        // A script that allocates without end fails with "not enough
        // memory" instead of taking the server's memory.
        lua.set_memory_limit(SCRIPT_MEMORY_LIMIT).map_err(lua_err)?;
        globals.raw_set("tembo_raised_at", lua.create_function(raised_at).map_err(lua_err)?).map_err(lua_err)?;
        let error_text = lua.create_function(|_, v: Value| Ok(error_text(&v))).map_err(lua_err)?;
        globals.raw_set("tembo_error_text", error_text).map_err(lua_err)?;
        let hook_on = lua
            .create_function(|lua, co: Value| {
                // On behalf of the script that resumes: a killed run's
                // error is its own.
                watch_step(lua, || false)?;
                // Not a thread: `coroutine.resume` itself says so.
                if let Value::Thread(co) = co {
                    co.set_hook(triggers(lua), hook);
                }
                Ok(())
            })
            .map_err(lua_err)?;
        globals.raw_set("tembo_hook_on", hook_on).map_err(lua_err)?;
        // Called by the thread that resumed: `set_hook` hooks the caller.
        let rehook = lua
            .create_function(|lua, ()| {
                lua.set_hook(triggers(lua), hook);
                Ok(())
            })
            .map_err(lua_err)?;
        globals.raw_set("tembo_rehook", rehook).map_err(lua_err)?;
        lua.load(PRELUDE).set_name("@prelude").exec().map_err(lua_err)?;
        let install = lua.load(INSTALL).set_name("@install").eval::<Function>().map_err(lua_err)?;
        let take = |name: &str| -> Result<Function, CmdError> {
            let f: Function = globals.raw_get(name).map_err(lua_err)?;
            globals.raw_set(name, Value::Nil).map_err(lua_err)?;
            Ok(f)
        };
        let (run, load_library, fcall) = (take("tembo_run")?, take("tembo_load_library")?, take("tembo_fcall")?);
        let watch = SharedWatch::default();
        lua.set_app_data(watch.clone());
        lua.set_hook(EVERY_10K, hook);
        Ok(Engine {
            lua,
            cache: HashMap::new(),
            libs: functions::Libraries::default(),
            install,
            run,
            load_library,
            fcall,
            watch,
            runs: 0,
        })
    }

    /// Compiles `source` into the cache (if it is not there yet); its id.
    pub fn load(&mut self, source: &[u8]) -> Result<String, CmdError> {
        let sha = sha1hex(source);
        if self.cache.contains_key(&sha) {
            return Ok(sha);
        }
        // Redis skips a `#!lua` shebang line (its flags are read by the
        // caller); keep the line count so error lines stay right.
        let body: Vec<u8> = if source.starts_with(b"#!") {
            let nl = source.iter().position(|&b| b == b'\n').unwrap_or(source.len());
            source[nl..].to_vec()
        } else {
            source.to_vec()
        };
        let function = compile_text(&self.lua, &body, "user_script").map_err(|e| {
            let msg = match &e {
                mlua::Error::SyntaxError { message, .. } => message.clone(),
                other => other.to_string(),
            };
            CmdError::err(format!("Error compiling script (new function): {msg}"))
        })?;
        self.cache.insert(sha.clone(), Cached { source: source.to_vec(), function });
        Ok(sha)
    }

    /// Whether a script with this id is cached.
    pub fn exists(&self, sha: &str) -> bool {
        self.cache.contains_key(&sha.to_ascii_lowercase())
    }

    /// The source of a cached script.
    pub fn source(&self, sha: &str) -> Option<&[u8]> {
        self.cache.get(&sha.to_ascii_lowercase()).map(|c| c.source.as_slice())
    }

    /// A fresh interpreter with the same scripts cached and libraries
    /// loaded: after a script ran the interpreter out of memory, its state
    /// is not trusted further.
    pub fn rebuilt(&self) -> Result<Engine, CmdError> {
        let mut fresh = Engine::new()?;
        for cached in self.cache.values() {
            fresh.load(&cached.source)?;
        }
        let codes: Vec<Vec<u8>> = self.libraries().map(|l| l.code.clone()).collect();
        fresh.load_libraries(&codes, LoadPolicy::Append)?;
        Ok(fresh)
    }

    /// How many scripts are cached (INFO memory).
    pub fn len(&self) -> usize {
        self.cache.len()
    }

    /// Bytes the Lua interpreter holds (INFO used_memory_lua).
    pub fn vm_bytes(&self) -> usize {
        self.lua.used_memory()
    }

    /// Bytes of the cached scripts' source.
    pub fn source_bytes(&self) -> usize {
        self.cache.values().map(|c| c.source.len()).sum()
    }

    /// SCRIPT FLUSH: a fresh interpreter with no script cached, the
    /// function libraries loaded again (Redis resets its scripting VM,
    /// giving back everything scripts left behind).
    pub fn flushed(&self) -> Result<Engine, CmdError> {
        let mut fresh = Engine::new()?;
        let codes: Vec<Vec<u8>> = self.libraries().map(|l| l.code.clone()).collect();
        fresh.load_libraries(&codes, LoadPolicy::Append)?;
        Ok(fresh)
    }

    /// Runs cached script `sha` with `keys` and `argv`; `read_only` refuses
    /// write commands; past `limit` the script is stopped and the pending
    /// writes are marked torn (none of them will be committed).
    pub fn run(
        &mut self,
        cx: &mut Ctx,
        sha: &str,
        keys: &[Vec<u8>],
        argv: &[Vec<u8>],
        read_only: bool,
        limit: Duration,
    ) -> Result<Reply, CmdError> {
        let sha = sha.to_ascii_lowercase();
        let Some(cached) = self.cache.get(&sha) else {
            return Err(CmdError("NOSCRIPT No matching script. Please use EVAL.".into()));
        };
        let callee = cached.function.clone();
        let wrapper = self.run.clone();
        self.execute(cx, Run { wrapper, callee, keys, argv, read_only, limit, label: &sha, chunk: "user_script" })
    }

    /// Runs `run.callee` through its wrapper (`tembo_run` for a script,
    /// `tembo_fcall` for a library function) with the `redis` API bound to
    /// `cx`; maps the outcome to a reply or Redis's error text.
    fn execute(&mut self, cx: &mut Ctx, run: Run<'_>) -> Result<Reply, CmdError> {
        let lua = &self.lua;
        let strings = |items: &[Vec<u8>]| -> mlua::Result<Table> {
            lua.create_sequence_from(items.iter().map(|b| lua.create_string(b)).collect::<mlua::Result<Vec<_>>>()?)
        };
        let (keys, argv) = (strings(run.keys).map_err(lua_err)?, strings(run.argv).map_err(lua_err)?);
        let read_only = run.read_only;
        if let Some(r) = cx.st.script_run.as_mut() {
            r.eval = run.chunk == "user_script";
            r.name = run.label.to_string();
            r.libraries = (self.libraries().count(), self.function_count());
        }
        self.arm(Instant::now() + run.limit, true);
        let resp3 = Cell::new(false);
        let cx = RefCell::new(cx);
        let outcome = lua.scope(|scope| {
            // What the hook calls once the script is busy (see `hook`).
            let serve = scope.create_function(|_, ()| {
                let Ok(mut cx) = cx.try_borrow_mut() else { return Ok(false) };
                Ok(crate::busy::serve(cx.st).is_some())
            })?;
            lua.set_named_registry_value(SERVE_KEY, serve)?;
            // A Rust function, not a Lua wrapper around `pcall`: a
            // `return redis.call(...)` tail call then keeps the script's
            // frame, whose line the error names.
            let raising_call = scope.create_function(|lua, args: Variadic<Value>| {
                let mut cx = cx.borrow_mut();
                match call(&mut cx, &args, read_only, script_proto(resp3.get())) {
                    Reply::Error(e) => Err(mlua::Error::external(CallError(e))),
                    reply => reply_to_lua(lua, reply, resp3.get()),
                }
            })?;
            let pcall = scope.create_function(|lua, args: Variadic<Value>| {
                let mut cx = cx.borrow_mut();
                let reply = call(&mut cx, &args, read_only, script_proto(resp3.get()));
                reply_to_lua(lua, reply, resp3.get())
            })?;
            let setresp = scope.create_function(|_, v: i64| match v {
                2 | 3 => {
                    resp3.set(v == 3);
                    Ok(())
                }
                _ => Err(mlua::Error::RuntimeError("RESP version must be 2 or 3.".into())),
            })?;
            let acl_check = scope.create_function(|_, args: Variadic<Value>| {
                let cx = cx.borrow();
                acl_check_cmd(&cx, &args)
            })?;
            self.install.call::<()>((raising_call, pcall, setresp, acl_check))?;
            run.wrapper.call::<(bool, Value)>((run.callee, keys, argv))
        });
        let _ = lua.unset_named_registry_value(SERVE_KEY);
        let watch = self.disarm();
        if self.lua.used_memory() > GC_AFTER_BYTES {
            // Give a big script's garbage back before the next one runs.
            let _ = self.lua.gc_collect();
            let _ = self.lua.gc_collect();
        } else {
            // As Redis: an incremental step every GC_STEP_EVERY scripts,
            // so many small scripts' garbage does not pile up between
            // collections (INFO used_memory_lua stays near its floor).
            self.runs = self.runs.wrapping_add(1);
            if self.runs % GC_STEP_EVERY == 0 {
                let _ = self.lua.gc_step_kbytes(GC_STEP_KB);
            }
        }
        let cx = cx.into_inner();
        if cx.st.script_run.as_ref().is_some_and(|r| r.kill == Some(crate::busy::Kill::Shutdown)) {
            // SHUTDOWN NOSAVE: none of the script's writes may be committed.
            cx.st.torn = true;
            cx.st.script_stopped_by_shutdown = true;
        }
        if watch.killed {
            log::warn!("Lua script killed by user with SCRIPT KILL.");
        }
        match outcome.map_err(lua_err)? {
            (true, value) => Ok(lua_to_reply(value, 0, resp3.get())),
            (false, Value::Table(t)) if t.raw_get::<Value>("err").is_ok_and(|v| !v.is_nil()) => {
                let msg = bytes_text(&t.raw_get::<Value>("err").unwrap_or(Value::Nil));
                // The message handler added where it was raised (see
                // PRELUDE); a table returned rather than raised has no place.
                match (t.raw_get::<Option<String>>("source"), t.raw_get::<Option<i64>>("line")) {
                    (Ok(Some(source)), Ok(Some(line))) => {
                        Err(CmdError(format!("{msg} script: {}, on {source}:{line}.", run.label)))
                    }
                    _ => Err(CmdError(msg)),
                }
            }
            (false, err) => Err(script_error(&bytes_text(&err), run.label, run.chunk)),
        }
    }
}

/// How often the instruction hook looks at the clock.
const EVERY_10K: HookTriggers = HookTriggers::new().every_nth_instruction(10_000);

/// Registry name of the run's function that serves the other clients
/// while the script is busy (a scope function bound to the run's context).
const SERVE_KEY: &str = "tembo.busy.serve";

/// What the instruction hook acts on: the time limit of the run or library
/// load in progress.
#[derive(Debug, Default)]
struct Watch {
    /// When the time limit is reached; none between runs.
    deadline: Option<Instant>,
    /// Past the deadline a script's run serves the other clients
    /// (`crate::busy`); a library's load is stopped.
    serve: bool,
    /// The load was stopped at its deadline.
    stopped: bool,
    /// The run was killed: the hook now raises on every line.
    killed: bool,
}

/// The watch, shared by the engine and its interpreter's hook.
#[derive(Clone, Debug, Default)]
struct SharedWatch(Arc<Mutex<Watch>>);

impl SharedWatch {
    fn lock(&self) -> MutexGuard<'_, Watch> {
        // A panic while held leaves plain flags: still good to read.
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Engine {
    /// Starts the hook's watch of a run (`serve`) or a load.
    fn arm(&self, deadline: Instant, serve: bool) {
        *self.watch.lock() = Watch { deadline: Some(deadline), serve, stopped: false, killed: false };
        // On the main thread again, whatever a coroutine of an earlier run did.
        self.lua.set_hook(EVERY_10K, hook);
    }

    /// Ends the watch; what it saw. A killed run's line hook goes back to
    /// the cheap one.
    fn disarm(&self) -> Watch {
        let watch = std::mem::take(&mut *self.watch.lock());
        if watch.killed {
            self.lua.set_hook(EVERY_10K, hook);
        }
        watch
    }
}

/// What the hook runs on: every 10,000 instructions, or every line once
/// the run is killed.
fn triggers(lua: &Lua) -> HookTriggers {
    match lua.app_data_ref::<SharedWatch>() {
        Some(w) if w.lock().killed => HookTriggers::EVERY_LINE,
        _ => EVERY_10K,
    }
}

/// The instruction hook: past its deadline a library's load is stopped,
/// and a script's run serves the other clients and is stopped if one of
/// them kills it. Once killed, it raises on every line of the script's
/// own code, so that no `pcall` in a loop can hold the script (as Redis
/// does); the prelude's wrappers and error handler run on.
fn hook(lua: &Lua, debug: mlua::Debug) -> mlua::Result<VmState> {
    watch_step(lua, || debug.source().source.as_deref() == Some("@prelude"))
}

/// The hook's work, also done at every coroutine switch (`tembo_hook_on`):
/// a switch hooks the threads afresh, which restarts their instruction
/// counts, so a loop that switches often would never reach its count.
/// `in_prelude` says whether the code running is the prelude's own.
fn watch_step(lua: &Lua, in_prelude: impl FnOnce() -> bool) -> mlua::Result<VmState> {
    let killed = || mlua::Error::RuntimeError(crate::busy::KILLED.into());
    let Some(shared) = lua.app_data_ref::<SharedWatch>().map(|w| w.clone()) else { return Ok(VmState::Continue) };
    {
        let mut watch = shared.lock();
        if watch.killed {
            return if in_prelude() { Ok(VmState::Continue) } else { Err(killed()) };
        }
        match watch.deadline {
            Some(at) if Instant::now() >= at => {}
            _ => return Ok(VmState::Continue),
        }
        if !watch.serve {
            watch.stopped = true;
            return Err(mlua::Error::RuntimeError("script time limit".into()));
        }
    }
    let serve: Function = lua.named_registry_value(SERVE_KEY)?;
    if serve.call::<bool>(())? {
        shared.lock().killed = true;
        lua.set_hook(HookTriggers::EVERY_LINE, hook);
        return Err(killed());
    }
    Ok(VmState::Continue)
}

/// What `redis.call` raises when its command fails: the error reply's text
/// (`ERR ...`, `WRONGTYPE ...`).
#[derive(Debug)]
struct CallError(String);

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CallError {}

/// The text of an error a Rust function raised in Lua, and whether it is
/// a command's error reply (a [`CallError`], code included); `(None,
/// None)` for any other value.
fn error_text(v: &Value) -> (Option<String>, Option<bool>) {
    let Value::Error(e) = v else { return (None, None) };
    if let Some(c) = e.chain().find_map(|c| c.downcast_ref::<CallError>()) {
        return (Some(c.0.clone()), Some(true));
    }
    // A callback's error is wrapped with its traceback: the innermost
    // cause is what the helper said.
    let text = match e.chain().last().and_then(|c| c.downcast_ref::<mlua::Error>()) {
        Some(mlua::Error::RuntimeError(m)) => m.clone(),
        Some(other) => other.to_string(),
        None => e.chain().last().map_or_else(|| e.to_string(), |c| c.to_string()),
    };
    (Some(text), Some(false))
}

/// For the message handler of a script's run: the chunk name and line of
/// the Lua code that raised the error being handled. Level 0 is this
/// function, 1 the handler; above them C functions (`error`,
/// `redis.call`) and the prelude's own Lua frames are skipped to reach the
/// script's. None when there is no such frame with a line (a Lua tail call
/// replaced it).
fn raised_at(lua: &Lua, (): ()) -> mlua::Result<(Option<String>, Option<i64>)> {
    for level in 2..8 {
        let Some(frame) = lua.inspect_stack(level) else { break };
        let source = frame.source();
        if source.what == "C" || matches!(source.source.as_deref(), Some("@install" | "@prelude")) {
            continue;
        }
        if source.what == "tail" || frame.curr_line() <= 0 {
            break;
        }
        return Ok((source.source.map(|s| s.into_owned()), Some(i64::from(frame.curr_line()))));
    }
    Ok((None, None))
}

/// One run for [`Engine::execute`].
struct Run<'a> {
    wrapper: Function,
    callee: Function,
    keys: &'a [Vec<u8>],
    argv: &'a [Vec<u8>],
    read_only: bool,
    limit: Duration,
    /// The script's SHA-1 or the function's name, for error replies.
    label: &'a str,
    /// The chunk name its code was compiled under.
    chunk: &'a str,
}

/// Redis's text for a Lua error raised by a script or function: the
/// message, then which script and which line.
fn script_error(msg: &str, label: &str, chunk: &str) -> CmdError {
    let line = msg
        .strip_prefix(chunk)
        .and_then(|rest| rest.strip_prefix(':'))
        .and_then(|rest| rest.split(':').next())
        .map(|l| format!(", on @{chunk}:{l}."))
        .unwrap_or_else(|| ".".into());
    CmdError::err(format!("{msg} script: {label}{line}"))
}

/// The text of a Lua string or error value (for an error raised by a Rust
/// function, its own message without mlua's traceback).
fn bytes_text(v: &Value) -> String {
    fn root(e: &mlua::Error) -> String {
        match e {
            mlua::Error::CallbackError { cause, .. } => root(cause),
            mlua::Error::RuntimeError(msg) => msg.clone(),
            other => other.to_string(),
        }
    }
    match v {
        Value::String(s) => String::from_utf8_lossy(&s.as_bytes()).into_owned(),
        Value::Error(e) => root(e),
        other => format!("{other:?}"),
    }
}

/// `redis.acl_check_cmd(command, args…)`: whether the script's user may
/// run that call (nothing is logged).
fn acl_check_cmd(cx: &Ctx, args: &[Value]) -> mlua::Result<bool> {
    let invalid = || mlua::Error::RuntimeError("Invalid command passed to redis.acl_check_cmd()".into());
    let argv = args
        .iter()
        .map(|a| match a {
            Value::String(s) => Ok(s.as_bytes().to_vec()),
            Value::Integer(n) => Ok(n.to_string().into_bytes()),
            Value::Number(f) => Ok(number_text(*f).into_bytes()),
            _ => Err(mlua::Error::RuntimeError("Lua redis lib command arguments must be strings or integers".into())),
        })
        .collect::<mlua::Result<Vec<Vec<u8>>>>()?;
    let spec = argv.first().and_then(|name| cmd::spec(name)).ok_or_else(invalid)?;
    Ok(cx.st.acl.check(&cx.client.user, spec, &argv).is_ok())
}

/// The protocol a script's calls are answered in: RESP2 unless the script
/// chose RESP3 with `redis.setresp(3)`, whatever the calling client speaks
/// (as Redis's script client), so that `ZRANGE … WITHSCORES` gives a
/// script the flat array it indexes (asynq's scripts do).
fn script_proto(resp3: bool) -> u8 {
    if resp3 {
        3
    } else {
        2
    }
}

/// `redis.pcall`'s body: checks and runs one command, answered in
/// protocol `proto`.
fn call(cx: &mut Ctx, args: &[Value], read_only: bool, proto: u8) -> Reply {
    let mut argv = Vec::with_capacity(args.len());
    for a in args {
        match a {
            Value::String(s) => argv.push(s.as_bytes().to_vec()),
            Value::Integer(n) => argv.push(n.to_string().into_bytes()),
            Value::Number(f) => argv.push(number_text(*f).into_bytes()),
            _ => return Reply::Error("ERR Lua redis lib command arguments must be strings or integers".into()),
        }
    }
    if argv.is_empty() {
        return Reply::Error("ERR Please specify at least one argument for this redis lib call".into());
    }
    let Some(spec) = cmd::spec(&argv[0]) else {
        return Reply::Error("ERR Unknown Redis command called from script".into());
    };
    if let Some(msg) = refusal(cx, spec, &argv, read_only) {
        // A refused call counts as the command's rejected call and as one
        // error reply (not again when the script passes it on).
        cx.st.stats.rejected(cmd::full_name(spec, &argv), &msg);
        cx.st.stats.script_errors.push(msg.clone());
        return Reply::Error(msg);
    }
    if spec.flags.contains(&"write") {
        // From now on no SCRIPT KILL or FUNCTION KILL may stop the script.
        if let Some(run) = cx.st.script_run.as_mut() {
            run.wrote = true;
        }
    }
    // Blocking commands answer at once inside a script, as in Redis.
    let no_block = std::mem::replace(&mut cx.client.no_block, true);
    // MONITOR shows a script's commands as coming from "lua", as Redis does.
    let addr = std::mem::replace(&mut cx.client.addr, "lua".into());
    let in_script = std::mem::replace(&mut cx.client.in_script, true);
    let client_proto = std::mem::replace(&mut cx.client.proto, proto);
    let frozen = cx.st.frozen_now.replace(cx.now);
    let reply = cmd::run(cx.st, cx.client, spec, &argv);
    cx.st.frozen_now = frozen;
    cx.client.proto = client_proto;
    cx.client.in_script = in_script;
    cx.client.addr = addr;
    cx.client.no_block = no_block;
    reply
}

/// Why a script may not run this call, if it may not.
fn refusal(cx: &mut Ctx, spec: &cmd::Spec, argv: &[Vec<u8>], read_only: bool) -> Option<String> {
    if !cmd::arity_ok(spec.arity, argv.len()) {
        return Some("ERR Wrong number of args calling Redis command from script".into());
    }
    if (spec.flags.contains(&"noscript") || DENIED.contains(&spec.name)) && !cx.st.scripts_allow_denied {
        return Some("ERR This Redis command is not allowed from script".into());
    }
    if (spec.name == "xread" || spec.name == "xreadgroup") && argv.iter().any(|a| a.eq_ignore_ascii_case(b"block")) {
        return Some(format!("ERR {} command is not allowed with BLOCK option from scripts", spec.name));
    }
    if read_only && spec.flags.contains(&"write") {
        return Some("ERR Write commands are not allowed from read-only scripts.".into());
    }
    if let Some(denied) = cmd::acl_denied(cx.st, cx.client, spec, argv, "lua") {
        // Redis 7.0's words for a refusal inside a script.
        let what = match denied {
            crate::acl::Denied::Command(_) => "run this command or subcommand",
            crate::acl::Denied::Key(_) => "access at least one of the keys mentioned in the command",
            crate::acl::Denied::Channel(_) => "publish to the channel mentioned in the command",
        };
        return Some(format!("ERR The user executing the script can't {what}"));
    }
    if crate::maxmemory::script_call_refused(cx.st, spec, argv) {
        return Some(crate::maxmemory::OOM_ERROR.into());
    }
    None
}

/// A Lua number as a command argument: integral values without a fraction.
fn number_text(f: f64) -> String {
    if f.fract() == 0.0 && f.abs() < 1e17 {
        format!("{}", f as i64)
    } else {
        format!("{f}")
    }
}

fn single(lua: &Lua, key: &str, value: Value) -> mlua::Result<Value> {
    let t = lua.create_table()?;
    t.raw_set(key, value)?;
    Ok(Value::Table(t))
}

/// `{verbatim_string = {format = format, string = text}}`.
fn verbatim_table(lua: &Lua, format: &[u8], text: &[u8]) -> mlua::Result<Value> {
    let inner = lua.create_table()?;
    inner.raw_set("format", lua.create_string(format)?)?;
    inner.raw_set("string", lua.create_string(text)?)?;
    single(lua, "verbatim_string", Value::Table(inner))
}

/// A command's reply as a script sees it (Redis's RESP2/RESP3 → Lua rules).
pub fn reply_to_lua(lua: &Lua, reply: Reply, resp3: bool) -> mlua::Result<Value> {
    let seq = |items: Vec<Reply>| -> mlua::Result<Value> {
        let t = lua.create_table_with_capacity(items.len(), 0)?;
        for (i, r) in items.into_iter().enumerate() {
            t.raw_set(i + 1, reply_to_lua(lua, r, resp3)?)?;
        }
        Ok(Value::Table(t))
    };
    Ok(match reply {
        Reply::Int(n) => Value::Integer(n),
        Reply::Bulk(b) => Value::String(lua.create_string(b)?),
        Reply::Nil | Reply::NilArray if resp3 => Value::Nil,
        Reply::Nil | Reply::NilArray => Value::Boolean(false),
        Reply::Simple(s) => single(lua, "ok", Value::String(lua.create_string(s)?))?,
        Reply::Error(e) => {
            let text = crate::script_libs::error_table_text(e.as_bytes());
            single(lua, "err", Value::String(lua.create_string(text)?))?
        }
        // What a call that adds out-of-band data (attributes, a push) to
        // its reply gives a script is the reply alone.
        Reply::Many(mut items) if items.iter().any(|r| matches!(r, Reply::Attribute(_) | Reply::Push(_))) => {
            match items.pop() {
                Some(last) => reply_to_lua(lua, last, resp3)?,
                None => Value::Nil,
            }
        }
        Reply::Array(items) | Reply::Push(items) | Reply::Many(items) => seq(items)?,
        Reply::Set(items) if resp3 => {
            let t = lua.create_table()?;
            for r in items {
                t.raw_set(reply_to_lua(lua, r, resp3)?, true)?;
            }
            single(lua, "set", Value::Table(t))?
        }
        Reply::Set(items) => seq(items)?,
        Reply::Map(pairs) if resp3 => {
            let t = lua.create_table()?;
            for (k, v) in pairs {
                t.raw_set(reply_to_lua(lua, k, resp3)?, reply_to_lua(lua, v, resp3)?)?;
            }
            single(lua, "map", Value::Table(t))?
        }
        Reply::Map(pairs) => seq(pairs.into_iter().flat_map(|(k, v)| [k, v]).collect())?,
        Reply::Double(d) if resp3 => single(lua, "double", Value::Number(d))?,
        Reply::Double(d) => Value::String(lua.create_string(crate::resp::format_double(d))?),
        Reply::Human(d) if resp3 => single(lua, "double", Value::Number(d))?,
        Reply::Human(d) => Value::String(lua.create_string(crate::resp::format_human(d))?),
        Reply::Bool(b) if resp3 => Value::Boolean(b),
        Reply::Bool(b) => Value::Integer(b as i64),
        // RESP3 scripts see a verbatim string as Redis gives it them: a
        // table {verbatim_string = {format = ..., string = ...}}.
        Reply::Verbatim(s) if resp3 => verbatim_table(lua, b"txt", s.as_bytes())?,
        Reply::VerbatimAs(format, s) if resp3 => verbatim_table(lua, &format, &s)?,
        Reply::Verbatim(s) => Value::String(lua.create_string(s)?),
        Reply::VerbatimAs(_, s) => Value::String(lua.create_string(s)?),
        Reply::BigNumber(n) if resp3 => single(lua, "big_number", Value::String(lua.create_string(n)?))?,
        Reply::BigNumber(n) => Value::String(lua.create_string(n)?),
        // Attributes describe a reply; a script sees only the reply.
        Reply::Attribute(_) => Value::Nil,
    })
}

/// A script's return value as a reply (Redis's Lua → RESP rules);
/// `resp3`: the script chose RESP3 with `redis.setresp(3)`, under which a
/// boolean is a boolean reply (`#t`/`#f`, or `:1`/`:0` to a RESP2 client)
/// rather than `:1` / nil.
/// Redis's `(long long)` cast of a script's number: as x86 converts, a
/// NaN or a number out of range is the smallest integer.
fn c_long_long(f: f64) -> i64 {
    // -2^63 and 2^63, exactly.
    let (lo, hi) = (i64::MIN as f64, -(i64::MIN as f64));
    if f.is_nan() || !(lo..hi).contains(&f) {
        i64::MIN
    } else {
        f as i64
    }
}

pub fn lua_to_reply(value: Value, depth: usize, resp3: bool) -> Reply {
    if depth > 1000 {
        return Reply::Error("ERR reached lua stack limit".into());
    }
    match value {
        Value::Nil => Reply::Nil,
        Value::Boolean(b) if resp3 => Reply::Bool(b),
        Value::Boolean(true) => Reply::Int(1),
        Value::Boolean(false) => Reply::Nil,
        Value::Integer(n) => Reply::Int(n),
        Value::Number(f) => Reply::Int(c_long_long(f)),
        Value::String(s) => Reply::Bulk(s.as_bytes().to_vec()),
        Value::Table(t) => table_to_reply(t, depth, resp3),
        _ => Reply::Nil,
    }
}

fn table_to_reply(t: Table, depth: usize, resp3: bool) -> Reply {
    let field = |k: &str| t.raw_get::<Value>(k).unwrap_or(Value::Nil);
    if let Value::String(e) = field("err") {
        // Redis drops line breaks at the end (those inside become spaces).
        let text = String::from_utf8_lossy(&e.as_bytes()).into_owned();
        return Reply::Error(text.trim_end_matches(['\r', '\n']).to_string());
    }
    if let Value::String(s) = field("ok") {
        return Reply::Simple(String::from_utf8_lossy(&s.as_bytes()).into_owned());
    }
    match field("double") {
        Value::Number(d) => return Reply::Double(d),
        Value::Integer(n) => return Reply::Double(n as f64),
        _ => {}
    }
    if let Value::String(n) = field("big_number") {
        // Redis maps line breaks to spaces (`sdsmapchars`), in RESP2's bulk
        // string as in RESP3's line.
        let digits = n.as_bytes().iter().map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }).collect();
        return Reply::BigNumber(digits);
    }
    if let Value::Table(m) = field("map") {
        let pairs = m.pairs::<Value, Value>().filter_map(Result::ok);
        return Reply::Map(
            pairs.map(|(k, v)| (lua_to_reply(k, depth + 1, resp3), lua_to_reply(v, depth + 1, resp3))).collect(),
        );
    }
    if let Value::Table(s) = field("set") {
        let members = s.pairs::<Value, Value>().filter_map(Result::ok);
        return Reply::Set(members.map(|(k, _)| lua_to_reply(k, depth + 1, resp3)).collect());
    }
    if let Value::Table(v) = field("verbatim_string") {
        if let (Ok(Value::String(format)), Ok(Value::String(text))) =
            (v.raw_get::<Value>("format"), v.raw_get::<Value>("string"))
        {
            if let Ok(format) = <[u8; 3]>::try_from(&format.as_bytes()[..]) {
                return Reply::VerbatimAs(format, text.as_bytes().to_vec());
            }
        }
    }
    let mut items = Vec::new();
    for i in 1.. {
        match t.raw_get::<Value>(i) {
            Ok(Value::Nil) | Err(_) => break,
            Ok(v) => items.push(lua_to_reply(v, depth + 1, resp3)),
        }
    }
    Reply::Array(items)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reply a script's return expression gives, encoded for a client
    /// of protocol `proto`, the script having chosen RESP3 or not.
    fn returned(expr: &str, script_resp3: bool, proto: u8) -> String {
        let lua = Lua::new();
        let v: Value = lua.load(expr).eval().unwrap();
        let mut out = Vec::new();
        lua_to_reply(v, 0, script_resp3).encode(proto, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn booleans_follow_the_scripts_protocol_as_in_redis() {
        assert_eq!(returned("true", false, 3), ":1\r\n");
        assert_eq!(returned("false", false, 3), "_\r\n");
        assert_eq!(returned("false", false, 2), "$-1\r\n");
        assert_eq!(returned("true", true, 3), "#t\r\n");
        assert_eq!(returned("false", true, 3), "#f\r\n");
        assert_eq!(returned("false", true, 2), ":0\r\n");
        assert_eq!(returned("{1, true, false}", true, 3), "*3\r\n:1\r\n#t\r\n#f\r\n");
    }

    #[test]
    fn big_numbers_and_verbatim_strings_keep_their_value() {
        let big = "{big_number = '123456789012345678901234567890'}";
        assert_eq!(returned(big, true, 3), "(123456789012345678901234567890\r\n");
        assert_eq!(returned(big, false, 2), "$30\r\n123456789012345678901234567890\r\n");
        let verbatim = "{verbatim_string = {format = 'mkd', string = '# x'}}";
        assert_eq!(returned(verbatim, true, 3), "=7\r\nmkd:# x\r\n");
        assert_eq!(returned(verbatim, true, 2), "$3\r\n# x\r\n");
        // A line break cannot split a big number's line.
        assert_eq!(returned("{big_number = '1\\r\\n2'}", true, 3), "(1  2\r\n");
        assert_eq!(returned("{big_number = '1\\r\\n2'}", true, 2), "$4\r\n1  2\r\n");
    }
}
