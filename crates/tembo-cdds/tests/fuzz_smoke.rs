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

#[test]
fn undamaged_unclean_pool_recovers_cleanly() {
    for mode in 0..2u8 {
        assert_eq!(logic::cdds_open(&[mode]), logic::Outcome::Opened { violations: 0 }, "mode {mode}");
    }
}

#[test]
fn damaged_pools_never_panic() {
    let seed = std::env::var("TEMBO_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x6364_6473u64);
    let (opened, refused) = logic::smoke(seed, 400, 2, logic::base_image().len(), logic::cdds_open);
    eprintln!("{opened} opened, {refused} refused (seed {seed})");
    assert!(opened > 0);
}
