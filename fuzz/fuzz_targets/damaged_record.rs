//! Fuzz target `damaged_record`: the input replaces one record of a
//! keyspace holding a key of some type (see `damaged_record_logic.rs`);
//! every command of a battery run on it must answer without a panic.

#![no_main]

use libfuzzer_sys::fuzz_target;

#[allow(dead_code)]
mod logic {
    include!("damaged_record_logic.rs");
}

fuzz_target!(|data: &[u8]| {
    if let Some(failure) = logic::damaged_record(data) {
        panic!("{failure}");
    }
});
