//! Crashes on the simulator: a database reopened from the pool a crash
//! leaves (`Db::from_pool` on `Pool::from_image`) holds exactly the batches
//! acknowledged before it, or those plus the one in flight, never part of a
//! batch; its engine record is never lost once creation returned; and
//! recovery leaves a pool that passes `check`.
//!
//! Policies per ordering mode: `fast` persists a shift once per cache line,
//! relying on a line reaching the media whole (x86 writes a line back as
//! one unit, in store order), so it is swept with the whole-line policies;
//! `random-words` tears lines and breaks that assumption by construction
//! (with `fast` it loses committed entries caught mid-shift), so it is
//! swept against `full` ordering, which persists every dependent store.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use rand::SeedableRng;
use tembo_pmem::sim::{sweep, CrashPolicy, SweepConfig};
use tembo_store::{Db, Options, OrderingMode, Pool, WriteBatch, DB_ROOT};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn opts() -> Options {
    // No background GC thread: the sweep replays the workload and needs
    // the same fences every time (the cdds campaign runs GC steps as ops).
    Options { size: 256 << 10, max_size: Some(4 << 20), gc: None, ..Options::default() }
}

fn opts_with(ordering: OrderingMode) -> Options {
    Options { ordering, ..opts() }
}

fn contents(db: &Db) -> Result<Model, String> {
    db.iter().map(|r| r.map_err(|e| e.to_string())).collect()
}

/// Batch `n` of the workload: overwrites, inserts and deletes over 40 keys.
fn batch(n: u64) -> WriteBatch {
    let mut b = WriteBatch::new();
    for j in 0..12u64 {
        let k = format!("k{:02}", (n * 7 + j * 5) % 40);
        if (n + j) % 4 == 0 {
            b.delete(k);
        } else {
            b.put(k, format!("batch {n} op {j}"));
        }
    }
    b
}

fn apply(m: &mut Model, b: &WriteBatch) {
    for op in b.ops() {
        match op {
            tembo_store::BatchOp::Put { key, value } => {
                m.insert(key.clone(), value.clone());
            }
            tembo_store::BatchOp::Delete { key } => {
                m.remove(key);
            }
        }
    }
}

#[test]
fn reopen_after_a_simulated_crash() {
    let pool = Arc::new(Pool::simulated(&opts().pool_options()).unwrap());
    let db = Db::from_pool(Arc::clone(&pool), &opts()).unwrap();
    let mut model = Model::new();
    for n in 0..30 {
        let b = batch(n);
        db.write(&b).unwrap();
        apply(&mut model, &b);
    }
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    for policy in [CrashPolicy::None, CrashPolicy::All, CrashPolicy::RandomLines] {
        let image = pool.simulator().unwrap().crash_image(&pool, policy, &mut rng);
        let crashed = Arc::new(Pool::from_image(&image, &opts().pool_options()).unwrap());
        assert!(crashed.opened_unclean());
        let back = Db::from_pool(crashed, &opts()).unwrap();
        assert!(back.recovery_report().ran);
        assert_eq!(contents(&back).unwrap(), model, "policy {policy}");
        let c = back.check().unwrap();
        assert!(c.is_ok(), "policy {policy}: {:?}", c.violations());
        back.put(b"after", b"crash").unwrap();
        assert_eq!(back.get(b"after").unwrap().as_deref(), Some(&b"crash"[..]));
    }
}

#[test]
fn every_crash_point_is_all_or_nothing_with_fast_ordering() {
    sweep_create_and_batches(OrderingMode::Fast, &[CrashPolicy::None, CrashPolicy::All, CrashPolicy::RandomLines]);
}

#[test]
fn every_crash_point_is_all_or_nothing_with_full_ordering_and_torn_lines() {
    sweep_create_and_batches(OrderingMode::Full, &CrashPolicy::ALL);
}

fn sweep_create_and_batches(ordering: OrderingMode, policies: &[CrashPolicy]) {
    const BATCHES: u64 = 5;
    let opts = move || opts_with(ordering);
    let pool = Arc::new(Pool::simulated(&opts().pool_options()).unwrap());
    // States: models[i] = contents after i acknowledged batches (the first
    // acknowledgement is the creation of the database itself).
    let mut models = vec![Model::new()];
    for n in 0..BATCHES {
        let mut m = models.last().unwrap().clone();
        apply(&mut m, &batch(n));
        models.push(m);
    }
    let seen = Arc::new(Mutex::new(0u64));
    let seen_in_check = Arc::clone(&seen);
    let workload_pool = Arc::clone(&pool);
    let report = sweep(
        &SweepConfig { policies: policies.to_vec(), ..SweepConfig::exhaustive(0x5eed) },
        &pool,
        move |_, acks| {
            let db = Db::from_pool(workload_pool, &opts()).map_err(|e| e.to_string())?;
            acks.ack();
            for n in 0..BATCHES {
                db.write(&batch(n)).map_err(|e| e.to_string())?;
                acks.ack();
            }
            Ok(())
        },
        move |state| {
            *seen_in_check.lock().unwrap() += 1;
            let crashed = Arc::new(Pool::from_image(&state.image, &opts().pool_options()).map_err(|e| e.to_string())?);
            let created = state.acknowledged >= 1;
            if created && crashed.root(DB_ROOT).is_none() {
                return Err("the engine record is gone after creation returned".into());
            }
            let db = Db::from_pool(crashed, &opts()).map_err(|e| e.to_string())?;
            let got = contents(&db)?;
            let done = state.acknowledged.saturating_sub(1) as usize;
            let ok = got == models[done] || (created && done < models.len() - 1 && got == models[done + 1]);
            if !ok {
                return Err(format!("contents match neither {done} nor {} batches: {got:?}", done + 1));
            }
            let c = db.check().map_err(|e| e.to_string())?;
            if !c.is_ok() {
                return Err(format!("check: {:?}", c.violations()));
            }
            Ok(())
        },
    );
    assert!(
        report.is_ok(),
        "{} of {} states failed: {:#?}",
        report.failure_count,
        report.states_checked,
        report.failures
    );
    assert!(report.fences > 0 && *seen.lock().unwrap() == report.states_checked);
    eprintln!("{ordering}: {} fences, {} crash states checked", report.fences, report.states_checked);
}
