//! The `resp_reply` fuzz target's checks (fuzz/fuzz_targets/resp_reply_logic.rs)
//! on every reply shape the servers send, their damaged copies and random
//! bytes, so they run in the test command without a fuzzer.

#[allow(dead_code)]
mod logic {
    include!("../../../fuzz/fuzz_targets/resp_reply_logic.rs");
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
