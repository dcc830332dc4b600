//! Function libraries (Redis 7's FUNCTION LOAD and FCALL) in the script
//! interpreter.
//!
//! A library is Lua code whose first line is `#!lua name=<library>`; loading
//! it runs its body once, with only `redis.register_function`, `redis.log`
//! and the version fields available, and every function it registers
//! becomes callable by name with FCALL. The interpreter keeps the compiled
//! callbacks; the code itself is what persists (`cmd::functions` stores it
//! in the `Db` beside the keys), so a restart or a fresh interpreter loads
//! the same libraries again. Library and function names are matched without
//! regard to case, as in Redis.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use mlua::{Function, Table, Value};

use super::{bytes_text, lua_err, Engine, Run};
use crate::cmd::CmdError;
use crate::exec::Ctx;
use crate::resp::Reply;

/// How long a library's body may run while it loads (Redis's fixed limit).
const LOAD_TIMEOUT: Duration = Duration::from_millis(500);

const BAD_NAME: &str =
    "Library names can only contain letters, numbers, or underscores(_) and must be at least one character long";

/// A registered function, as FUNCTION LIST shows it.
#[derive(Clone, Debug)]
pub struct FunctionInfo {
    /// Its name as registered.
    pub name: String,
    /// `description`, if given.
    pub description: Option<Vec<u8>>,
    /// Its flags (`no-writes`, `allow-oom`, ...), lower case.
    pub flags: Vec<String>,
}

/// A loaded library.
#[derive(Clone, Debug)]
pub struct Library {
    /// Its name as given in the shebang line.
    pub name: String,
    /// The whole code, shebang line included (what FUNCTION LIST WITHCODE
    /// and FUNCTION DUMP give back).
    pub code: Vec<u8>,
    /// The functions it registered, in registration order.
    pub functions: Vec<FunctionInfo>,
}

/// A library compiled and run, not yet installed.
struct Compiled {
    library: Library,
    callbacks: Vec<Function>,
}

/// A callable function.
struct Callable {
    library: String,
    name: String,
    callback: Function,
    no_writes: bool,
    allow_oom: bool,
}

/// The loaded libraries and their functions, by lower-case name.
#[derive(Default)]
pub(super) struct Libraries {
    libs: BTreeMap<String, Library>,
    functions: HashMap<String, Callable>,
}

/// What to do with libraries already loaded when others arrive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoadPolicy {
    /// Refuse a library whose name is taken.
    Append,
    /// Replace libraries of the same name.
    Replace,
    /// Drop every library first.
    Flush,
}

/// The library name and engine of `code`'s `#!<engine> name=<name>` line.
///
/// # Errors
/// Redis's messages for a missing or malformed shebang, an engine other than
/// Lua and a bad name.
pub fn parse_library_code(code: &[u8]) -> Result<String, CmdError> {
    if !code.starts_with(b"#!") {
        return Err(CmdError::err("Missing library metadata"));
    }
    // As Redis reads it: the line ends at C's strchr of a newline (a zero
    // byte first ends the text), split with quotes; the first word less
    // its `#!` is the engine.
    let end = code.iter().position(|&b| b == b'\n' || b == 0).filter(|&i| code[i] == b'\n');
    let parts = end
        .and_then(|end| crate::resp::split_args(&code[..end]))
        .filter(|p| !p.is_empty())
        .ok_or_else(|| CmdError::err("Invalid library metadata"))?;
    let engine = parts[0].get(2..).unwrap_or_default().to_vec();
    let mut name: Option<String> = None;
    for m in &parts[1..] {
        let value = match m.get(..5) {
            Some(key) if key.eq_ignore_ascii_case(b"name=") => &m[5..],
            _ => {
                return Err(CmdError::err(format!("Invalid metadata value given: {}", String::from_utf8_lossy(m))));
            }
        };
        if name.is_some() {
            return Err(CmdError::err("Invalid metadata value, name argument was given multiple times"));
        }
        name = Some(String::from_utf8_lossy(value).into_owned());
    }
    let Some(name) = name else { return Err(CmdError::err("Library name was not given")) };
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return Err(CmdError::err(BAD_NAME));
    }
    if !engine.eq_ignore_ascii_case(b"lua") {
        return Err(CmdError::err(format!("Engine '{}' not found", String::from_utf8_lossy(&engine))));
    }
    Ok(name)
}

impl Engine {
    /// The loaded libraries, by name.
    pub fn libraries(&self) -> impl Iterator<Item = &Library> {
        self.libs.libs.values()
    }

    /// How many functions the loaded libraries registered.
    pub fn function_count(&self) -> usize {
        self.libs.functions.len()
    }

    /// FUNCTION LOAD: loads one library (replacing one of the same name if
    /// `replace`); its name.
    ///
    /// # Errors
    /// As [`Engine::load_libraries`], with the library's name quoted when
    /// it is taken, as Redis words it.
    pub fn load_library(&mut self, code: &[u8], replace: bool) -> Result<String, CmdError> {
        let name = parse_library_code(code)?;
        if !replace && self.libs.libs.contains_key(&name.to_ascii_lowercase()) {
            return Err(CmdError::err(format!("Library '{name}' already exists")));
        }
        let compiled = self.compile_library(name, code)?;
        let policy = if replace { LoadPolicy::Replace } else { LoadPolicy::Append };
        Ok(self.install(vec![compiled], policy)?.remove(0))
    }

    /// Loads libraries from their code (FUNCTION RESTORE, a restart), all
    /// or none: on any error the loaded set is as it was. Returns their
    /// names.
    ///
    /// # Errors
    /// Redis's messages: a bad shebang, a taken library or function name
    /// (`policy` decides about libraries), a compile or registration error,
    /// a body that runs past the load timeout, no functions registered.
    pub fn load_libraries(&mut self, codes: &[Vec<u8>], policy: LoadPolicy) -> Result<Vec<String>, CmdError> {
        let mut compiled = Vec::with_capacity(codes.len());
        for code in codes {
            let name = parse_library_code(code)?;
            if policy == LoadPolicy::Append && self.libs.libs.contains_key(&name.to_ascii_lowercase()) {
                return Err(CmdError::err(format!("Library {name} already exists")));
            }
            compiled.push(self.compile_library(name, code)?);
        }
        self.install(compiled, policy)
    }

    /// Compiles a library and runs its body to collect its functions.
    fn compile_library(&mut self, name: String, code: &[u8]) -> Result<Compiled, CmdError> {
        // Blank the shebang line (its metadata is read above) and keep the
        // line count, so error lines match the code the user wrote.
        let nl = code.iter().position(|&b| b == b'\n').unwrap_or(code.len());
        let chunk = super::compile_text(&self.lua, &code[nl..], "user_function")
            .map_err(|e| CmdError::err(format!("Error compiling function: {}", compile_message(&e))))?;
        self.arm(Instant::now() + LOAD_TIMEOUT, false);
        let outcome = self.load_library.call::<(bool, Value)>(chunk);
        if self.disarm().stopped {
            return Err(CmdError::err("Error registering functions: FUNCTION LOAD timeout"));
        }
        let registered = match outcome.map_err(lua_err)? {
            (true, Value::Table(t)) => t,
            (false, err) => {
                return Err(CmdError::err(format!("Error registering functions: {}", bytes_text(&err))));
            }
            (true, _) => return Err(CmdError::err("Error registering functions: no registration table")),
        };
        let mut library = Library { name, code: code.to_vec(), functions: Vec::new() };
        let mut callbacks = Vec::new();
        for entry in registered.sequence_values::<Table>() {
            let entry = entry.map_err(lua_err)?;
            let fname: String = entry.raw_get(1).map_err(lua_err)?;
            let callback: Function = entry.raw_get(2).map_err(lua_err)?;
            let description = match entry.raw_get::<Value>(3).map_err(lua_err)? {
                Value::String(s) => Some(s.as_bytes().to_vec()),
                _ => None,
            };
            let flags: Vec<String> = entry
                .raw_get::<Table>(4)
                .map_err(lua_err)?
                .sequence_values()
                .collect::<mlua::Result<_>>()
                .map_err(lua_err)?;
            library.functions.push(FunctionInfo { name: fname, description, flags });
            callbacks.push(callback);
        }
        if callbacks.is_empty() {
            return Err(CmdError::err("No functions registered"));
        }
        Ok(Compiled { library, callbacks })
    }

    /// Installs compiled libraries if no function name collides.
    fn install(&mut self, compiled: Vec<Compiled>, policy: LoadPolicy) -> Result<Vec<String>, CmdError> {
        let incoming: Vec<String> = compiled.iter().map(|c| c.library.name.to_ascii_lowercase()).collect();
        for (i, lib) in incoming.iter().enumerate() {
            if incoming[..i].contains(lib) {
                return Err(CmdError::err(format!("Library {} already exists", compiled[i].library.name)));
            }
        }
        // Which functions stay: all but those of libraries being replaced.
        let leaving = |lib: &str| policy == LoadPolicy::Flush || incoming.iter().any(|l| l == lib);
        let mut taken: HashMap<String, ()> =
            self.libs.functions.iter().filter(|(_, c)| !leaving(&c.library)).map(|(f, _)| (f.clone(), ())).collect();
        for c in &compiled {
            for f in &c.library.functions {
                if taken.insert(f.name.to_ascii_lowercase(), ()).is_some() {
                    return Err(CmdError::err(format!("Function {} already exists", f.name)));
                }
            }
        }
        if policy == LoadPolicy::Flush {
            self.flush_libraries();
        }
        for lib in &incoming {
            self.delete_library(lib);
        }
        let mut names = Vec::with_capacity(compiled.len());
        for (c, lower) in compiled.into_iter().zip(incoming) {
            for (f, callback) in c.library.functions.iter().zip(c.callbacks) {
                let no_writes = f.flags.iter().any(|fl| fl == "no-writes");
                let allow_oom = f.flags.iter().any(|fl| fl == "allow-oom");
                let callable =
                    Callable { library: lower.clone(), name: f.name.clone(), callback, no_writes, allow_oom };
                self.libs.functions.insert(f.name.to_ascii_lowercase(), callable);
            }
            names.push(c.library.name.clone());
            self.libs.libs.insert(lower, c.library);
        }
        Ok(names)
    }

    /// Unloads a library and its functions; `None` if there is none by
    /// that name.
    pub fn delete_library(&mut self, name: &str) -> Option<Library> {
        let lower = name.to_ascii_lowercase();
        let lib = self.libs.libs.remove(&lower)?;
        self.libs.functions.retain(|_, c| c.library != lower);
        Some(lib)
    }

    /// Unloads every library.
    pub fn flush_libraries(&mut self) {
        self.libs = Libraries::default();
        self.lua.gc_collect().ok();
    }

    /// Whether function `name` may write (it was not registered with
    /// `no-writes`); `None` if there is no such function.
    pub fn function_writes(&self, name: &[u8]) -> Option<bool> {
        self.function_flags(name).map(|f| !f.no_writes)
    }

    /// The `no-writes` and `allow-oom` flags function `name` was
    /// registered with; `None` if there is no such function.
    pub fn function_flags(&self, name: &[u8]) -> Option<crate::cmd::scripting::ScriptFlags> {
        let lower = String::from_utf8_lossy(name).to_ascii_lowercase();
        self.libs
            .functions
            .get(&lower)
            .map(|f| crate::cmd::scripting::ScriptFlags { no_writes: f.no_writes, allow_oom: f.allow_oom })
    }

    /// FCALL / FCALL_RO: runs function `name` with `keys` and `args`;
    /// `ro_command` is FCALL_RO, which runs only `no-writes` functions.
    ///
    /// # Errors
    /// "Function not found", a write function called by FCALL_RO, and
    /// whatever the function raises.
    pub fn call_function(
        &mut self,
        cx: &mut Ctx,
        name: &[u8],
        keys: &[Vec<u8>],
        args: &[Vec<u8>],
        ro_command: bool,
        limit: Duration,
    ) -> Result<Reply, CmdError> {
        let lower = String::from_utf8_lossy(name).to_ascii_lowercase();
        let Some(f) = self.libs.functions.get(&lower) else {
            return Err(CmdError::err("Function not found"));
        };
        if ro_command && !f.no_writes {
            return Err(CmdError::err("Can not execute a script with write flag using *_ro command."));
        }
        let flags = crate::cmd::scripting::ScriptFlags { no_writes: f.no_writes, allow_oom: f.allow_oom };
        if let Some(refused) = crate::maxmemory::script_start_refused(cx.st, flags) {
            return Err(refused);
        }
        let (callee, no_writes, label) = (f.callback.clone(), f.no_writes, f.name.clone());
        // No-writes implies allow-oom, as in Redis.
        cx.st.script_allow_oom = !flags.denies_oom();
        let wrapper = self.fcall.clone();
        let read_only = ro_command || no_writes;
        self.execute(
            cx,
            Run { wrapper, callee, keys, argv: args, read_only, limit, label: &label, chunk: "user_function" },
        )
    }
}

/// A compile error's message without mlua's decoration.
fn compile_message(e: &mlua::Error) -> String {
    match e {
        mlua::Error::SyntaxError { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shebang_lines_parse_as_redis_reads_them() {
        assert_eq!(parse_library_code(b"#!lua name=lib1\nx").unwrap(), "lib1");
        assert_eq!(parse_library_code(b"#!LUA name=\"foo\"\nx").unwrap(), "foo");
        let err = |code: &[u8]| parse_library_code(code).unwrap_err().0;
        assert_eq!(err(b"return 1"), "ERR Missing library metadata");
        assert_eq!(err(b"#! name=test\nx"), "ERR Engine '' not found");
        assert_eq!(err(b"#!bad_engine name=test\nx"), "ERR Engine 'bad_engine' not found");
        assert_eq!(err(b"#!lua name=test foo=bar\nx"), "ERR Invalid metadata value given: foo=bar");
        assert_eq!(err(b"#!lua\nx"), "ERR Library name was not given");
        assert_eq!(
            err(b"#!lua name=foo name=bar\nx"),
            "ERR Invalid metadata value, name argument was given multiple times"
        );
        assert!(err(b"#!lua name=bad-name\nx").contains("Library names can only contain"));
    }

    #[test]
    fn libraries_load_replace_and_refuse_collisions_all_or_nothing() {
        let mut e = Engine::new().unwrap();
        let lib = |name: &str, f: &str| {
            format!("#!lua name={name}\nredis.register_function('{f}', function() return 1 end)").into_bytes()
        };
        assert_eq!(e.load_library(&lib("a", "f1"), false).unwrap(), "a");
        assert!(e.load_library(&lib("A", "g"), false).unwrap_err().0.contains("Library 'A' already exists"));
        assert!(e
            .load_libraries(&[lib("A", "g")], LoadPolicy::Append)
            .unwrap_err()
            .0
            .contains("Library A already exists"));
        assert!(e.load_library(&lib("b", "F1"), false).unwrap_err().0.contains("Function F1 already exists"));
        e.load_library(&lib("a", "f2"), true).unwrap();
        assert_eq!(e.function_count(), 1);
        // A restore of two libraries, one colliding: neither lands.
        let err = e.load_libraries(&[lib("c", "f3"), lib("d", "f2")], LoadPolicy::Append).unwrap_err();
        assert!(err.0.contains("Function f2 already exists"), "{}", err.0);
        assert_eq!(e.libraries().count(), 1);
        assert!(e.delete_library("A").is_some());
        assert_eq!(e.function_count(), 0);
        let err = e.load_libraries(&[b"#!lua name=x\nreturn 1".to_vec()], LoadPolicy::Append).unwrap_err();
        assert_eq!(err.0, "ERR No functions registered");
        let err = e.load_libraries(&[b"#!lua name=x\nwhile 1 do end".to_vec()], LoadPolicy::Append).unwrap_err();
        assert!(err.0.contains("FUNCTION LOAD timeout"), "{}", err.0);
    }
}
