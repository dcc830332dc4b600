//! `Pool::persist` of one cache line against the raw instruction sequence.
//!
//! Tembo's claim is that the pool's persist primitive costs what the
//! instructions cost: an engine gains nothing by bypassing it. Both variants
//! run in the same process on the same line of the same `emulated` pool (a
//! file on a RAM filesystem, mapped shared), interleaved repetition by
//! repetition so that drift on a shared machine hits both alike:
//!
//! - *pool*: one 8-byte store, then `Pool::persist(off, 64)`;
//! - *raw*: one 8-byte store, then `flush_line` and `fence` with the pool's
//!   own instruction, on the pointer `Pool::raw` returns.
//!
//! Batches of operations are timed (a single persist is too short for the
//! clock); the figure is the median batch's nanoseconds per operation.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{ensure, Context, Result};
use serde::{Deserialize, Serialize};
use tembo_pmem::persist::{fence, flush_line};
use tembo_pmem::{FlushInstruction, ModeRequest, Pool, PoolOptions, CACHE_LINE_BYTES};

use super::FlushConfig;
use crate::machine::filesystem_of;
use crate::progress::Progress;
use crate::region::temp_name;
use crate::summary::median;

/// One repetition of both variants.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct PersistRepetition {
    /// Median ns per store + `Pool::persist`.
    pub pool_ns: f64,
    /// Median ns per store + flush + fence.
    pub raw_ns: f64,
    /// `pool_ns / raw_ns`.
    pub ratio: f64,
}

/// The comparison's result.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct PersistComparison {
    /// Directory of the pool file.
    pub dir: PathBuf,
    /// Its filesystem.
    pub filesystem: String,
    /// The pool's mode (`emulated`).
    pub mode: String,
    /// The flush instruction both variants use.
    pub instruction: String,
    /// Repetitions (each runs both variants).
    pub repetitions: u32,
    /// Timed batches per variant per repetition.
    pub batches: u32,
    /// Operations per batch.
    pub batch_ops: u32,
    /// Median ns per store + `Pool::persist` over all batches.
    pub pool_ns: f64,
    /// Median ns per store + flush + fence over all batches.
    pub raw_ns: f64,
    /// Median over repetitions of `pool_ns / raw_ns`.
    pub ratio: f64,
    /// Each repetition.
    pub per_repetition: Vec<PersistRepetition>,
}

/// Removes the pool file when the comparison ends, however it ends.
struct RemoveOnDrop(PathBuf);
impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Runs the comparison on a new emulated pool in `cfg.pool_dir`.
///
/// # Errors
/// The pool cannot be created (e.g. the directory does not exist), or the
/// CPU has no flush instruction.
pub fn measure(cfg: &FlushConfig, progress: Progress) -> Result<PersistComparison> {
    ensure!(cfg.persist_repetitions >= 1 && cfg.persist_batches >= 1 && cfg.persist_batch_ops >= 1);
    let path = cfg.pool_dir.join(format!("{}.pool", temp_name("tembo-persist-bench")));
    let opts = PoolOptions { size: 256 << 10, mode: ModeRequest::Emulated, ..PoolOptions::default() };
    let pool = Pool::create(&path, &opts)
        .with_context(|| format!("creating an emulated pool at {} for the persist comparison", path.display()))?;
    let _remove = RemoveOnDrop(path.clone());
    let instr = pool.flush_instruction();
    ensure!(instr != FlushInstruction::Unsupported, "this CPU has no cache-line flush instruction");
    let block = pool.alloc(2 * CACHE_LINE_BYTES)?;
    let off = block.next_multiple_of(CACHE_LINE_BYTES);
    let line = pool.raw(off, CACHE_LINE_BYTES)?.as_ptr();

    let bar = progress.bar(u64::from(cfg.persist_repetitions), "persist vs raw");
    let (mut all_pool, mut all_raw, mut reps) = (Vec::new(), Vec::new(), Vec::new());
    let before = pool.write_stats();
    for r in 0..cfg.persist_repetitions {
        let mut pool_batches = Vec::new();
        let mut raw_batches = Vec::new();
        for variant in if r % 2 == 0 { [0, 1] } else { [1, 0] } {
            for _ in 0..cfg.persist_batches {
                let t = Instant::now();
                if variant == 0 {
                    for i in 0..cfg.persist_batch_ops {
                        // SAFETY: `line` points to 64 mapped bytes of the pool
                        // (checked by `raw`), 8-byte aligned, which only this
                        // loop writes while `pool` lives.
                        unsafe { line.cast::<u64>().write_volatile(u64::from(i)) };
                        pool.persist(off, CACHE_LINE_BYTES);
                    }
                } else {
                    for i in 0..cfg.persist_batch_ops {
                        // SAFETY: as above.
                        unsafe { line.cast::<u64>().write_volatile(u64::from(i)) };
                        // SAFETY: `line` is mapped and `instr` is the pool's
                        // instruction, which it checked is available.
                        unsafe { flush_line(instr, line) };
                        fence(instr);
                    }
                }
                let ns = t.elapsed().as_nanos() as f64 / f64::from(cfg.persist_batch_ops);
                if variant == 0 { &mut pool_batches } else { &mut raw_batches }.push(ns);
            }
        }
        all_pool.extend_from_slice(&pool_batches);
        all_raw.extend_from_slice(&raw_batches);
        let pool_ns = median(&mut pool_batches);
        let raw_ns = median(&mut raw_batches);
        reps.push(PersistRepetition { pool_ns, raw_ns, ratio: pool_ns / raw_ns });
        bar.inc(1);
    }
    bar.finish_and_clear();
    let persisted = pool.write_stats().since(&before);
    let expected = u64::from(cfg.persist_repetitions) * u64::from(cfg.persist_batches * cfg.persist_batch_ops);
    ensure!(
        persisted.flush_count == expected && persisted.fence_count == expected,
        "the pool flushed {} lines and fenced {} times, {expected} of each expected",
        persisted.flush_count,
        persisted.fence_count
    );
    let mut ratios: Vec<f64> = reps.iter().map(|r| r.ratio).collect();
    Ok(PersistComparison {
        dir: cfg.pool_dir.clone(),
        filesystem: filesystem_of(&cfg.pool_dir),
        mode: pool.mode().name().into(),
        instruction: instr.name().into(),
        repetitions: cfg.persist_repetitions,
        batches: cfg.persist_batches,
        batch_ops: cfg.persist_batch_ops,
        pool_ns: median(&mut all_pool),
        raw_ns: median(&mut all_raw),
        ratio: median(&mut ratios),
        per_repetition: reps,
    })
}
