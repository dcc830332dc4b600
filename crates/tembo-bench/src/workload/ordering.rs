//! The NVM B-tree ordering study (`nvm-btree-ordering` §5.2): how the cost
//! of an insert depends on the order of the keys (Figure 3) and how the
//! average operation latency grows with the share of writes (Figure 4),
//! for each ordering mode of the CDDS tree (`none`, `fast`, `full`) and any
//! other target.
//!
//! Keys are 8-byte big-endian integers and values 8 bytes, as in the
//! study's integer B-tree, so the figures show the tree's shifting and
//! flushing rather than copying of large records.
//! - [`InsertOrder`]: insert `n` keys in one [`KeyOrder`] into an empty
//!   target (one phase, `insert ORDER`).
//! - [`WriteRatio`]: load `n` keys (uniform), then `ops` operations of
//!   which `ratio` percent insert new keys (uniform monotonicity) and the
//!   rest search loaded keys chosen by YCSB's scrambled zipfian; phase
//!   `mix RATIO%`, with per-kind latency for insert and search.

use std::fmt;
use std::str::FromStr;

use anyhow::{ensure, Result};
use serde_json::json;

use super::ycsb::{Rng, ScrambledZipfian};
use super::{PhaseMeter, PhaseSample, Workload};
use crate::targets::Target;

/// The order keys are inserted in ("monotonicity" in the study).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyOrder {
    /// Increasing keys (monotonicity 1): no shifting.
    Monotonic,
    /// A random permutation (monotonicity ≈ 0.5).
    Uniform,
    /// Decreasing keys (monotonicity 0): every insert shifts the whole leaf.
    Reverse,
    /// YCSB's scrambled zipfian over a key space of 10 n (repeats update).
    Zipfian,
}

impl KeyOrder {
    /// All orders, in the study's figure order.
    pub const ALL: [KeyOrder; 4] = [KeyOrder::Monotonic, KeyOrder::Uniform, KeyOrder::Reverse, KeyOrder::Zipfian];

    fn name(self) -> &'static str {
        match self {
            KeyOrder::Monotonic => "monotonic",
            KeyOrder::Uniform => "uniform",
            KeyOrder::Reverse => "reverse",
            KeyOrder::Zipfian => "zipfian",
        }
    }

    fn keys(self, n: usize, seed: u64) -> Vec<u64> {
        let mut rng = Rng::seed_from_u64(seed);
        match self {
            KeyOrder::Monotonic => (0..n as u64).collect(),
            KeyOrder::Reverse => (0..n as u64).rev().collect(),
            KeyOrder::Uniform => rng.permutation(n).into_iter().map(|i| i as u64).collect(),
            KeyOrder::Zipfian => {
                let mut z = ScrambledZipfian::new(0, (n as u64 * 10).max(1) - 1);
                (0..n).map(|_| z.sample(&mut rng)).collect()
            }
        }
    }
}

impl fmt::Display for KeyOrder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for KeyOrder {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        KeyOrder::ALL
            .into_iter()
            .find(|o| o.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| format!("unknown key order `{s}`; known: monotonic, uniform, reverse, zipfian"))
    }
}

fn key(k: u64) -> [u8; 8] {
    k.to_be_bytes()
}

/// Figure 3: `n` inserts in one key order.
#[derive(Clone, Debug)]
pub struct InsertOrder {
    /// Key order.
    pub order: KeyOrder,
    /// Inserts.
    pub n: usize,
    /// Seed.
    pub seed: u64,
}

impl Workload for InsertOrder {
    fn name(&self) -> String {
        format!("insert {}", self.order)
    }

    fn params(&self) -> serde_json::Value {
        json!({"order": self.order.name(), "inserts": self.n, "key_bytes": 8, "value_bytes": 8, "seed": self.seed})
    }

    fn size_hint(&self) -> u64 {
        self.n as u64 * 48
    }

    fn scans(&self) -> bool {
        false
    }

    fn run(&self, t: &mut dyn Target, _run: usize) -> Result<Vec<PhaseSample>> {
        let keys = self.order.keys(self.n, self.seed);
        let mut m = PhaseMeter::start(&self.name(), t);
        for &k in &keys {
            t.put(&key(k), &key(k))?;
            m.done("insert");
        }
        Ok(vec![m.finish(t)])
    }
}

/// Figure 4: latency against the share of inserts.
#[derive(Clone, Debug)]
pub struct WriteRatio {
    /// Percentage of inserts (0–100).
    pub ratio: u32,
    /// Keys loaded first.
    pub n: usize,
    /// Operations measured.
    pub ops: usize,
    /// Seed.
    pub seed: u64,
}

impl Workload for WriteRatio {
    fn name(&self) -> String {
        format!("mix {}%", self.ratio)
    }

    fn params(&self) -> serde_json::Value {
        json!({"write_percent": self.ratio, "loaded": self.n, "ops": self.ops, "key_bytes": 8, "value_bytes": 8, "seed": self.seed})
    }

    fn size_hint(&self) -> u64 {
        (self.n + self.ops) as u64 * 48
    }

    fn scans(&self) -> bool {
        false
    }

    fn run(&self, t: &mut dyn Target, _run: usize) -> Result<Vec<PhaseSample>> {
        // Loaded keys are multiples of `stride`; the j-th new key lies in
        // the gap after loaded key j mod n, so inserts never collide with
        // loaded keys or each other and land uniformly among them.
        let n = self.n.max(1) as u64;
        let stride = self.ops as u64 / n + 2;
        let mut rng = Rng::seed_from_u64(self.seed);
        for i in rng.permutation(self.n) {
            let k = i as u64 * stride;
            t.put(&key(k), &key(k))?;
        }
        let mut zipf = ScrambledZipfian::new(0, n - 1);
        let fresh = rng.permutation(self.ops);
        let plan: Vec<(bool, u64)> = fresh
            .iter()
            .map(|&j| {
                let j = j as u64;
                if rng.below(100) < u64::from(self.ratio) {
                    (true, (j % n) * stride + 1 + j / n)
                } else {
                    (false, zipf.sample(&mut rng) * stride)
                }
            })
            .collect();
        let mut buf = Vec::new();
        let mut missing = 0usize;
        let mut m = PhaseMeter::start(&self.name(), t);
        for &(insert, k) in &plan {
            if insert {
                t.put(&key(k), &key(k))?;
                m.done("insert");
            } else {
                missing += usize::from(!t.get(&key(k), &mut buf)?);
                m.done("search");
            }
        }
        let phase = m.finish(t);
        ensure!(missing == 0, "{missing} searches did not find a loaded key");
        Ok(vec![phase])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_orders_are_what_they_say() {
        assert_eq!(KeyOrder::Monotonic.keys(4, 1), vec![0, 1, 2, 3]);
        assert_eq!(KeyOrder::Reverse.keys(4, 1), vec![3, 2, 1, 0]);
        let mut u = KeyOrder::Uniform.keys(100, 1);
        assert_ne!(u, (0..100).collect::<Vec<_>>());
        u.sort_unstable();
        assert_eq!(u, (0..100).collect::<Vec<_>>());
        assert!(KeyOrder::Zipfian.keys(100, 1).iter().all(|&k| k < 1000));
        assert_eq!("Reverse".parse::<KeyOrder>(), Ok(KeyOrder::Reverse));
        assert!("sideways".parse::<KeyOrder>().is_err());
    }
}
