//! Fuzz target `commands`: the input spells a sequence of commands of the
//! command table with arguments of every shape (see `commands_logic.rs`),
//! run on a session whose keys hold every type; no command may panic.

#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;

#[allow(dead_code)]
mod logic {
    include!("commands_logic.rs");
}

thread_local! {
    /// One database and the command names for the whole run; each input
    /// runs in a session of its own, from freshly seeded keys.
    static DB: (Arc<tembo_store::Db>, Vec<String>) = {
        let opts = tembo_store::Options::with_size(64 << 20);
        let db = Arc::new(tembo_store::Db::in_memory(&opts).expect("an in-memory database"));
        let names = logic::names(&mut tembo_server::Session::new(db.clone()).expect("a session"));
        (db, names)
    };
}

fuzz_target!(|data: &[u8]| {
    let bugs = DB.with(|(db, names)| logic::run_input(db, names, data));
    if !bugs.is_empty() {
        panic!("{} commands panicked:\n{}", bugs.len(), bugs.join("\n"));
    }
});
