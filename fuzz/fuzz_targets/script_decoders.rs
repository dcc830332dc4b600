//! Fuzz target `script_decoders`: the input is bytes a Lua script hands to
//! `cmsgpack.unpack` and `cjson.decode` (see `script_decoders_logic.rs`);
//! every call must answer without a panic or a stack overflow.

#![no_main]

use std::sync::Mutex;

use libfuzzer_sys::fuzz_target;

#[allow(dead_code)]
mod logic {
    include!("script_decoders_logic.rs");
}

/// One session for the whole run: scripts write nothing, so inputs do not
/// see each other.
static SESSION: Mutex<Option<tembo_server::Session>> = Mutex::new(None);

fuzz_target!(|data: &[u8]| {
    let mut guard = SESSION.lock().unwrap_or_else(|p| p.into_inner());
    let s = guard.get_or_insert_with(logic::session);
    if let Some(failure) = logic::script_decoders(s, data) {
        panic!("{failure}");
    }
});
