//! The `restore_payload` fuzz target's logic, run by the ordinary test
//! suite over DUMP payloads written by redis-server 7.0.15 (every small
//! encoding, LZF-compressed ones too, and a stream with a consumer group)
//! and hand-made legacy ones (ziplists,
//! quicklist v1), and thousands of random mutations of them, so the
//! target's properties hold without cargo-fuzz.

use proptest::prelude::*;
use tembo_server::rdb::seal;

mod mutate;

mod logic {
    include!("../../../fuzz/fuzz_targets/restore_payload_logic.rs");
}

/// DUMP payloads from redis-server 7.0.15 (`DUMP key`, hex).
const REDIS_DUMPS: &[&str] = &[
    // a hash with a 66-byte value (hashtable)
    "0403026631027631026632c13930026633c3094042017878e035000178780a0045575117efa9af85",
    // a list of 1, -200, 70000, 10 x, 70 y (quicklist of one LZF-compressed listpack)
    "120102c3214066116600000005000101df3802f2701101048a78e00000030be04679e03c000148ff0a000ef5b0b3706cf53e",
    // 12345 (int)
    "00c139300a009d94ea2793fc08b9",
    // "abc" x 40 (raw, LZF-compressed)
    "00c30b40780361626361e069020162630a00c494a1702ae23e06",
    // "hello" (embstr)
    "000568656c6c6f0a006372df766534200a",
    // 1, -5, 300, 70000, -2^40 (intset, LZF-compressed)
    "0bc325300408000000052003600003fffffffb20034000000160100200002ca00801701140080100000a003483420f0a27dea0",
    // a, b, c (hashtable set)
    "02030163016201610a005ea67e5623750bab",
    // m1 1.5, m2 -3, m3 1e300 (listpack zset, LZF-compressed)
    "11c32b341d340000000600826d3203dffd02826d310383312e3504826d330397312e30e005000731652b33303018ff0a00033d2e1d2978cad2",
    // a 1, b -7 (listpack hash)
    "10121200000004008161020101816202dff902ff0a00816cdbcaf49f9094",
    // a, 7 (quicklist of one listpack)
    "1201020c0c00000002008161020701ff0a00d058fd7a954ab03b",
    // m 2 (listpack zset)
    "110c0c0000000200816d020201ff0a000484163141536394",
    // a stream: XADD st 1-1 a 1; XADD st 2-0 a 2 b x; XADD st 3-0 a 3;
    // XDEL st 3-0; XGROUP CREATE st g 0; XREADGROUP GROUP g alice COUNT 1
    // STREAMS st >; XGROUP CREATECONSUMER st g bob
    "130110000000000000000100000000000000013d3d000000180002010101010181610200010201000100010101040100\
     010101dfff0202018161020201816202817802080103010201dfff0203010401ff0203000101030003010167010181ff\
     ffffffffffffff0100000000000000010000000000000001719ca533a2010000010205616c696365719ca533a2010000\
     010000000000000001000000000000000103626f62719ca533a2010000000a00484796a582790c04",
];

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

/// Legacy encodings Redis 7 still loads: a ziplist of "ab", 5 as a list, a
/// hash and a zset, and as a quicklist (v1) node.
fn legacy() -> Vec<Vec<u8>> {
    let zl = [17u8, 0, 0, 0, 14, 0, 0, 0, 2, 0, 0, 0x02, b'a', b'b', 4, 0xf6, 0xff];
    let mut out = Vec::new();
    for prefix in [&[10u8][..], &[13], &[12], &[14, 1]] {
        let mut body = prefix.to_vec();
        body.push(zl.len() as u8);
        body.extend_from_slice(&zl);
        out.push(seal(body));
    }
    out
}

fn seeds() -> Vec<Vec<u8>> {
    let mut s: Vec<Vec<u8>> = REDIS_DUMPS.iter().map(|h| hex(h)).collect();
    s.extend(legacy());
    s
}

#[test]
fn every_seed_is_a_payload_that_restores() {
    for (i, seed) in seeds().iter().enumerate() {
        let body = tembo_server::rdb::open(seed).unwrap_or_else(|e| panic!("seed {i}: {e:?}"));
        tembo_server::rdb_value::decode(body).unwrap_or_else(|e| panic!("seed {i}: {e:?}"));
        logic::restore_payload(seed);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4000, ..ProptestConfig::default() })]

    /// What Redis's corrupt-dump fuzzer does to a DUMP (one or two bytes
    /// replaced), plus cuts and insertions.
    #[test]
    fn decoder_properties_hold_on_mutated_dumps(
        seed in 0..REDIS_DUMPS.len() + 4,
        damage in mutate::damage(),
    ) {
        let data = mutate::apply(seeds()[seed].clone(), damage);
        logic::restore_payload(&data);
    }
}
