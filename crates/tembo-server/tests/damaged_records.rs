//! The `damaged_record` fuzz target's logic (see
//! `fuzz/fuzz_targets/damaged_record_logic.rs`), run over seeded damage
//! without cargo-fuzz. A key whose records are damaged (a flipped bit, a
//! word set to an extreme, a record cut short or lengthened) is bad input
//! like any other: every command on it must answer — a value, nil or an
//! error reply — and never panic, loop for ever or allocate without bound.
//!
//! For each type, the key's metadata record, or (every other time) another
//! of its records (an element, a score, a string chunk, a stream node or
//! group, an expiry entry, a deleted collection's reclaim entry, a
//! library), is replaced in the pool itself by a damaged copy (or, one
//! time in four, moved to a damaged key), and a fresh session runs the
//! battery and its background work. `TEMBO_SEED` picks
//! the damage; CI fixes it. Debug builds check arithmetic overflow, so a
//! length or index that overflows shows here as a panic too.

use std::sync::mpsc;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

#[allow(dead_code)]
mod logic {
    include!("../../../fuzz/fuzz_targets/damaged_record_logic.rs");
}

/// Damaged copies tried per type.
const DAMAGES: usize = 60;

/// A damaged copy of `rec`.
fn damage(rec: &[u8], rng: &mut StdRng) -> Vec<u8> {
    if rec.is_empty() {
        return vec![rng.gen()];
    }
    let mut d = rec.to_vec();
    match rng.gen_range(0..5) {
        0 => {
            let bit = rng.gen_range(0..d.len() * 8);
            d[bit / 8] ^= 1 << (bit % 8);
        }
        1 => {
            for _ in 0..rng.gen_range(1..4) {
                let at = rng.gen_range(0..d.len());
                d[at] = rng.gen();
            }
        }
        2 => d.truncate(rng.gen_range(0..d.len())),
        3 => d.extend((0..rng.gen_range(1..24)).map(|_| rng.gen::<u8>())),
        _ => {
            // An 8-byte word at any offset set to an extreme.
            let extremes = [0u64, 1, u64::MAX, u64::MAX - 1, 1 << 63, 1 << 32, u32::MAX as u64];
            let w = extremes[rng.gen_range(0..extremes.len())].to_be_bytes();
            if d.len() >= 8 {
                let at = rng.gen_range(0..=d.len() - 8);
                d[at..at + 8].copy_from_slice(&w);
            }
        }
    }
    d
}

#[test]
fn damaged_records_get_replies_not_panics() {
    let seed = std::env::var("TEMBO_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x6d65_7461u64);
    let mut rng = StdRng::seed_from_u64(seed);
    let mut failures = Vec::new();
    for (t, (name, _)) in logic::setups().into_iter().enumerate() {
        for i in 0..DAMAGES {
            let db = logic::prepared(t);
            let recs = logic::records(&db);
            if name == "garbage" {
                let reclaim = recs.iter().filter(|(k, _)| k.first() == Some(&tembo_server::encoding::GARBAGE));
                assert_eq!(reclaim.count(), 1, "the deleted hash waits for the reclaimer");
            }
            let which = if i % 2 == 0 { 0 } else { rng.gen_range(0..recs.len()) };
            let (key, rec) = &recs[which];
            let damaged = damage(rec, &mut rng);
            if i % 4 == 3 {
                // The damage moves the record: its key is damaged instead.
                let mut moved = damage(key, &mut rng);
                if moved.is_empty() {
                    moved.push(rng.gen()); // the store takes no empty key
                }
                db.delete(key).expect("delete the record");
                db.put(&moved, rec).expect("put the moved record");
            } else {
                db.put(key, &damaged).expect("put the damaged record");
            }
            // A watchdog: a command that loops for ever fails the test.
            let (tx, rx) = mpsc::channel();
            let worker = db.clone();
            std::thread::spawn(move || {
                let _ = tx.send(logic::run_battery(worker));
            });
            match rx.recv_timeout(Duration::from_secs(60)) {
                Ok(None) => {}
                Ok(Some(f)) => failures.push(format!("{name} #{i} (record {key:02x?} = {damaged:02x?}): {f}")),
                Err(mpsc::RecvTimeoutError::Disconnected) => failures
                    .push(format!("{name} #{i} (record {key:02x?} = {damaged:02x?}): the background work panicked")),
                Err(mpsc::RecvTimeoutError::Timeout) => panic!(
                    "{name} #{i}: the battery did not finish in 60 s (record {key:02x?} = {damaged:02x?}, seed {seed})"
                ),
            }
        }
    }
    assert!(
        failures.is_empty(),
        "seed {seed}: {} damaged records made commands panic:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The fuzz entry point itself, over a few inputs of every shape.
#[test]
fn fuzz_entry_takes_any_input() {
    for input in [&b""[..], b"\x00", b"\x03\x00", b"\x03\x00\x03", b"\x09\x05\xff\xff\xff\xff"] {
        assert_eq!(logic::damaged_record(input), None, "{input:?}");
    }
}

/// The decoder's checks must not refuse what commands legitimately leave:
/// an exact trim can leave a stream node with no live entry, and an XADD
/// after XSETID lowered the empty stream's top ID appends to it below its
/// first ID (a node whose first ID is past its last).
#[test]
fn a_stream_node_below_a_lowered_top_id_still_reads() {
    use std::sync::Arc;
    use tembo_server::resp::Reply;
    let db = Arc::new(tembo_store::Db::in_memory(&tembo_store::Options::with_size(16 << 20)).expect("db"));
    let mut s = tembo_server::Session::new(db.clone()).expect("session");
    for cmd in [
        &["XADD", "k", "1-0", "f", "v"][..],
        &["XADD", "k", "2-0", "f", "v"],
        &["XADD", "k", "3-0", "f", "v"],
        &["XDEL", "k", "3-0"],
        &["XTRIM", "k", "MINID", "3-0"],
        &["XSETID", "k", "0-5"],
        &["XADD", "k", "0-6", "f", "v"],
        &["XADD", "k", "0-7", "g", "w"],
        &["XTRIM", "k", "MAXLEN", "5"],
    ] {
        let r = s.call(cmd);
        assert!(!matches!(r, Reply::Error(_)), "{cmd:?}: {r:?}");
    }
    drop(s);
    // As a restarted server reads it.
    let mut s = tembo_server::Session::new(db).expect("session");
    assert_eq!(s.call(&["XLEN", "k"]), Reply::Int(2));
    let r = s.call(&["XINFO", "STREAM", "k", "FULL"]);
    assert!(!matches!(r, Reply::Error(_)), "XINFO STREAM FULL: {r:?}");
    let r = s.call(&["XRANGE", "k", "-", "+"]);
    assert!(matches!(&r, Reply::Array(a) if a.len() == 2), "XRANGE: {r:?}");
}
