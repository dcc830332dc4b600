//! Fuzz target `kamino_open`: damage a crashed pool holding an in-place
//! B+tree (Kamino-Tx, Kamino-Tx-Dynamic or undo) and open it: recovery
//! must refuse it with a typed error or hand back a tree that reads,
//! writes and checks, and never panic.
//!
//! The logic lives in `kamino_open_logic.rs`, which
//! `crates/tembo-kamino/tests/fuzz_smoke.rs` includes too.

#![no_main]

use libfuzzer_sys::fuzz_target;

#[allow(dead_code)]
mod logic {
    include!("kamino_open_logic.rs");
}

fuzz_target!(|data: &[u8]| {
    logic::kamino_open(data);
});
