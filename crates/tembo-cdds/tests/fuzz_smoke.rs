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

/// Seeds whose damage leaves a leaf's keys out of order inside the range
/// scanned: before the iterator checked each key against the last one, its
/// scans went back (a caller resuming after the last key it got, as SCAN
/// does, looped for ever).
#[test]
fn scans_of_leaves_out_of_order_never_go_back() {
    for seed in [4u64, 5, 8] {
        let (opened, _) = logic::smoke(seed, 400, 2, logic::base_image().len(), logic::cdds_open);
        assert!(opened > 0, "seed {seed}");
    }
}
