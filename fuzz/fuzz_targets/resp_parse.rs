//! Fuzz target `resp_parse`: the input is a client's byte stream; the
//! request parser must never panic, never read past what is there, and give
//! the same requests whether the bytes arrive at once or in two pieces.

#![no_main]

use libfuzzer_sys::fuzz_target;

#[allow(dead_code)]
mod logic {
    include!("resp_parse_logic.rs");
}

fuzz_target!(|data: &[u8]| {
    logic::resp_parse(data);
});
