//! Fuzz target `pool_open`: the input is a pool image; opening it must
//! return a typed error or a pool that `check()`, the roots and a few
//! allocations can be run on, and never panic.
//!
//! The logic lives in `pool_open_logic.rs`, which
//! `crates/tembo-pmem/tests/fuzz_smoke.rs` includes too, so the test suite
//! runs the very same code over the seeds without cargo-fuzz.

#![no_main]

use libfuzzer_sys::fuzz_target;

#[allow(dead_code)]
mod logic {
    include!("pool_open_logic.rs");
}

fuzz_target!(|data: &[u8]| {
    logic::pool_open(data);
});
