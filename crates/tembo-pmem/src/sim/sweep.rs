//! The crash-sweep harness: run a workload once on a simulated pool and, at
//! every selected fence, for every policy, build the crash image and hand it to
//! a checker — which reopens it, recovers, and compares with its model.
//!
//! The workload counts acknowledged operations on an [`AckCounter`]; a crash
//! state carries the count at its fence, so the checker's oracle is exact:
//! the recovered contents must equal the model after `acknowledged`
//! operations, or after `acknowledged + 1` (the one in flight).
//!
//! Every random choice derives from the seed, the fence index and the policy,
//! so one failing state can be rebuilt on its own.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::{CrashPoints, CrashPolicy, FenceEvent};
use crate::Pool;

/// What to sweep.
#[derive(Clone, Debug)]
pub struct SweepConfig {
    /// Which fences are crash points.
    pub points: CrashPoints,
    /// Policies tried at each crash point.
    pub policies: Vec<CrashPolicy>,
    /// Seed of every random choice.
    pub seed: u64,
    /// Also check the state after the workload's last fence.
    pub include_end: bool,
    /// Failure messages kept (all are counted).
    pub max_failures_kept: usize,
}

impl SweepConfig {
    /// Every fence, every policy.
    pub fn exhaustive(seed: u64) -> SweepConfig {
        SweepConfig {
            points: CrashPoints::Every,
            policies: CrashPolicy::ALL.to_vec(),
            seed,
            include_end: true,
            max_failures_kept: 20,
        }
    }

    /// A sample of fences, every policy.
    pub fn sampled(seed: u64, probability: f64) -> SweepConfig {
        SweepConfig { points: CrashPoints::Sample(probability), ..SweepConfig::exhaustive(seed) }
    }
}

/// Counts operations the workload has acknowledged.
#[derive(Clone, Debug, Default)]
pub struct AckCounter(Arc<AtomicU64>);

impl AckCounter {
    /// Records one more acknowledged operation.
    pub fn ack(&self) {
        self.0.fetch_add(1, Ordering::AcqRel);
    }
    /// Operations acknowledged so far.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }
}

/// One crash state handed to the checker.
#[derive(Clone, Debug)]
pub struct CrashState {
    /// The fence crashed at (`None`: after the workload's end).
    pub fence_index: Option<u64>,
    /// The policy that chose the dirty data.
    pub policy: CrashPolicy,
    /// The pool file the crash left.
    pub image: Vec<u8>,
    /// Operations acknowledged before the crash.
    pub acknowledged: u64,
    /// Seed for any random choice the checker makes (derived, reproducible).
    pub seed: u64,
}

/// What a sweep found.
#[derive(Clone, Debug, Default)]
pub struct SweepReport {
    /// Fences the workload executed.
    pub fences: u64,
    /// Crash states built and checked.
    pub states_checked: u64,
    /// Number of states the checker rejected.
    pub failure_count: u64,
    /// The first rejections, with fence, policy and message.
    pub failures: Vec<String>,
}

impl SweepReport {
    /// Whether every state passed.
    pub fn is_ok(&self) -> bool {
        self.failure_count == 0
    }

    fn fail(&mut self, keep: usize, msg: String) {
        self.failure_count += 1;
        if self.failures.len() < keep {
            self.failures.push(msg);
        }
    }
}

fn state_seed(seed: u64, fence: u64, policy: usize) -> u64 {
    seed ^ fence.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (policy as u64).wrapping_mul(0xD1B5_4A32_D192_ED03)
}

fn check_one<C>(check: &mut C, state: &CrashState, report: &mut SweepReport, keep: usize)
where
    C: FnMut(&CrashState) -> Result<(), String>,
{
    report.states_checked += 1;
    let where_ = match state.fence_index {
        Some(f) => format!("fence {f}"),
        None => "end".to_string(),
    };
    match catch_unwind(AssertUnwindSafe(|| check(state))) {
        Ok(Ok(())) => {}
        Ok(Err(msg)) => report.fail(
            keep,
            format!("{where_}, policy {}, {} acked, seed {:#x}: {msg}", state.policy, state.acknowledged, state.seed),
        ),
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            report.fail(keep, format!("{where_}, policy {}: checker panicked: {msg}", state.policy));
        }
    }
}

/// Runs `workload` on `pool` (which must be simulated) and checks the crash
/// states at the selected fences with `check`.
///
/// The checker runs inside the fence, while the workload is paused; it gets
/// an owned image and must not touch `pool`.
pub fn sweep<W, C>(cfg: &SweepConfig, pool: &Pool, workload: W, check: C) -> SweepReport
where
    W: FnOnce(&Pool, &AckCounter) -> Result<(), String>,
    C: FnMut(&CrashState) -> Result<(), String> + Send + 'static,
{
    let Some(sim) = pool.simulator() else {
        return SweepReport {
            failure_count: 1,
            failures: vec!["sweep needs a simulated pool (Pool::simulated or Pool::from_image)".into()],
            ..SweepReport::default()
        };
    };
    let acks = AckCounter::default();
    let check = Arc::new(Mutex::new(check));
    let report = Arc::new(Mutex::new(SweepReport::default()));
    let first_fence = sim.fence_count();
    {
        let (acks, check, report, cfg) = (acks.clone(), check.clone(), report.clone(), cfg.clone());
        let mut pick = ChaCha8Rng::seed_from_u64(cfg.seed);
        sim.set_fence_hook(Some(Box::new(move |ev: &FenceEvent<'_>| {
            if !cfg.points.selects(ev.fence_index, &mut pick) {
                return;
            }
            let mut check = check.lock();
            let mut report = report.lock();
            for (i, policy) in cfg.policies.iter().enumerate() {
                let seed = state_seed(cfg.seed, ev.fence_index, i);
                let mut rng = ChaCha8Rng::seed_from_u64(seed);
                let state = CrashState {
                    fence_index: Some(ev.fence_index),
                    policy: *policy,
                    image: ev.crash_image(*policy, &mut rng),
                    acknowledged: acks.get(),
                    seed,
                };
                check_one(&mut *check, &state, &mut report, cfg.max_failures_kept);
            }
        })));
    }
    let outcome = catch_unwind(AssertUnwindSafe(|| workload(pool, &acks)));
    sim.set_fence_hook(None);
    let mut report = std::mem::take(&mut *report.lock());
    match outcome {
        Ok(Ok(())) => {}
        Ok(Err(e)) => report.fail(cfg.max_failures_kept, format!("workload failed: {e}")),
        Err(_) => report.fail(cfg.max_failures_kept, "workload panicked".into()),
    }
    if cfg.include_end {
        let mut check = check.lock();
        for (i, policy) in cfg.policies.iter().enumerate() {
            let seed = state_seed(cfg.seed, u64::MAX, i);
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let state = CrashState {
                fence_index: None,
                policy: *policy,
                image: sim.crash_image(pool, *policy, &mut rng),
                acknowledged: acks.get(),
                seed,
            };
            check_one(&mut *check, &state, &mut report, cfg.max_failures_kept);
        }
    }
    report.fences = sim.fence_count() - first_fence;
    report
}
