//! Fuzz target `resp_reply`: the input is a server's byte stream; the
//! bench's RESP client (`tembo_bench::targets::resp`) must never panic,
//! consume something for every reply it returns, read the same replies
//! through any buffer size, and read back what the server's encoder writes.

#![no_main]

use libfuzzer_sys::fuzz_target;

#[allow(dead_code)]
mod logic {
    include!("resp_reply_logic.rs");
}

fuzz_target!(|data: &[u8]| {
    logic::resp_reply(data);
});
