//! Fuzz target `rdb_file`: the input is an RDB file, as `tembo rdb import`
//! reads it; the reader (`tembo_server::rdb_load::index`) must never panic
//! or allocate what the file does not hold, and what it accepts must
//! restore as the import restores it.

#![no_main]

use libfuzzer_sys::fuzz_target;

#[allow(dead_code)]
mod logic {
    include!("rdb_file_logic.rs");
}

fuzz_target!(|data: &[u8]| {
    logic::rdb_file(data);
});
