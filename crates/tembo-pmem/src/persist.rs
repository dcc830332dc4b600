//! Cache-line flush and fence instructions, chosen at run time.
//!
//! A *flush* writes a cache line back towards the media; a *fence* waits until
//! every earlier flush is done; *persist* is flush + fence. The instruction is
//! the best the CPU offers — CLWB (write back, keep the line cached), else
//! CLFLUSHOPT (write back and evict, weakly ordered), else CLFLUSH (write back
//! and evict, strongly ordered) — detected with CPUID, and can be forced by
//! configuration or by the `TEMBO_FLUSH` environment variable (for benchmarks).
//!
//! CLWB and CLFLUSHOPT are weakly ordered, so an SFENCE completes them;
//! CLFLUSH is ordered only with respect to stores and other CLFLUSHes, so the
//! fence after it is an MFENCE, as in the CDDS thesis §4.1.
//!
//! This module holds the only `unsafe` that touches instructions; what is
//! flushed and when is decided by [`crate::Pool`].

use std::fmt;
use std::str::FromStr;

/// Size of a cache line: the unit of flushing and of failure-atomic tearing.
pub const CACHE_LINE_BYTES: u64 = 64;

/// The cache-line write-back instruction used by `flush`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FlushInstruction {
    /// CLWB: writes the line back and may keep it in the cache.
    Clwb,
    /// CLFLUSHOPT: writes the line back and evicts it; weakly ordered.
    Clflushopt,
    /// CLFLUSH: writes the line back and evicts it; strongly ordered.
    Clflush,
    /// No instruction (non-x86 CPUs): flushing is not available, only fences.
    Unsupported,
}

impl FlushInstruction {
    /// Every instruction, best first.
    pub const ALL: [FlushInstruction; 3] =
        [FlushInstruction::Clwb, FlushInstruction::Clflushopt, FlushInstruction::Clflush];

    /// Lower-case name, as accepted by `TEMBO_FLUSH` and the CLI.
    pub fn name(self) -> &'static str {
        match self {
            FlushInstruction::Clwb => "clwb",
            FlushInstruction::Clflushopt => "clflushopt",
            FlushInstruction::Clflush => "clflush",
            FlushInstruction::Unsupported => "unsupported",
        }
    }

    /// Whether this CPU executes the instruction.
    pub fn is_available(self) -> bool {
        cpu_supports(self)
    }

    /// The best instruction this CPU has.
    pub fn detect() -> FlushInstruction {
        FlushInstruction::ALL.into_iter().find(|i| i.is_available()).unwrap_or(FlushInstruction::Unsupported)
    }

    /// The instruction named by `TEMBO_FLUSH` if it is set and available,
    /// else the best available one.
    ///
    /// # Errors
    /// A `TEMBO_FLUSH` value that names no instruction, or one this CPU lacks.
    pub fn from_env_or_detect() -> Result<FlushInstruction, String> {
        match std::env::var("TEMBO_FLUSH") {
            Ok(v) if !v.is_empty() => {
                let i: FlushInstruction = v.parse()?;
                if i.is_available() {
                    Ok(i)
                } else {
                    Err(format!("TEMBO_FLUSH={v}: this CPU has no {v} instruction"))
                }
            }
            _ => Ok(FlushInstruction::detect()),
        }
    }
}

impl fmt::Display for FlushInstruction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for FlushInstruction {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "clwb" => Ok(FlushInstruction::Clwb),
            "clflushopt" => Ok(FlushInstruction::Clflushopt),
            "clflush" => Ok(FlushInstruction::Clflush),
            other => Err(format!("unknown flush instruction {other:?}: use clwb, clflushopt or clflush")),
        }
    }
}

/// How often a data structure orders its dependent stores (the NVM B-tree
/// ordering study): the pool passes this to the engines, which call
/// [`crate::OrderedWrites`] at their ordering points.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum OrderingMode {
    /// No flushes and no fences at all: volatile, for measurement only.
    None,
    /// Persist once per cache line crossed, fence at commit points (FAST).
    #[default]
    Fast,
    /// Persist after every dependent store.
    Full,
}

impl OrderingMode {
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            OrderingMode::None => "none",
            OrderingMode::Fast => "fast",
            OrderingMode::Full => "full",
        }
    }
}

impl fmt::Display for OrderingMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for OrderingMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "none" => Ok(OrderingMode::None),
            "fast" => Ok(OrderingMode::Fast),
            "full" => Ok(OrderingMode::Full),
            other => Err(format!("unknown ordering mode {other:?}: use none, fast or full")),
        }
    }
}

#[cfg(target_arch = "x86_64")]
fn cpu_supports(i: FlushInstruction) -> bool {
    // CPUID leaf 7 sub-leaf 0, EBX: bit 23 CLFLUSHOPT, bit 24 CLWB.
    // CPUID leaf 1, EDX bit 19: CLFLUSH.
    let leaf1 = std::arch::x86_64::__cpuid(1);
    let max_leaf = std::arch::x86_64::__cpuid(0).eax;
    let leaf7_ebx = if max_leaf >= 7 { std::arch::x86_64::__cpuid_count(7, 0).ebx } else { 0 };
    match i {
        FlushInstruction::Clwb => leaf7_ebx & (1 << 24) != 0,
        FlushInstruction::Clflushopt => leaf7_ebx & (1 << 23) != 0,
        FlushInstruction::Clflush => leaf1.edx & (1 << 19) != 0,
        FlushInstruction::Unsupported => true,
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn cpu_supports(i: FlushInstruction) -> bool {
    matches!(i, FlushInstruction::Unsupported)
}

/// Writes back every cache line overlapping `[addr, addr + len)`.
///
/// Returns the number of lines flushed.
///
/// # Safety
/// The range must lie inside one live mapping of this process (a flush of an
/// unmapped address faults), and `instr` must be available on this CPU.
#[inline]
pub unsafe fn flush_range(instr: FlushInstruction, addr: *const u8, len: usize) -> u64 {
    if len == 0 {
        return 0;
    }
    let line = CACHE_LINE_BYTES as usize;
    let start = (addr as usize) & !(line - 1);
    let end = addr as usize + len;
    let mut p = start;
    let mut lines = 0;
    while p < end {
        // SAFETY: p lies within the caller's mapped range (rounded down to the
        // start of its cache line, which is in the same page) and `instr` is
        // available, as the caller promised.
        unsafe { flush_line(instr, p as *const u8) };
        p += line;
        lines += 1;
    }
    lines
}

/// Writes back the cache line holding `p`.
///
/// # Safety
/// `p` must be mapped and `instr` available on this CPU.
#[inline(always)]
pub unsafe fn flush_line(instr: FlushInstruction, p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the caller guarantees `p` is mapped and the CPU has the
    // instruction; none of these instructions writes registers or the stack.
    unsafe {
        match instr {
            FlushInstruction::Clwb => {
                std::arch::asm!("clwb [{0}]", in(reg) p, options(nostack, preserves_flags))
            }
            FlushInstruction::Clflushopt => {
                std::arch::asm!("clflushopt [{0}]", in(reg) p, options(nostack, preserves_flags))
            }
            FlushInstruction::Clflush => std::arch::x86_64::_mm_clflush(p),
            FlushInstruction::Unsupported => {}
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (instr, p);
    }
}

/// Waits until every earlier flush has completed (SFENCE after CLWB and
/// CLFLUSHOPT, MFENCE after CLFLUSH).
#[inline(always)]
pub fn fence(instr: FlushInstruction) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SFENCE and MFENCE are part of SSE2, which every x86-64 CPU has.
    unsafe {
        match instr {
            FlushInstruction::Clflush => std::arch::x86_64::_mm_mfence(),
            _ => std::arch::x86_64::_mm_sfence(),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = instr;
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for i in FlushInstruction::ALL {
            assert_eq!(i.name().parse::<FlushInstruction>().unwrap(), i);
        }
        for m in [OrderingMode::None, OrderingMode::Fast, OrderingMode::Full] {
            assert_eq!(m.name().parse::<OrderingMode>().unwrap(), m);
        }
        assert!("bogus".parse::<FlushInstruction>().is_err());
    }

    #[test]
    fn flush_range_counts_lines_and_runs_on_this_cpu() {
        let buf = vec![7u8; 4096];
        let instr = FlushInstruction::detect();
        // SAFETY: `buf` is a live allocation and `detect` returns an available instruction.
        let lines = unsafe { flush_range(instr, buf.as_ptr().wrapping_add(60), 10) };
        fence(instr);
        // 60..70 may straddle one boundary depending on the allocation's alignment.
        assert!((1..=2).contains(&lines));
        // SAFETY: as above.
        assert_eq!(unsafe { flush_range(instr, buf.as_ptr(), 0) }, 0);
    }
}
