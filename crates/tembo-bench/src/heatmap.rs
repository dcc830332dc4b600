//! The write heat map of the CDDS thesis, chapter 6 (Figures 6.1–6.3):
//! how writes to persistent memory spread over the pool's pages when keys
//! are inserted — CDDS (versioned, copy-on-split) against an in-place
//! B+tree (PMDK libpmemobj's, with its undo log), which concentrates
//! writes on hot pages (the thesis profiled the STX B-tree with Cafegrind).
//!
//! Measured without instrumenting either tree: before each operation the
//! target's whole pool mapping is made read-only; the first store of the
//! operation to each page faults, the fault handler counts the page and
//! makes it writable again, and the store is retried. A page's count is
//! therefore the number of operations that wrote it (at least one store),
//! whatever code wrote it — the tree, its allocator, its log. Stores by the
//! kernel on the process's behalf would not fault; neither tree makes any.
//!
//! The fault handler and `mprotect` are the only `unsafe` here; one
//! tracker may be armed at a time in a process.

use std::path::Path;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicUsize, Ordering};
use std::sync::Mutex;

use anyhow::{bail, ensure, Context, Result};
use serde::{Deserialize, Serialize};

use crate::targets::TargetKind;
use crate::workload::random_keys;

const PAGE: usize = 4096;

static BASE: AtomicUsize = AtomicUsize::new(0);
static LEN: AtomicUsize = AtomicUsize::new(0);
static COUNTS: AtomicPtr<AtomicU32> = AtomicPtr::new(std::ptr::null_mut());
static ARMED: Mutex<()> = Mutex::new(());

extern "C" fn on_fault(sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for a SA_SIGINFO handler.
    let addr = unsafe { (*info).si_addr() } as usize;
    let (base, len) = (BASE.load(Ordering::Acquire), LEN.load(Ordering::Acquire));
    let counts = COUNTS.load(Ordering::Acquire);
    if counts.is_null() || addr < base || addr >= base + len {
        // Not ours: restore the default action and return, so the
        // faulting instruction runs again and the process dies as usual.
        // SAFETY: signal() is async-signal-safe.
        unsafe { libc::signal(sig, libc::SIG_DFL) };
        return;
    }
    let page = (addr - base) / PAGE;
    // SAFETY: `counts` has one counter per page of [base, base + len)
    // while armed (it is only freed after disarming), and `page` is in range.
    unsafe { (*counts.add(page)).fetch_add(1, Ordering::Relaxed) };
    // SAFETY: the page lies in the mapping being tracked; mprotect is
    // async-signal-safe. Making it writable lets the store be retried.
    unsafe { libc::mprotect((base + page * PAGE) as *mut libc::c_void, PAGE, libc::PROT_READ | libc::PROT_WRITE) };
}

/// Counts, per page of one mapping, the operations that wrote it.
struct Tracker {
    base: usize,
    len: usize,
    counts: Box<[AtomicU32]>,
    _armed: std::sync::MutexGuard<'static, ()>,
}

impl Tracker {
    fn arm(base: usize, len: usize) -> Result<Tracker> {
        ensure!(base % PAGE == 0 && len > 0, "the pool mapping is not page aligned");
        let guard = ARMED.lock().unwrap_or_else(|e| e.into_inner());
        let pages = len.div_ceil(PAGE);
        let mut counts: Box<[AtomicU32]> = (0..pages).map(|_| AtomicU32::new(0)).collect();
        BASE.store(base, Ordering::Release);
        LEN.store(pages * PAGE, Ordering::Release);
        COUNTS.store(counts.as_mut_ptr(), Ordering::Release);
        // SAFETY: installs a handler that only touches the statics above
        // and calls async-signal-safe functions.
        let rc = unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_fault as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_NODEFER;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(libc::SIGSEGV, &sa, std::ptr::null_mut())
        };
        let t = Tracker { base, len: pages * PAGE, counts, _armed: guard };
        if rc != 0 {
            bail!("cannot install the fault handler: {}", std::io::Error::last_os_error());
        }
        Ok(t)
    }

    /// Makes the whole mapping read-only: the next store to each page counts.
    fn rearm(&self) -> Result<()> {
        self.protect(libc::PROT_READ)
    }

    fn protect(&self, prot: libc::c_int) -> Result<()> {
        // SAFETY: [base, base + len) is the target's own shared mapping,
        // alive while the target is open (the caller holds it).
        let rc = unsafe { libc::mprotect(self.base as *mut libc::c_void, self.len, prot) };
        ensure!(rc == 0, "mprotect of the pool mapping: {}", std::io::Error::last_os_error());
        Ok(())
    }

    fn finish(self) -> Result<Vec<u32>> {
        self.protect(libc::PROT_READ | libc::PROT_WRITE)?;
        COUNTS.store(std::ptr::null_mut(), Ordering::Release);
        LEN.store(0, Ordering::Release);
        // SAFETY: back to the default action for SIGSEGV.
        unsafe { libc::signal(libc::SIGSEGV, libc::SIG_DFL) };
        Ok(self.counts.iter().map(|c| c.load(Ordering::Relaxed)).collect())
    }
}

impl Drop for Tracker {
    fn drop(&mut self) {
        // Whatever happened, leave the mapping writable and the handler off.
        let _ = self.protect(libc::PROT_READ | libc::PROT_WRITE);
        COUNTS.store(std::ptr::null_mut(), Ordering::Release);
    }
}

/// One target's heat map.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct HeatMap {
    /// Target name.
    pub target: String,
    /// Keys inserted.
    pub keys: usize,
    /// Value bytes.
    pub value_bytes: usize,
    /// Bytes per page.
    pub page_bytes: usize,
    /// Per page of the pool (up to the last page written): operations that wrote it.
    pub writes: Vec<u32>,
    /// Pages written at least once.
    pub pages_written: usize,
    /// The most-written page's count.
    pub max: u32,
    /// Mean count over written pages.
    pub mean: f64,
    /// Share of all page writes that fell on the hottest 1% of written pages.
    pub top1_share: f64,
}

/// Inserts `keys` random keys into a fresh `kind` in `dir` and records the
/// pages each insert writes.
///
/// # Errors
/// Targets without a single mapped pool (only Tembo's and pmemobj have
/// one), open and write errors, a pool that moved (grew) during the run.
pub fn measure(kind: TargetKind, keys: usize, value_bytes: usize, dir: &Path, seed: u64) -> Result<HeatMap> {
    let sub = dir.join(format!("tembo-heatmap-{}-{}", std::process::id(), kind.name()));
    let _ = std::fs::remove_dir_all(&sub);
    std::fs::create_dir_all(&sub).with_context(|| format!("creating {}", sub.display()))?;
    let result = (|| {
        // Room enough that no pool grows (and moves) while it is watched.
        let size_hint = (keys * (value_bytes + 200)) as u64 * 2;
        let mut t = kind.open(&sub, size_hint)?;
        let Some((base, len)) = t.mapped() else {
            bail!("target {kind} keeps no single mapped pool to watch (heat maps: cdds, cdds-full, pmemobj)");
        };
        let ks = random_keys(keys, 25, seed);
        let value = vec![b'v'; value_bytes];
        let tracker = Tracker::arm(base, len)?;
        for k in &ks {
            tracker.rearm()?;
            t.put(k, &value)?;
        }
        let counts = tracker.finish()?;
        ensure!(t.mapped() == Some((base, len)), "{kind}'s pool moved while it was watched; use fewer keys");
        Ok(counts)
    })();
    let _ = std::fs::remove_dir_all(&sub);
    let mut writes = result?;
    let last = writes.iter().rposition(|&c| c > 0).map_or(0, |i| i + 1);
    writes.truncate(last);
    let mut written: Vec<u32> = writes.iter().copied().filter(|&c| c > 0).collect();
    written.sort_unstable_by(|a, b| b.cmp(a));
    let total: u64 = written.iter().map(|&c| u64::from(c)).sum();
    let top = written.len().div_ceil(100);
    let top_sum: u64 = written.iter().take(top).map(|&c| u64::from(c)).sum();
    Ok(HeatMap {
        target: kind.name().into(),
        keys,
        value_bytes,
        page_bytes: PAGE,
        pages_written: written.len(),
        max: written.first().copied().unwrap_or(0),
        mean: if written.is_empty() { 0.0 } else { total as f64 / written.len() as f64 },
        top1_share: if total == 0 { 0.0 } else { top_sum as f64 / total as f64 },
        writes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cdds_inserts_write_pages_and_are_counted() {
        let dir = std::env::temp_dir();
        let h = measure(TargetKind::Cdds, 500, 64, &dir, 3).unwrap();
        assert!(h.pages_written > 10, "{h:?}");
        // Every insert writes at least the pool's commit word page.
        assert!(h.max as usize >= 500, "max {}", h.max);
        assert!(h.top1_share > 0.0 && h.top1_share <= 1.0);
        assert!(measure(TargetKind::BTreeMap, 10, 8, &dir, 3)
            .unwrap_err()
            .to_string()
            .contains("no single mapped pool"));
    }
}
