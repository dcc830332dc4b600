//! The `cdds_open` fuzz target's logic (fuzz/fuzz_targets/cdds_open_logic.rs)
//! run over seeded damage without cargo-fuzz: random bytes stored into the
//! first 256 KiB of the heap of a pool whose tree was not closed cleanly,
//! used before and after its lazy recovery. Opening must refuse with a
//! typed error or give a working tree — never panic. Undamaged, the image
//! must recover cleanly.

#[allow(dead_code)]
mod logic {
    include!("../../../fuzz/fuzz_targets/cdds_open_logic.rs");
}

use rand::{Rng, SeedableRng};

#[test]
fn undamaged_unclean_pool_recovers_cleanly() {
    for mode in 0..2u8 {
        assert_eq!(logic::cdds_open(&[mode]), logic::Outcome::Opened { violations: 0 }, "mode {mode}");
    }
}

#[test]
fn damaged_pools_never_panic() {
    let seed = std::env::var("TEMBO_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x6364_6473u64);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let (mut opened, mut refused) = (0, 0);
    let base = logic::base_image().len();
    for case in 0..400 {
        let mut input = vec![(case % 2) as u8];
        for _ in 0..rng.gen_range(1..6) {
            // Mostly the heap's head (metadata, nodes, records); sometimes anywhere.
            let off =
                if rng.gen_bool(0.9) { 4096 + rng.gen_range(0..logic::damage_span()) } else { rng.gen_range(0..base) };
            input.extend_from_slice(&(off as u32).to_le_bytes());
            input.push(rng.gen());
        }
        match std::panic::catch_unwind(|| logic::cdds_open(&input)) {
            Ok(logic::Outcome::Opened { .. }) => opened += 1,
            Ok(logic::Outcome::Refused(_)) => refused += 1,
            Err(_) => panic!("case {case} (TEMBO_SEED={seed}): a panic on input {input:?}"),
        }
    }
    eprintln!("{opened} opened, {refused} refused");
    assert!(opened > 0);
}
