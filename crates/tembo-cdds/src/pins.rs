//! Reader pins: which versions in-flight reads and snapshots still need.
//!
//! A read op publishes the current version in a slot of a fixed table
//! (no lock: one CAS to claim, one store to release) and re-checks the
//! version after publishing, so a writer that scans the table after its
//! commit either sees the pin or the reader sees the new version. The
//! writer derives two things from the table:
//! - the *oldest retained version* (logical GC: entries that ended at or
//!   before it are invisible to every reader), also bounded by snapshots;
//! - when a block retired by the writer at version `w` may be freed
//!   (physical GC): once every published pin is at least `w`, no read op
//!   that could still hold a reference to it is running.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

const SLOTS: usize = 256;

#[repr(align(64))]
#[derive(Debug, Default)]
struct PaddedSlot(AtomicU64);

/// The pin table.
#[derive(Debug)]
pub struct Pins {
    slots: Box<[PaddedSlot]>,
    /// One past the highest slot ever claimed: the writer scans only these
    /// (a handful with a handful of reader threads, not the whole table).
    high_water: AtomicUsize,
}

/// Threads get consecutive home slots, so few threads use few slots.
static NEXT_HOME: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static HINT: Cell<usize> = const { Cell::new(usize::MAX) };
}

impl Default for Pins {
    fn default() -> Self {
        Pins { slots: (0..SLOTS).map(|_| PaddedSlot::default()).collect(), high_water: AtomicUsize::new(0) }
    }
}

/// A published pin; released on drop.
#[derive(Debug)]
pub struct PinGuard<'a> {
    slot: &'a AtomicU64,
    /// The current version when the pin was taken.
    pub version: u64,
}

impl Drop for PinGuard<'_> {
    fn drop(&mut self) {
        self.slot.store(0, Ordering::Release);
    }
}

impl Pins {
    /// Publishes the current version of `current` and returns it pinned.
    pub fn pin<'a>(&'a self, current: &AtomicU64) -> PinGuard<'a> {
        let start = HINT.with(|h| {
            if h.get() == usize::MAX {
                h.set(NEXT_HOME.fetch_add(1, Ordering::Relaxed) % SLOTS);
            }
            h.get()
        });
        let mut v = current.load(Ordering::SeqCst);
        let mut i = start;
        let slot = loop {
            let s = &self.slots[i].0;
            if s.compare_exchange(0, v + 1, Ordering::SeqCst, Ordering::Relaxed).is_ok() {
                // Published before the re-check of the version below, so a
                // writer that scans after its commit covers this slot. A
                // thread re-pinning its home slot finds the mark already
                // past it; a (sequentially consistent) load then does: a
                // writer whose scan reads the mark before this load
                // committed before it, so the re-check below sees that
                // commit and re-pins. Saves a locked RMW per read.
                if self.high_water.load(Ordering::SeqCst) <= i {
                    self.high_water.fetch_max(i + 1, Ordering::SeqCst);
                }
                break s;
            }
            i = (i + 1) % SLOTS;
            if i == start {
                std::thread::yield_now();
            }
        };
        loop {
            let now = current.load(Ordering::SeqCst);
            if now == v {
                return PinGuard { slot, version: v };
            }
            v = now;
            slot.store(v + 1, Ordering::SeqCst);
        }
    }

    /// The smallest published version, if any read op is running.
    pub fn min_pinned(&self) -> Option<u64> {
        let n = self.high_water.load(Ordering::SeqCst).min(SLOTS);
        self.slots[..n]
            .iter()
            .filter_map(|s| match s.0.load(Ordering::SeqCst) {
                0 => None,
                x => Some(x - 1),
            })
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_publish_and_release() {
        let pins = Pins::default();
        let cur = AtomicU64::new(7);
        assert_eq!(pins.min_pinned(), None);
        let a = pins.pin(&cur);
        cur.store(9, Ordering::SeqCst);
        let b = pins.pin(&cur);
        assert_eq!((a.version, b.version), (7, 9));
        assert_eq!(pins.min_pinned(), Some(7));
        drop(a);
        assert_eq!(pins.min_pinned(), Some(9));
        drop(b);
        assert_eq!(pins.min_pinned(), None);
    }
}
