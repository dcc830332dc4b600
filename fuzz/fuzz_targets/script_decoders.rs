//! Fuzz target `script_decoders`: the input is bytes a Lua script hands to
//! `cmsgpack.unpack` and `cjson.decode` (see `script_decoders_logic.rs`);
//! every call must answer without a panic or a stack overflow.

#![no_main]

use std::cell::RefCell;

use libfuzzer_sys::fuzz_target;

#[allow(dead_code)]
mod logic {
    include!("script_decoders_logic.rs");
}

thread_local! {
    /// One session for the whole run (scripts here write nothing, so
    /// inputs do not see each other); a session is not `Send`.
    static SESSION: RefCell<tembo_server::Session> = RefCell::new(logic::session());
}

fuzz_target!(|data: &[u8]| {
    if let Some(failure) = SESSION.with(|s| logic::script_decoders(&mut s.borrow_mut(), data)) {
        panic!("{failure}");
    }
});
