//! "MultCallFlushLRU" (CDDS thesis §5.2): write every cache line of an
//! object, flush the whole object (fence, flush each line, fence), move to
//! the next object; stride over the region several times.
//!
//! Objects are visited in address order, so by the time a pass comes back
//! to an object every other object has been touched since (least recently
//! used first): with a region larger than the last-level cache, lines are
//! flushed from wherever the hierarchy has put them, as in a real store.

use std::time::Instant;

use anyhow::{ensure, Result};
use serde::{Deserialize, Serialize};
use tembo_pmem::persist::{fence, flush_range};
use tembo_pmem::{FlushInstruction, CACHE_LINE_BYTES};

use super::{Backing, FlushConfig};
use crate::machine::filesystem_of;
use crate::progress::Progress;
use crate::region::Region;
use crate::summary::median;

const LINE: usize = CACHE_LINE_BYTES as usize;

/// One object size of one sweep.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SweepPoint {
    /// Bytes per object.
    pub object_bytes: u64,
    /// Objects in the region.
    pub objects: u64,
    /// Cache lines flushed per pass.
    pub lines_per_pass: u64,
    /// Seconds of the median pass.
    pub median_pass_secs: f64,
    /// Cache lines flushed per second in the median pass.
    pub lines_per_sec: f64,
    /// Bytes flushed per second in the median pass, in GB/s (10⁹ bytes).
    pub gb_per_sec: f64,
}

/// The sweep over every object size for one instruction.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct InstructionSweep {
    /// `clwb`, `clflushopt` or `clflush`.
    pub instruction: String,
    /// Fence used around each object's flushes (`sfence` or `mfence`).
    pub fence: String,
    /// One point per object size, ascending.
    pub points: Vec<SweepPoint>,
}

/// Object sizes: 64 B, 128 B, … up to the region size.
pub fn object_sizes(region_bytes: usize) -> Vec<usize> {
    std::iter::successors(Some(LINE), |s| s.checked_mul(2)).take_while(|s| *s <= region_bytes).collect()
}

/// Makes the region and sweeps it for each configured instruction. Returns
/// the sweeps and a description of the region's backing.
pub(super) fn run_all(cfg: &FlushConfig, progress: Progress) -> Result<(Vec<InstructionSweep>, String)> {
    ensure!(
        cfg.region_bytes.is_power_of_two() && cfg.region_bytes >= LINE,
        "the region must be a power of two of at least {LINE} bytes, not {}",
        cfg.region_bytes
    );
    ensure!(cfg.passes >= 1, "at least one pass is needed");
    let (region, backing) = match &cfg.backing {
        Backing::Anonymous => (Region::anonymous(cfg.region_bytes)?, "anonymous memory".to_string()),
        Backing::SharedFile(dir) => (
            Region::shared_file(dir, cfg.region_bytes)?,
            format!("shared file mapping in {} ({})", dir.display(), filesystem_of(dir)),
        ),
    };
    let sizes = object_sizes(cfg.region_bytes);
    let bar = progress.bar((sizes.len() * cfg.instructions.len()) as u64, "flush sweep");
    let mut sweeps = Vec::new();
    for &instr in &cfg.instructions {
        ensure!(instr.is_available(), "this CPU has no {instr} instruction");
        bar.set_message(instr.name());
        let mut points = Vec::new();
        for &size in &sizes {
            points.push(measure_point(&region, instr, size, cfg.passes));
            bar.inc(1);
        }
        let fence = if instr == FlushInstruction::Clflush { "mfence" } else { "sfence" };
        sweeps.push(InstructionSweep { instruction: instr.name().into(), fence: fence.into(), points });
    }
    bar.finish_and_clear();
    Ok((sweeps, backing))
}

fn measure_point(region: &Region, instr: FlushInstruction, size: usize, passes: u32) -> SweepPoint {
    let mut secs = Vec::with_capacity(passes as usize);
    let mut lines = 0;
    for p in 0..passes {
        let t = Instant::now();
        lines = pass(region, instr, size, u64::from(p) + 1);
        secs.push(t.elapsed().as_secs_f64());
    }
    let median_secs = median(&mut secs).max(f64::MIN_POSITIVE);
    let lines_per_sec = lines as f64 / median_secs;
    SweepPoint {
        object_bytes: size as u64,
        objects: (region.len() / size) as u64,
        lines_per_pass: lines,
        median_pass_secs: median_secs,
        lines_per_sec,
        gb_per_sec: lines_per_sec * LINE as f64 / 1e9,
    }
}

/// One pass over the region with objects of `size` bytes; returns the lines
/// flushed.
fn pass(region: &Region, instr: FlushInstruction, size: usize, stamp: u64) -> u64 {
    let base = region.as_ptr();
    let mut flushed = 0;
    for o in 0..region.len() / size {
        // SAFETY: o * size + size <= region.len(), so the object lies in the
        // region, which is mapped, writable and owned by the benchmark.
        let obj = unsafe { base.add(o * size) };
        for line in (0..size).step_by(LINE) {
            // SAFETY: the line lies inside the object (line < size) and is
            // 8-byte aligned (the region is page-aligned, size a multiple of 64).
            unsafe { obj.add(line).cast::<u64>().write_volatile(stamp) };
        }
        fence(instr);
        // SAFETY: the object is mapped (above) and `instr` is available
        // (checked in `run_all`).
        flushed += unsafe { flush_range(instr, obj, size) };
        fence(instr);
    }
    flushed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_powers_of_two_up_to_the_region() {
        let s = object_sizes(4096);
        assert_eq!(s, vec![64, 128, 256, 512, 1024, 2048, 4096]);
        assert_eq!(object_sizes(64 << 20).len(), 21);
    }

    #[test]
    fn a_pass_flushes_every_line_once() {
        let r = Region::anonymous(16 << 10).unwrap();
        let instr = FlushInstruction::detect();
        if instr == FlushInstruction::Unsupported {
            return;
        }
        for size in object_sizes(r.len()) {
            assert_eq!(pass(&r, instr, size, 7), (16 << 10) / 64);
        }
        // SAFETY: the region is mapped and at least 8 bytes long.
        assert_eq!(unsafe { r.as_ptr().cast::<u64>().read() }, 7);
    }
}
