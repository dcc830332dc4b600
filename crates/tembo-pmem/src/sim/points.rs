//! Which fences of a workload become crash points.

use rand::Rng;

/// The crash points of a sweep. Deterministic for a given seed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum CrashPoints {
    /// Every fence.
    Every,
    /// Every `n`-th fence (0, n, 2n, …).
    EveryNth(u64),
    /// Each fence independently with this probability.
    Sample(f64),
}

impl CrashPoints {
    /// Whether fence `index` is a crash point; draws from `rng` for samples.
    pub fn selects(&self, index: u64, rng: &mut impl Rng) -> bool {
        match *self {
            CrashPoints::Every => true,
            CrashPoints::EveryNth(n) => index % n.max(1) == 0,
            CrashPoints::Sample(p) => rng.gen_bool(p.clamp(0.0, 1.0)),
        }
    }
}
