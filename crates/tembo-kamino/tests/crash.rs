//! The crash campaign in the test command: every mode, every workload,
//! every fence of small workloads under every policy (α 1.0 and 0.2 for the
//! dynamic backup), a sampled larger one, crashes during recovery, and the
//! proof that the campaign can fail (ordering `none`).

use tembo_kamino::campaign::{run, CampaignConfig, Workload};
use tembo_kamino::TxMode;
use tembo_pmem::sim::{CrashPoints, CrashPolicy};
use tembo_pmem::OrderingMode;

fn scale() -> usize {
    match std::env::var("TEMBO_TEST_SCALE").as_deref() {
        Ok("full") => 4,
        _ => 1,
    }
}

fn cfg(mode: TxMode, alpha: f64, workload: Workload, ops: usize, ordering: OrderingMode) -> CampaignConfig {
    CampaignConfig {
        mode,
        alpha,
        workload,
        ops,
        ordering,
        points: CrashPoints::Every,
        policies: match ordering {
            OrderingMode::Fast => vec![CrashPolicy::None, CrashPolicy::All, CrashPolicy::RandomLines],
            _ => CrashPolicy::ALL.to_vec(),
        },
        seed: 0x6b61_6d69_6e6f,
        nested_every: 97,
    }
}

fn check(c: &CampaignConfig) {
    let r = run(c);
    eprintln!(
        "{} {:?} α={} {:?}: {} fences, {} states ({} nested), {} violations",
        c.mode.name(),
        c.workload,
        c.alpha,
        c.ordering,
        r.sweep.fences,
        r.states(),
        r.nested_states,
        r.violations()
    );
    assert!(r.sweep.states_checked > 50, "too few crash states: {}", r.sweep.states_checked);
    assert!(r.violations() == 0 && r.sweep.is_ok(), "{:?}", r.sweep.failures);
}

fn every_fence(mode: TxMode, alpha: f64) {
    for w in Workload::ALL {
        let ops = if w == Workload::Objects { 60 } else { 80 } * scale();
        check(&cfg(mode, alpha, w, ops, OrderingMode::Fast));
    }
    check(&cfg(mode, alpha, Workload::TreeUniform, 40 * scale(), OrderingMode::Full));
    check(&cfg(mode, alpha, Workload::Objects, 30 * scale(), OrderingMode::Full));
}

#[test]
fn kamino_every_fence() {
    every_fence(TxMode::Kamino, 1.0);
}

#[test]
fn kamino_dynamic_every_fence_alpha_1() {
    every_fence(TxMode::KaminoDynamic, 1.0);
}

#[test]
fn kamino_dynamic_every_fence_alpha_0_2() {
    every_fence(TxMode::KaminoDynamic, 0.2);
}

#[test]
fn undo_every_fence() {
    every_fence(TxMode::Undo, 1.0);
}

#[test]
fn sampled_larger_workloads() {
    for (mode, alpha) in [(TxMode::Kamino, 1.0), (TxMode::KaminoDynamic, 0.2), (TxMode::Undo, 1.0)] {
        for w in [Workload::Objects, Workload::TreeUniform] {
            let mut c = cfg(mode, alpha, w, 1500 * scale(), OrderingMode::Fast);
            c.points = CrashPoints::Sample(0.01);
            c.nested_every = 0;
            check(&c);
        }
    }
}

#[test]
fn ordering_none_is_caught() {
    for mode in [TxMode::Kamino, TxMode::Undo] {
        let mut c = cfg(mode, 1.0, Workload::Objects, 60, OrderingMode::None);
        c.policies = vec![CrashPolicy::None];
        c.nested_every = 0;
        let r = run(&c);
        assert!(r.violations() > 0, "{}: ordering none found no violation in {} states", mode.name(), r.states());
    }
}
