//! Fuzz target `cdds_open`: damage a pool holding a CDDS tree that was not
//! closed cleanly and open it: the lazy recovery, the checked readers and
//! the writer's repair must refuse it with a typed error or hand back a
//! tree that reads, writes and checks, and never panic or hang.
//!
//! The logic lives in `cdds_open_logic.rs`, which
//! `crates/tembo-cdds/tests/fuzz_smoke.rs` includes too.

#![no_main]

use libfuzzer_sys::fuzz_target;

#[allow(dead_code)]
mod logic {
    include!("cdds_open_logic.rs");
}

fuzz_target!(|data: &[u8]| {
    logic::cdds_open(data);
});
