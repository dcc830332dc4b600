//! The tree's metadata block (pool root `cdds`): magic, layout, the commit
//! word, the root pointer, the session counter and the snapshot table.
//!
//! | word | field |
//! |---|---|
//! | 0 | magic `CDDSTREE` |
//! | 1 | layout version |
//! | 2 | **current version** — the commit word |
//! | 3 | root node offset |
//! | 4 | session counter (bumped at every open) |
//! | 5 | named-snapshot table offset (0 = none yet) |
//! | 6..13 | aborted versions (0 = free slot) while a lazy recovery runs (see `recover`) |
//! | 14..15 | reserved, zero |

use std::sync::atomic::AtomicU64;

use tembo_pmem::Pool;

use crate::error::{CddsError, Result};

/// Name of the pool root holding the metadata block.
pub const ROOT_NAME: &str = "cdds";
/// Bytes of the metadata block (two lines).
pub const META_BYTES: u64 = 128;
const MAGIC: u64 = u64::from_le_bytes(*b"CDDSTREE");
/// 2: nodes with an order line and unsorted slots (1: sorted, shifted
/// slots); 3: leaves record the prefix their key range shares; 4: inner
/// nodes do too; 5: new nodes are persisted only where used, their slots
/// checked with a salt from their birth word (`node`).
const LAYOUT: u64 = 5;
/// Layouts this build opens and upgrades in place: every node of layout 2
/// and every inner node of layout 3 reads prefix length 0, which layout 4
/// means the same way; a node of layouts 2–4 has birth word 0, which
/// layout 5 reads as "persisted whole, salt 0" (its checks unchanged).
/// (A layout-3 build would insert whole-key prefix words into an inner
/// node that records a prefix, and a layout-4 build would check a
/// layout-5 node's slots without their salt and read them all as torn
/// after a crash, so each must refuse the upgraded pool: the recorded
/// number is what makes it.)
const LAYOUTS_UPGRADED: [u64; 3] = [2, 3, 4];
const W_VERSION: u64 = 16;
const W_ROOT: u64 = 24;
const W_SESSION: u64 = 32;
const W_SNAPSHOTS: u64 = 40;
const W_ABORTED: u64 = 48;
/// Room in the aborted-version list: crashes during one unfinished lazy
/// recovery before the next open repairs eagerly.
pub const ABORTED_SLOTS: usize = 8;

/// Typed access to the metadata block at `off`.
#[derive(Clone, Copy, Debug)]
pub struct Meta {
    /// Pool offset of the block.
    pub off: u64,
}

impl Meta {
    /// Writes a fresh block (version 0, root `root`) and persists it.
    pub fn create(pool: &Pool, root: u64) -> Result<Meta> {
        let off = pool.alloc(META_BYTES)?;
        pool.fill(off, META_BYTES, 0)?;
        pool.store_u64(off, MAGIC)?;
        pool.store_u64(off + 8, LAYOUT)?;
        pool.store_u64(off + W_ROOT, root)?;
        pool.persist(off, META_BYTES);
        Ok(Meta { off })
    }

    /// Validates the block at `off`.
    pub fn open(pool: &Pool, off: u64) -> Result<Meta> {
        if pool.load_u64(off)? != MAGIC {
            return Err(CddsError::NotATree(format!("bad magic in the metadata block at {off:#x}")));
        }
        let layout = pool.load_u64(off + 8)?;
        if LAYOUTS_UPGRADED.contains(&layout) {
            // One persisted store: either value opens with this build, and
            // from here on nodes may record prefixes older builds misread.
            pool.store_u64(off + 8, LAYOUT)?;
            pool.persist(off + 8, 8);
        } else if layout != LAYOUT {
            return Err(CddsError::NotATree(format!(
                "tree layout {layout}, this build reads layout {LAYOUT} only: open the pool with the build that wrote it, \
                 copy the data out (a scan), and load it into a pool this build creates"
            )));
        }
        Ok(Meta { off })
    }

    /// The commit word.
    pub fn version_word<'p>(&self, pool: &'p Pool) -> Result<&'p AtomicU64> {
        Ok(pool.atomic_u64(self.off + W_VERSION)?)
    }

    /// Stores and persists the current version: the commit point.
    pub fn commit(&self, pool: &Pool, v: u64) -> Result<()> {
        // Everything the version makes visible was flushed; this fence makes
        // it durable before the commit store can be.
        pool.fence();
        self.version_word(pool)?.store(v, std::sync::atomic::Ordering::SeqCst);
        pool.persist(self.off + W_VERSION, 8);
        Ok(())
    }

    /// The root node.
    pub fn root(&self, pool: &Pool) -> Result<u64> {
        Ok(pool.load_u64(self.off + W_ROOT)?)
    }

    /// Stores and persists a new root node.
    pub fn set_root(&self, pool: &Pool, root: u64) -> Result<()> {
        pool.fence();
        pool.store_u64(self.off + W_ROOT, root)?;
        pool.persist(self.off + W_ROOT, 8);
        Ok(())
    }

    /// Bumps and persists the session counter; returns the new session (16 bits, never 0).
    pub fn next_session(&self, pool: &Pool) -> Result<u64> {
        let s = pool.load_u64(self.off + W_SESSION)?.wrapping_add(1);
        pool.store_u64(self.off + W_SESSION, s)?;
        pool.persist(self.off + W_SESSION, 8);
        Ok((s % 0xFFFF) + 1)
    }

    /// The named-snapshot table offset (0 = none).
    pub fn snapshots(&self, pool: &Pool) -> Result<u64> {
        Ok(pool.load_u64(self.off + W_SNAPSHOTS)?)
    }

    /// Stores and persists the snapshot table offset.
    pub fn set_snapshots(&self, pool: &Pool, table: u64) -> Result<()> {
        pool.fence();
        pool.store_u64(self.off + W_SNAPSHOTS, table)?;
        pool.persist(self.off + W_SNAPSHOTS, 8);
        Ok(())
    }

    /// The aborted versions recorded (see `recover`), in slot order.
    pub fn aborted(&self, pool: &Pool) -> Result<Vec<u64>> {
        let mut out = Vec::new();
        for i in 0..ABORTED_SLOTS as u64 {
            let v = pool.load_u64(self.off + W_ABORTED + 8 * i)?;
            if v != 0 {
                out.push(v);
            }
        }
        Ok(out)
    }

    /// Records `v` as aborted (persisted); `false` if the list is full.
    pub fn add_aborted(&self, pool: &Pool, v: u64) -> Result<bool> {
        for i in 0..ABORTED_SLOTS as u64 {
            let off = self.off + W_ABORTED + 8 * i;
            let w = pool.load_u64(off)?;
            if w == v {
                return Ok(true);
            }
            if w == 0 {
                pool.store_u64(off, v)?;
                pool.persist(off, 8);
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Empties the aborted list (persisted). Any subset of the stores may
    /// survive a crash: a version left in the list marks nothing any more.
    pub fn clear_aborted(&self, pool: &Pool) -> Result<()> {
        for i in 0..ABORTED_SLOTS as u64 {
            pool.store_u64(self.off + W_ABORTED + 8 * i, 0)?;
        }
        pool.persist(self.off + W_ABORTED, 8 * ABORTED_SLOTS as u64);
        Ok(())
    }
}
