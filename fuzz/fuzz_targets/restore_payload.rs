//! Fuzz target `restore_payload`: the input is a RESTORE payload; its
//! decoder (every RDB encoding Redis 7.0 writes or loads: ziplists,
//! listpacks, intsets, quicklists, LZF strings) must never panic or
//! allocate what the payload does not hold, and what it takes must survive
//! Tembo's DUMP encoding unchanged.

#![no_main]

use libfuzzer_sys::fuzz_target;

#[allow(dead_code)]
mod logic {
    include!("restore_payload_logic.rs");
}

fuzz_target!(|data: &[u8]| {
    logic::restore_payload(data);
});
