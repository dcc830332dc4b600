//! The `kamino_open` fuzz target's logic (fuzz/fuzz_targets/
//! kamino_open_logic.rs) run over seeded damage without cargo-fuzz: random
//! bytes stored into the heap's first 256 KiB of a crashed pool, in every
//! mode. Opening must refuse with a typed error or give a working tree —
//! never panic. Undamaged, the image must recover cleanly.

#[allow(dead_code)]
mod logic {
    include!("../../../fuzz/fuzz_targets/kamino_open_logic.rs");
}

#[test]
fn undamaged_crashed_pools_recover_cleanly() {
    for m in 0..3u8 {
        assert_eq!(logic::kamino_open(&[m]), logic::Outcome::Opened { violations: 0 }, "mode {m}");
    }
}

#[test]
fn damaged_pools_never_panic() {
    let len = logic::base_image(0).len();
    let (opened, refused) = logic::smoke(0x6b61_6d69, 600, 3, len, logic::kamino_open);
    eprintln!("{opened} opened, {refused} refused");
    assert!(opened > 0);
}
