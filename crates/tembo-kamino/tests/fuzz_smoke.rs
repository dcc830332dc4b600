//! The `kamino_open` fuzz target's logic (fuzz/fuzz_targets/
//! kamino_open_logic.rs) run over seeded damage without cargo-fuzz: random
//! bytes stored into the heap's first 256 KiB of a crashed pool, in every
//! mode. Opening must refuse with a typed error or give a working tree —
//! never panic. Undamaged, the image must recover cleanly.

#[allow(dead_code)]
mod logic {
    include!("../../../fuzz/fuzz_targets/kamino_open_logic.rs");
}

use rand::{Rng, SeedableRng};

#[test]
fn undamaged_crashed_pools_recover_cleanly() {
    for m in 0..3u8 {
        assert_eq!(logic::kamino_open(&[m]), logic::Outcome::Opened { violations: 0 }, "mode {m}");
    }
}

#[test]
fn damaged_pools_never_panic() {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0x6b61_6d69);
    let (mut opened, mut refused) = (0, 0);
    let base = logic::base_image(0).len();
    for case in 0..600 {
        let mut input = vec![(case % 3) as u8];
        for _ in 0..rng.gen_range(1..6) {
            // Mostly the heap's head (log, root, tree); sometimes anywhere.
            let off =
                if rng.gen_bool(0.9) { 4096 + rng.gen_range(0..logic::damage_span()) } else { rng.gen_range(0..base) };
            input.extend_from_slice(&(off as u32).to_le_bytes());
            input.push(rng.gen());
        }
        match std::panic::catch_unwind(|| logic::kamino_open(&input)) {
            Ok(logic::Outcome::Opened { .. }) => opened += 1,
            Ok(logic::Outcome::Refused(_)) => refused += 1,
            Err(_) => panic!("case {case}: a panic on input {input:?}"),
        }
    }
    eprintln!("{opened} opened, {refused} refused");
    assert!(opened > 0);
}
