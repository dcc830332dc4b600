//! The `resp_parse` fuzz target's logic, run by the ordinary test suite over
//! hand-written seeds and a few thousand random mutations of them, so the
//! target's properties hold without cargo-fuzz.

use proptest::prelude::*;

mod logic {
    include!("../../../fuzz/fuzz_targets/resp_parse_logic.rs");
}

const SEEDS: &[&[u8]] = &[
    b"*1\r\n$4\r\nPING\r\n",
    b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n",
    b"PING\r\nSET a \"b c\"\r\nGET 'a'\n",
    b"*0\r\n*-1\r\n\r\n",
    b"*1\r\n$-1\r\n",
    b"*2\r\n$3\r\nGET\r\n:1\r\n",
    b"*1\r\n$3\r\nabcde\r\n",
    b"SET \"\\x41\\n\" x\r\n",
    b"*99999999999999999999\r\n",
    b"*1\r\n$2000000\r\n",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn parser_properties_hold_on_mutated_seeds(
        seed in 0..SEEDS.len(),
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..4),
        cut in any::<usize>(),
        extra in proptest::collection::vec(any::<u8>(), 0..16),
        first in any::<u8>(),
    ) {
        let mut data = vec![first];
        data.extend_from_slice(SEEDS[seed]);
        let n = data.len();
        for (at, byte) in flips {
            data[at % n] = byte;
        }
        data.truncate(1 + cut % n);
        data.extend_from_slice(&extra);
        logic::resp_parse(&data);
        logic::resp_parse(&data[1..]);
    }

    #[test]
    fn parser_properties_hold_on_random_bytes(data in proptest::collection::vec(any::<u8>(), 0..256)) {
        logic::resp_parse(&data);
    }
}

/// Found by the random-bytes property in CI: an unauthenticated client's
/// inline line with eleven tab-separated args parses (Redis limits inline
/// requests by length only), and its re-encoding is a multibulk that only a
/// logged-in client may send.
#[test]
fn inline_line_with_more_args_than_an_unauthenticated_multibulk_may_hold() {
    let data = [128, 12, 14, 9, 0, 9, 0, 12, 35, 9, 14, 9, 0, 12, 14, 9, 14, 9, 14, 9, 40, 10];
    logic::resp_parse(&data);
}
