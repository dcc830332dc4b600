//! YCSB core workloads A–F as a bench workload: the load phase inserts
//! `record_count` records (YCSB's key names and order), the run phase
//! replays `operation_count` operations of the workload's mix and key
//! distribution (see [`super::ycsb`]). Operations and values are generated
//! before each phase so the clock measures the target alone. Every read of
//! a key that must exist is checked, so a target that loses records fails.

use anyhow::{ensure, Result};
use serde_json::json;

use super::ycsb::{fill_value, load_keys, Workload as Core, YcsbOp, YcsbSpec};
use super::{PhaseMeter, PhaseSample, Workload};
use crate::targets::Target;

/// Values rotated through by writes (distinct contents, generated once).
const VALUE_POOL: u64 = 256;

/// One YCSB workload at a given size.
#[derive(Clone, Debug)]
pub struct Ycsb {
    /// What to generate.
    pub spec: YcsbSpec,
}

impl Ycsb {
    /// Workload `w` with `records` records and `ops` operations of `value_bytes`-byte values.
    pub fn new(w: Core, records: u64, ops: u64, value_bytes: usize, seed: u64) -> Ycsb {
        let mut spec = YcsbSpec::new(w, records, ops, seed);
        spec.value_bytes = value_bytes;
        Ycsb { spec }
    }

    fn values(&self) -> Vec<Vec<u8>> {
        (0..VALUE_POOL)
            .map(|i| {
                let mut v = vec![0u8; self.spec.value_bytes];
                fill_value(self.spec.seed, i, &mut v);
                v
            })
            .collect()
    }
}

impl Workload for Ycsb {
    fn name(&self) -> String {
        format!("ycsb-{}", self.spec.workload.to_string().to_ascii_lowercase())
    }

    fn params(&self) -> serde_json::Value {
        json!({
            "workload": self.spec.workload.to_string(),
            "description": self.spec.workload.description(),
            "record_count": self.spec.record_count,
            "operation_count": self.spec.operation_count,
            "value_bytes": self.spec.value_bytes,
            "seed": self.spec.seed,
        })
    }

    fn size_hint(&self) -> u64 {
        let inserts = (self.spec.operation_count as f64 * self.spec.workload.mix().insert) as u64;
        (self.spec.record_count + inserts) * (self.spec.value_bytes as u64 + 96)
    }

    fn scans(&self) -> bool {
        self.spec.workload.mix().scan > 0.0
    }

    fn run(&self, t: &mut dyn Target, _run: usize) -> Result<Vec<PhaseSample>> {
        let values = self.values();
        let value = |i: usize| &values[i % values.len()];
        let keys: Vec<Vec<u8>> = load_keys(&self.spec).collect();
        let mut m = PhaseMeter::start("load", t);
        for (i, k) in keys.iter().enumerate() {
            t.put(k, value(i))?;
            m.done("INSERT");
        }
        let load = m.finish(t);
        drop(keys);

        let ops: Vec<YcsbOp> = self.spec.run()?.collect();
        let mut buf = Vec::with_capacity(self.spec.value_bytes);
        let (mut missing, mut short_scans) = (0usize, 0usize);
        let mut m = PhaseMeter::start("run", t);
        for (i, op) in ops.iter().enumerate() {
            match op {
                YcsbOp::Read(k) => {
                    missing += usize::from(!t.get(k, &mut buf)?);
                    m.done("READ");
                }
                YcsbOp::Update(k) => {
                    t.put(k, value(i))?;
                    m.done("UPDATE");
                }
                YcsbOp::Insert(k) => {
                    t.put(k, value(i))?;
                    m.done("INSERT");
                }
                YcsbOp::Scan(k, n) => {
                    // A scan from an existing key reads at least that key.
                    short_scans += usize::from(t.scan(k, *n)? == 0);
                    m.done("SCAN");
                }
                YcsbOp::ReadModifyWrite(k) => {
                    missing += usize::from(!t.get(k, &mut buf)?);
                    t.put(k, value(i))?;
                    m.done("READ-MODIFY-WRITE");
                }
            }
        }
        let run = m.finish(t);
        ensure!(missing == 0, "{missing} reads did not find a record that was loaded or inserted");
        ensure!(short_scans == 0, "{short_scans} scans from an existing key returned nothing");
        Ok(vec![load, run])
    }
}
