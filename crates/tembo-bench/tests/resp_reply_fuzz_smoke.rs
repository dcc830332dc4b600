//! The `resp_reply` fuzz target's checks (fuzz/fuzz_targets/resp_reply_logic.rs)
//! on every reply shape the servers send, their damaged copies and random
//! bytes, so they run in the test command without a fuzzer.

#[allow(dead_code)]
mod logic {
    include!("../../../fuzz/fuzz_targets/resp_reply_logic.rs");
}

use proptest::prelude::*;
use tembo_bench::targets::resp::{read_reply, Reply};

fn reply_strategy() -> impl Strategy<Value = Reply> {
    let leaf = prop_oneof![
        "[a-zA-Z ]{0,12}".prop_map(Reply::Status),
        "ERR [a-z ]{0,12}".prop_map(Reply::Error),
        any::<i64>().prop_map(Reply::Int),
        proptest::option::of(proptest::collection::vec(any::<u8>(), 0..300)).prop_map(Reply::Bulk),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        proptest::option::of(proptest::collection::vec(inner, 0..6)).prop_map(Reply::Array)
    })
}

proptest! {
    /// What the server's encoder writes, the client reads back, and every
    /// proper prefix of it is an error, not a reply or a panic.
    #[test]
    fn reads_what_the_server_writes(r in reply_strategy()) {
        let mut bytes = Vec::new();
        logic::to_server(&r).encode(2, &mut bytes);
        prop_assert_eq!(read_reply(&mut &bytes[..], 0).unwrap(), r);
        for cut in [0, bytes.len() / 2, bytes.len() - 1] {
            prop_assert!(read_reply(&mut &bytes[..cut], 0).is_err());
        }
        logic::resp_reply(&bytes);
    }
}

const SEEDS: &[&[u8]] = &[
    b"+OK\r\n",
    b"-ERR wrong number of arguments for 'get' command\r\n",
    b":12345\r\n:-1\r\n",
    b"$5\r\nhello\r\n$-1\r\n$0\r\n\r\n",
    b"*2\r\n$1\r\na\r\n*1\r\n:1\r\n*-1\r\n*0\r\n",
    b"*3\r\n$3\r\nk\r\n\r\n$-1\r\n+x\r\n",
];

#[test]
fn seeds_and_their_damaged_copies() {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for seed in SEEDS {
        logic::resp_reply(seed);
        for _ in 0..2000 {
            let mut d = seed.to_vec();
            match next() % 3 {
                0 => {
                    let i = (next() as usize) % d.len();
                    d[i] = next() as u8;
                }
                1 => d.truncate((next() as usize) % (d.len() + 1)),
                _ => {
                    let i = (next() as usize) % (d.len() + 1);
                    d.insert(i, [b'\r', b'\n', b'$', b'*', b'-', b'9'][(next() % 6) as usize]);
                }
            }
            logic::resp_reply(&d);
        }
    }
    for _ in 0..2000 {
        let n = (next() % 64) as usize;
        let d: Vec<u8> = (0..n).map(|_| next() as u8).collect();
        logic::resp_reply(&d);
    }
}
