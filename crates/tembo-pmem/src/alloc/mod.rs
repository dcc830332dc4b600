//! The persistent allocator.
//!
//! Small blocks (16 B – 32 KiB) come from slabs, one size class per slab, with
//! one bit per block in a persistent bitmap; large blocks get a page run of
//! their own (up to the pool's maximum size). The persistent state is only the
//! run headers (see [`run`]) and the slab bitmaps; everything else — free run
//! indexes, slabs with room, counters — is rebuilt in DRAM at open by walking
//! the run headers: O(metadata), never the data.
//!
//! Crash consistency: every step is one 8-byte store, persisted before the
//! next, that leaves a walkable heap:
//! - carve `k` pages off a free run of `n`: write the remainder's header
//!   `Free(n-k)` at page `p+k` (inside the free run, so invisible), then
//!   `Kind(k)` at `p`;
//! - new slab: zero its bitmap and write the remainder's header (both
//!   invisible, one fence for the two), then write its `Slab` header, which
//!   is only flushed: the fence its first allocation makes before anything
//!   references the block makes it durable (`carve_ordered`);
//! - small alloc / free: set / clear one bitmap bit;
//! - release a run: `Free(len (+ next free run))` at its page, then merge into
//!   a free predecessor by rewriting the predecessor's header;
//! - grow: `Free(new pages)` at the old end, then the header's size word.
//!
//! A block is durable-allocated when `alloc` returns. An engine persists the
//! block's contents, then links it; it unlinks (persisted) before `free`. A
//! crash between allocation and link, or between unlink and free, leaks the
//! block; [`Pool::reclaim_leaks`] finds such blocks by marking from the
//! engines' roots ([`LeakTracer`]) and frees them.
//!
//! At the maximum size the allocator keeps a reserve: the last max size /
//! 32 (at most 256 KiB) of free pages may become new runs only inside a
//! [`Pool::with_reserve`] scope, which engines open for operations that
//! free space but may first need a block of a size class with no free
//! slot (a delete whose leaf must merge). Without it a pool filled by puts
//! could refuse the deletes meant to empty it.
//!
//! Invariants (checked by [`Pool::check`]):
//! - `alloc.runs_cover_heap`: runs tile the heap with no gap or overlap;
//! - `alloc.run_header`: every run header decodes and matches the DRAM index;
//! - `alloc.slab_bitmap`: bits past a slab's last block are zero and the
//!   free count matches the bitmap;
//! - `alloc.free_index`: the free-run index holds exactly the free runs
//!   (and the free-page counter their pages);
//! - `alloc.slab_index`: the page-to-slab index marks exactly the slab pages;
//! - `alloc.used_bytes`: the usage counter equals the sum of allocated
//!   blocks, less those a deferred allocation set aside.
//!
//! Deferred allocations of small blocks (the CDDS tree's records) set a
//! whole bitmap word's free bits at once and hand the blocks out one by
//! one, so that a run of them writes one bitmap line per up to 64 blocks
//! (`AllocState::reserve_word`). The blocks set aside are allocated on the
//! media and owned by no one: a crash leaves them to the recovery's leak
//! sweep, a clean close and the sweeps free them first.

pub mod run;
pub mod size_class;
mod sweep;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;

pub use run::{RunKind, RUN_HEADER_BYTES};
pub use size_class::{class_of, geometry, SlabGeometry, CLASS_COUNT, CLASS_SIZES, MAX_SLAB_BLOCK};
pub use sweep::{LeakReport, LeakTracer, Marker, ReclaimReport, SweepFreeStep};

use crate::error::{PmemError, Result};
use crate::header::{HEADER_BYTES, PAGE_BYTES};
use crate::{Pool, PoolOffset};

/// Largest single allocation the format allows (the pool's maximum bounds it
/// further).
pub const MAX_ALLOC_BYTES: u64 = run::RUN_PAGES_MAX * PAGE_BYTES - RUN_HEADER_BYTES;

type PageMap<V> = crate::offset_hash::OffsetMap<V>;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Run {
    pub(crate) pages: u64,
    pub(crate) kind: RunKind,
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct Slab {
    class: u8,
    free: u64,
    /// Bitmap word to start the next search at.
    hint: u64,
    /// Holds cold blocks ([`Pool::alloc_cold`]) only.
    cold: bool,
    /// Bitmap words (bit i: word i; a slab has at most 32) whose clears by
    /// lazy frees wait for a flush (see [`Pool::free_many_lazy`]).
    lazy_words: u64,
}

/// What a free does with the bitmap word it clears.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FreeFlush {
    /// Flush and fence it ([`Pool::free`]).
    Persist,
    /// Leave it for the caller to flush after the lock
    /// ([`Pool::free_many_deferred`], [`Pool::free_many`]).
    Defer,
    /// Flush it at the pool's close, or when too many wait
    /// ([`Pool::free_many_lazy`]).
    Lazy,
}

/// Most bitmap words whose clears wait for the close; beyond it an eighth
/// of them are flushed, the slabs that waited longest first (a few hundred
/// microseconds of flushes). 2^16 words cover the slabs of about a million
/// 320-byte records, so a free usually finds its word already waiting.
const LAZY_FREE_WORDS: usize = 1 << 16;

/// How many blocks ahead a batch of frees fetches their bitmap words (and
/// twice as far their pages' index entries): enough misses in flight to
/// cover a memory access at a free's cost of ~30 ns.
const FREE_AHEAD: usize = 8;

/// The `slab_pages` entry of the page `back` pages into a slab of `class`
/// (never 0: 0 marks a page outside slabs).
fn slab_page_code(back: u64, class: u8) -> u16 {
    1 + ((back as u16) << 6 | u16::from(class))
}

/// Index of the partial-slab list (and empty-slab count) of `class` in the
/// hot or the cold arena.
fn list(class: u8, cold: bool) -> usize {
    class as usize + if cold { CLASS_COUNT } else { 0 }
}

/// How much a pool of `size` bytes grows by when an allocation needs room:
/// geometrically (doubling, at most 1 GiB a step), so that a steadily
/// filling pool pays for few growths. `Pool::prepare_growth` readies the
/// same step ahead of need.
pub(crate) fn growth_step(size: u64) -> u64 {
    size.min(1 << 30)
}

/// Usage of a pool's heap.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AllocStats {
    /// Pool size in bytes.
    pub pool_bytes: u64,
    /// Heap bytes (pool size less the header).
    pub heap_bytes: u64,
    /// Usable bytes of all allocated blocks.
    pub used_bytes: u64,
    /// Number of allocated blocks.
    pub allocated_blocks: u64,
    /// Free space without growing: free page runs plus free slab slots. An
    /// upper bound on what one more allocation can get: a request for a
    /// size class with no free slot needs a whole slab run of that class
    /// (8 to 256 pages), and a large one a contiguous run (see
    /// `largest_free_run_bytes`).
    pub free_bytes: u64,
    /// Bytes in free page runs.
    pub free_run_bytes: u64,
    /// The largest free page run, in bytes.
    pub largest_free_run_bytes: u64,
    /// Number of free runs.
    pub free_runs: u64,
    /// Number of slabs.
    pub slabs: u64,
    /// Number of large-block runs.
    pub large_runs: u64,
    /// Run headers, bitmaps, slab tails and block rounding: heap bytes that
    /// are neither used nor free.
    pub overhead_bytes: u64,
    /// External fragmentation: 1 − largest free run / free run bytes (0 when
    /// all free pages are in one run).
    pub fragmentation: f64,
    /// Bytes the pool may still grow by.
    pub growable_bytes: u64,
    /// Free pages (in bytes) that new runs may take only inside
    /// [`Pool::with_reserve`]: allocations needing a new run fail when free
    /// run bytes plus `growable_bytes` would drop below it.
    pub reserve_bytes: u64,
}

/// A violated invariant found by [`Pool::check`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The invariant's name, as listed in the module docs.
    pub name: &'static str,
    /// What was found.
    pub detail: String,
}

/// The result of [`Pool::check`].
#[derive(Clone, Debug, Default)]
pub struct CheckReport {
    /// Runs walked.
    pub runs: u64,
    /// Allocated blocks found.
    pub blocks: u64,
    /// Every violated invariant.
    pub violations: Vec<Violation>,
}

impl CheckReport {
    /// Whether no invariant is violated.
    pub fn is_ok(&self) -> bool {
        self.violations.is_empty()
    }
}

/// An allocated block: offset and usable size.
type Block = (PoolOffset, u64);

/// The allocator's DRAM state. Lives in `Pool::alloc`, behind its mutex.
#[derive(Debug, Default)]
pub(crate) struct AllocState {
    pages: u64,
    runs: BTreeMap<u64, Run>,
    free_runs: BTreeSet<(u64, u64)>,
    slabs: PageMap<Slab>,
    /// Per heap page: 0 outside slabs, else `1 + (back << 6 | class)`,
    /// `back` the pages from the slab's first page (slabs span at most 256
    /// pages, classes are below 64). A free finds its slab with one load
    /// instead of a search of the run map, which was most of the
    /// allocator's share of a delete-heavy run.
    slab_pages: Vec<u16>,
    partial: Vec<BTreeSet<u64>>,
    empty_slabs: Vec<u64>,
    /// Pages in free runs (the sum over `free_runs`), for the reserve.
    free_pages: u64,
    used_bytes: u64,
    /// Bytes of every block freed since the pool was opened (only grows):
    /// what a caller that deleted data can watch for the pool giving it
    /// back, whatever is allocated meanwhile.
    freed_bytes: u64,
    blocks: u64,
    /// While a concurrent leak sweep runs (see `sweep`): the blocks marked
    /// so far, every block allocated since it began included.
    concurrent_marks: Option<sweep::OffsetSet>,
    /// The first page the concurrent sweep's free phase has yet to visit.
    concurrent_cursor: u64,
    /// The bitmap word a deferred allocation changed, for its caller to
    /// flush once the allocator's lock is released: a locked instruction
    /// (the unlock) right after a CLWB waits for the write-back as a fence
    /// does, and that stall was 7% of a server busy with INCR.
    unflushed: Option<PoolOffset>,
    /// Bitmap words of blocks freed with [`FreeFlush::Defer`], for the
    /// caller to flush after the lock.
    unflushed_frees: Vec<PoolOffset>,
    /// Slabs (first pages) whose `lazy_words` became non-zero, each listed
    /// at least once while it is (a slab may be listed again after it was
    /// released and made anew; a visit of a clean or missing slab is a
    /// no-op). Why per-slab masks rather than a set of word offsets: the
    /// free already holds its slab's entry, and the set's insert, a hash
    /// probe into a table of up to 2^16 words, was 3.9% of a run of
    /// random deletes.
    lazy_slabs: std::collections::VecDeque<u64>,
    /// Bits set over every slab's `lazy_words`.
    lazy_count: usize,
    /// Per size class: blocks whose bitmap bits a deferred allocation set
    /// and flushed together with its own, handed out by the next deferred
    /// allocations of the class without a bitmap write (see
    /// [`AllocState::reserve_word`]). Not in `used_bytes` or `blocks`;
    /// their slabs count them as taken.
    reserved: Vec<Vec<PoolOffset>>,
}

/// The bitmap word of block `index` of the slab whose run starts at `run_off`.
fn bitmap_word(run_off: PoolOffset, index: u64) -> PoolOffset {
    run_off + RUN_HEADER_BYTES + index / 64 * 8
}

fn page_offset(page: u64) -> PoolOffset {
    HEADER_BYTES + page * PAGE_BYTES
}

/// The offsets of the bitmap words named by mask `words` of the slab at `page`.
fn lazy_word_offsets(page: u64, mut words: u64) -> impl Iterator<Item = PoolOffset> {
    let base = bitmap_word(page_offset(page), 0);
    std::iter::from_fn(move || {
        (words != 0).then(|| {
            let i = u64::from(words.trailing_zeros());
            words &= words - 1;
            base + i * 8
        })
    })
}

impl AllocState {
    pub(crate) fn empty() -> AllocState {
        AllocState {
            partial: vec![BTreeSet::new(); 2 * CLASS_COUNT],
            empty_slabs: vec![0; 2 * CLASS_COUNT],
            reserved: vec![Vec::new(); CLASS_COUNT],
            ..AllocState::default()
        }
    }

    /// Lays out an empty heap of a new pool: one free run.
    pub(crate) fn format(pool: &Pool, size: u64) -> Result<AllocState> {
        let mut st = AllocState::empty();
        st.pages = (size - HEADER_BYTES) / PAGE_BYTES;
        st.slab_pages = vec![0; st.pages as usize];
        st.write_header(pool, 0, RunKind::Free, st.pages)?;
        st.insert_run(0, Run { pages: st.pages, kind: RunKind::Free });
        Ok(st)
    }

    /// Rebuilds the DRAM state of an existing pool by walking its runs.
    pub(crate) fn rebuild(pool: &Pool) -> Result<AllocState> {
        let mut st = AllocState::empty();
        st.pages = (pool.size() - HEADER_BYTES) / PAGE_BYTES;
        st.slab_pages = vec![0; st.pages as usize];
        let mut page = 0;
        let mut prev_free: Option<u64> = None;
        while page < st.pages {
            let (kind, pages) = read_header(pool, page)?;
            if pages > st.pages - page {
                return Err(PmemError::corrupted(
                    format!("run of {pages} pages at page {page} runs past the heap end"),
                    page_offset(page),
                ));
            }
            match kind {
                RunKind::Free => {
                    if let Some(p) = prev_free {
                        // Two adjacent free runs (a crash between growth and
                        // its merge, or a merge cut short): merge them now.
                        let merged = st.runs[&p].pages + pages;
                        st.write_header(pool, p, RunKind::Free, merged)?;
                        st.remove_run(p);
                        st.insert_run(p, Run { pages: merged, kind: RunKind::Free });
                    } else {
                        st.insert_run(page, Run { pages, kind });
                        prev_free = Some(page);
                    }
                    page += pages;
                    continue;
                }
                RunKind::Large => {
                    st.used_bytes += pages * PAGE_BYTES - RUN_HEADER_BYTES;
                    st.blocks += 1;
                }
                RunKind::Slab(class) => {
                    if class as usize >= CLASS_COUNT || geometry(class).pages != pages {
                        return Err(PmemError::corrupted(
                            format!("slab header at page {page} (class {class}, {pages} pages)"),
                            page_offset(page),
                        ));
                    }
                    let used = count_slab(pool, page, class)?;
                    let g = geometry(class);
                    st.used_bytes += used * g.block_bytes;
                    st.blocks += used;
                    // The arena is not recorded: after an open every slab
                    // is hot, and cold blocks start new slabs.
                    st.slabs.insert(page, Slab { class, free: g.blocks - used, hint: 0, cold: false, lazy_words: 0 });
                    st.index_slab(page, class, true);
                    if used < g.blocks {
                        st.partial[list(class, false)].insert(page);
                    }
                    if used == 0 {
                        st.empty_slabs[list(class, false)] += 1;
                    }
                }
            }
            st.insert_run(page, Run { pages, kind });
            prev_free = None;
            page += pages;
        }
        Ok(st)
    }

    fn insert_run(&mut self, page: u64, run: Run) {
        if run.kind == RunKind::Free && self.free_runs.insert((run.pages, page)) {
            self.free_pages += run.pages;
        }
        self.runs.insert(page, run);
    }

    fn remove_run(&mut self, page: u64) -> Option<Run> {
        let run = self.runs.remove(&page)?;
        if run.kind == RunKind::Free && self.free_runs.remove(&(run.pages, page)) {
            self.free_pages -= run.pages;
        }
        Some(run)
    }

    /// Refuses a new run of `pages` pages that would cut into the reserve
    /// ([`Pool::with_reserve`]) unless a scope holds it open: free pages
    /// plus the room the pool may still grow by must stay at or above the
    /// reserve afterwards.
    fn admit(&self, pool: &Pool, pages: u64) -> Result<()> {
        let reserve = pool.reserve_pages();
        if reserve == 0 || pool.reserve_open() {
            return Ok(());
        }
        let growable = pool.growth_limit().saturating_sub(pool.size()) / PAGE_BYTES;
        if self.free_pages.saturating_add(growable) >= pages.saturating_add(reserve) {
            return Ok(());
        }
        Err(PmemError::PoolFull {
            requested: pages * PAGE_BYTES,
            size: pool.size(),
            max_size: pool.max_size(),
            filesystem_full: false,
        })
    }

    fn write_header(&self, pool: &Pool, page: u64, kind: RunKind, pages: u64) -> Result<()> {
        self.store_header(pool, page, kind, pages)?;
        pool.fence_always();
        Ok(())
    }

    /// [`AllocState::write_header`] flushed but not fenced.
    fn store_header(&self, pool: &Pool, page: u64, kind: RunKind, pages: u64) -> Result<()> {
        let off = page_offset(page);
        pool.store_u64(off, run::encode(page, kind, pages))?;
        pool.flush_always(off, 8);
        Ok(())
    }

    /// Takes `pages` pages from the best-fitting free run, growing the pool
    /// if none fits, and makes them a run of `kind`.
    fn carve(&mut self, pool: &Pool, pages: u64, kind: RunKind) -> Result<u64> {
        self.carve_ordered(pool, pages, kind, false)
    }

    /// [`AllocState::carve`], with the new run's header flushed but not
    /// fenced when `defer_header`: it becomes durable at the next fence,
    /// after everything flushed before it (a new slab's zeroed bitmap) and
    /// after the header of the free run left over, which is fenced first.
    /// A crash before that fence leaves the pages inside the free run that
    /// the old header still spans (consistent: the left-over header lies
    /// within it and is never read); one after leaves the new run. Only a
    /// slab for deferred or fenced allocations may defer its header: its
    /// blocks are referenced only after the caller's fence. With hardware
    /// flushes a fence orders only its own thread's write-backs; another
    /// thread allocating from the slab took the allocator's lock after this
    /// one let it go, and that unlock (a locked instruction) waited for the
    /// header's write-back as a fence would (as for `unflushed` words).
    fn carve_ordered(&mut self, pool: &Pool, pages: u64, kind: RunKind, defer_header: bool) -> Result<u64> {
        self.admit(pool, pages)?;
        let (run_pages, page) = match self.free_runs.range((pages, 0)..).next() {
            Some(&found) => found,
            None => {
                self.grow_for(pool, pages)?;
                *self.free_runs.range((pages, 0)..).next().ok_or_else(|| PmemError::Invariant {
                    name: "alloc.grow_fits",
                    detail: format!("no free run of {pages} pages after growing"),
                })?
            }
        };
        if defer_header {
            if run_pages > pages {
                self.store_header(pool, page + pages, RunKind::Free, run_pages - pages)?;
            }
            // Orders what the caller flushed before (a slab's zeroed
            // bitmap) and the left-over header before the new header.
            pool.fence_always();
            self.store_header(pool, page, kind, pages)?;
        } else {
            if run_pages > pages {
                self.write_header(pool, page + pages, RunKind::Free, run_pages - pages)?;
            }
            self.write_header(pool, page, kind, pages)?;
        }
        self.remove_run(page);
        self.insert_run(page, Run { pages, kind });
        if run_pages > pages {
            self.insert_run(page + pages, Run { pages: run_pages - pages, kind: RunKind::Free });
        }
        Ok(page)
    }

    /// Returns a run's pages to the free runs, merging with free neighbours.
    fn release_run(&mut self, pool: &Pool, page: u64) -> Result<()> {
        let run = self.remove_run(page).ok_or_else(|| PmemError::Invariant {
            name: "alloc.runs_cover_heap",
            detail: format!("release of unknown run at page {page}"),
        })?;
        let mut start = page;
        let mut pages = run.pages;
        let next = page + run.pages;
        if let Some(n) = self.runs.get(&next).copied().filter(|r| r.kind == RunKind::Free) {
            pages += n.pages;
            self.write_header(pool, start, RunKind::Free, pages)?;
            self.remove_run(next);
        } else {
            self.write_header(pool, start, RunKind::Free, pages)?;
        }
        if let Some((&p, &prev)) = self.runs.range(..page).next_back() {
            if prev.kind == RunKind::Free && p + prev.pages == page {
                self.write_header(pool, p, RunKind::Free, prev.pages + pages)?;
                self.remove_run(p);
                start = p;
                pages += prev.pages;
            }
        }
        self.insert_run(start, Run { pages, kind: RunKind::Free });
        Ok(())
    }

    /// Grows the pool so that a free run of `pages` pages exists at its end.
    fn grow_for(&mut self, pool: &Pool, pages: u64) -> Result<()> {
        let tail_free = self
            .runs
            .iter()
            .next_back()
            .filter(|(p, r)| r.kind == RunKind::Free && *p + r.pages == self.pages)
            .map_or(0, |(_, r)| r.pages);
        let size = pool.size();
        let limit = pool.growth_limit();
        let need = (pages - tail_free).saturating_mul(PAGE_BYTES);
        let want = size.saturating_add(need);
        if want > limit {
            return Err(PmemError::PoolFull {
                requested: pages * PAGE_BYTES,
                size,
                max_size: pool.max_size(),
                filesystem_full: false,
            });
        }
        let target = want.max(size.saturating_add(growth_step(size))).min(limit);
        match self.grow_to(pool, target) {
            // The filesystem may still hold what this request needs.
            Err(PmemError::PoolFull { filesystem_full: true, .. }) if target > want => self.grow_to(pool, want),
            r => r,
        }
    }

    pub(crate) fn grow_to(&mut self, pool: &Pool, new_size: u64) -> Result<()> {
        let new_pages = (new_size - HEADER_BYTES) / PAGE_BYTES;
        let old_pages = self.pages;
        if new_pages <= old_pages {
            return Ok(());
        }
        pool.extend_mapping(HEADER_BYTES + new_pages * PAGE_BYTES)?;
        self.write_header(pool, old_pages, RunKind::Free, new_pages - old_pages)?;
        pool.commit_size(HEADER_BYTES + new_pages * PAGE_BYTES);
        self.pages = new_pages;
        self.slab_pages.resize(new_pages as usize, 0);
        self.insert_run(old_pages, Run { pages: new_pages - old_pages, kind: RunKind::Free });
        if let Some((&p, &prev)) = self.runs.range(..old_pages).next_back() {
            if prev.kind == RunKind::Free && p + prev.pages == old_pages {
                let merged = prev.pages + new_pages - old_pages;
                self.write_header(pool, p, RunKind::Free, merged)?;
                self.remove_run(old_pages);
                self.remove_run(p);
                self.insert_run(p, Run { pages: merged, kind: RunKind::Free });
            }
        }
        Ok(())
    }

    fn alloc(&mut self, pool: &Pool, size: u64, fence: bool, cold: bool) -> Result<PoolOffset> {
        let off = self.alloc_unmarked(pool, size, fence, cold)?;
        if let Some(marks) = &mut self.concurrent_marks {
            // Allocated after the sweep began: never the sweep's to free.
            marks.insert(off);
        }
        Ok(off)
    }

    fn alloc_unmarked(&mut self, pool: &Pool, size: u64, fence: bool, cold: bool) -> Result<PoolOffset> {
        match self.alloc_fitting(pool, size, fence, cold) {
            // Blocks set aside for other classes may hold the room.
            Err(PmemError::PoolFull { .. }) if self.reserved_blocks() > 0 => {
                self.release_reserved(pool)?;
                self.alloc_fitting(pool, size, fence, cold)
            }
            r => r,
        }
    }

    fn alloc_fitting(&mut self, pool: &Pool, size: u64, fence: bool, cold: bool) -> Result<PoolOffset> {
        match class_of(size) {
            Some(class) if !fence && !cold && self.concurrent_marks.is_none() => self.alloc_reserving(pool, class),
            Some(class) => self.alloc_small(pool, class, fence, cold),
            None => {
                if size > MAX_ALLOC_BYTES {
                    return Err(PmemError::TooLarge { what: "allocation", requested: size, limit: MAX_ALLOC_BYTES });
                }
                let pages = (size + RUN_HEADER_BYTES).div_ceil(PAGE_BYTES);
                let page = self.carve(pool, pages, RunKind::Large)?;
                self.used_bytes += pages * PAGE_BYTES - RUN_HEADER_BYTES;
                self.blocks += 1;
                Ok(page_offset(page) + RUN_HEADER_BYTES)
            }
        }
    }

    fn alloc_small(&mut self, pool: &Pool, class: u8, fence: bool, cold: bool) -> Result<PoolOffset> {
        let g = geometry(class);
        let mut li = list(class, cold);
        let page = match self.partial[li].first() {
            Some(&p) => p,
            None => match self.new_slab(pool, class, cold) {
                Ok(p) => p,
                // No room for a new slab: a block of the other arena's
                // slabs beats failing (arenas are placement, not quota).
                Err(PmemError::PoolFull { .. }) if !self.partial[list(class, !cold)].is_empty() => {
                    li = list(class, !cold);
                    self.partial[li].first().copied().unwrap_or_default()
                }
                Err(e) => return Err(e),
            },
        };
        // The lowest free block of the first word that has one.
        let (word_off, w, set) = self.set_free_bits(pool, page, li, class, |free| free & free.wrapping_neg())?;
        if fence {
            pool.persist(word_off, 8);
        } else {
            self.unflushed = Some(word_off);
        }
        self.used_bytes += g.block_bytes;
        self.blocks += 1;
        Ok(page_offset(page) + g.first_block + (w * 64 + u64::from(set.trailing_zeros())) * g.block_bytes)
    }

    /// Sets bits of the first bitmap word of the slab at `page` (in list
    /// `li`) that has a free block: `pick` chooses which of its free bits to
    /// set (a non-empty subset). The slab's free count and the lists
    /// follow. Returns the word's offset, its index in the bitmap and the
    /// bits set; the caller flushes the word.
    fn set_free_bits(
        &mut self,
        pool: &Pool,
        page: u64,
        li: usize,
        class: u8,
        pick: impl Fn(u64) -> u64,
    ) -> Result<(PoolOffset, u64, u64)> {
        let g = geometry(class);
        let run_off = page_offset(page);
        let slab = self.slabs.get_mut(&page).ok_or_else(|| PmemError::Invariant {
            name: "alloc.free_index",
            detail: format!("slab at page {page} is not indexed"),
        })?;
        for i in 0..g.bitmap_words {
            let w = (slab.hint + i) % g.bitmap_words;
            let word_off = run_off + RUN_HEADER_BYTES + w * 8;
            let word = pool.atomic_u64(word_off)?;
            let bits = word.load(Ordering::Relaxed);
            let limit = if w == g.bitmap_words - 1 && g.blocks % 64 != 0 { g.blocks % 64 } else { 64 };
            let free_mask = !bits & if limit == 64 { u64::MAX } else { (1u64 << limit) - 1 };
            if free_mask == 0 {
                continue;
            }
            let set = pick(free_mask) & free_mask;
            word.store(bits | set, Ordering::Release);
            slab.hint = w;
            if slab.free == g.blocks {
                self.empty_slabs[li] -= 1;
            }
            slab.free -= u64::from(set.count_ones());
            if slab.free == 0 {
                self.partial[li].remove(&page);
            }
            return Ok((word_off, w, set));
        }
        Err(PmemError::Invariant {
            name: "alloc.slab_bitmap",
            detail: format!("slab at page {page} is indexed as partial but its bitmap is full"),
        })
    }

    /// A deferred allocation of a small block: from the blocks set aside
    /// for its class, or else by [`AllocState::reserve_word`].
    fn alloc_reserving(&mut self, pool: &Pool, class: u8) -> Result<PoolOffset> {
        let off = match self.reserved[class as usize].pop() {
            Some(off) => off,
            None => self.reserve_word(pool, class)?,
        };
        self.used_bytes += geometry(class).block_bytes;
        self.blocks += 1;
        Ok(off)
    }

    /// Sets every free bit of one bitmap word of a partial slab of `class`
    /// with one store, to be flushed by the caller after the lock (as a
    /// deferred allocation's word is), and returns one of those blocks;
    /// the others wait in `reserved`. So a run of deferred allocations
    /// writes and flushes a bitmap line once per up to 64 blocks instead of
    /// once each. Why it is safe: every caller of a deferred allocation
    /// fences before anything durable references the block and sweeps
    /// leaks after a crash (see [`Pool::alloc_deferred`]), so a block
    /// whose bit reached the media but that nothing references is a leak
    /// the recovery's sweep frees, never a block handed out twice. A clean
    /// close frees what is still set aside (`release_reserved`), since no
    /// sweep follows a clean open; so do the sweeps before they start.
    fn reserve_word(&mut self, pool: &Pool, class: u8) -> Result<PoolOffset> {
        let g = geometry(class);
        let li = list(class, false);
        let page = match self.partial[li].first() {
            Some(&p) => p,
            None => self.new_slab(pool, class, false)?,
        };
        let (word_off, w, set) = self.set_free_bits(pool, page, li, class, |free| free)?;
        self.unflushed = Some(word_off);
        // Handed out lowest first, as single allocations are.
        let run_off = page_offset(page);
        let block = |bit: u32| run_off + g.first_block + (w * 64 + u64::from(bit)) * g.block_bytes;
        let mut rest = set & (set - 1);
        let set_aside = &mut self.reserved[class as usize];
        let at = set_aside.len();
        while rest != 0 {
            set_aside.push(block(rest.trailing_zeros()));
            rest &= rest - 1;
        }
        set_aside[at..].reverse();
        Ok(block(set.trailing_zeros()))
    }

    /// Blocks set aside by [`AllocState::reserve_word`] and not handed out.
    fn reserved_blocks(&self) -> usize {
        self.reserved.iter().map(Vec::len).sum()
    }

    /// Bytes of the blocks set aside.
    fn reserved_bytes(&self) -> u64 {
        self.reserved.iter().enumerate().map(|(c, v)| v.len() as u64 * geometry(c as u8).block_bytes).sum()
    }

    /// Frees every block set aside (their bitmap words wait for the close,
    /// or the caller's flush of the lazy frees).
    pub(crate) fn release_reserved(&mut self, pool: &Pool) -> Result<()> {
        // Counted as allocated for the free to uncount them.
        self.used_bytes += self.reserved_bytes();
        self.blocks += self.reserved_blocks() as u64;
        let blocks: Vec<PoolOffset> = self.reserved.iter_mut().flat_map(std::mem::take).collect();
        self.free_each(pool, &blocks, FreeFlush::Lazy)
    }

    fn new_slab(&mut self, pool: &Pool, class: u8, cold: bool) -> Result<u64> {
        let g = geometry(class);
        self.admit(pool, g.pages)?;
        // The bitmap must be zero on media before the header makes it count;
        // the pages are free, so writing them is invisible until then.
        let (run_pages, page) = match self.free_runs.range((g.pages, 0)..).next() {
            Some(&f) => f,
            None => {
                self.grow_for(pool, g.pages)?;
                *self.free_runs.range((g.pages, 0)..).next().ok_or_else(|| PmemError::Invariant {
                    name: "alloc.grow_fits",
                    detail: "no free run for a slab after growing".into(),
                })?
            }
        };
        let _ = run_pages;
        let bitmap = page_offset(page) + RUN_HEADER_BYTES;
        pool.fill(bitmap, g.bitmap_words * 8, 0)?;
        pool.flush_always(bitmap, g.bitmap_words * 8);
        // One fence for a new slab, not three (on a disk each is an msync):
        // the bitmap and the left-over run's header share the fence before
        // the slab's header, whose own write-back waits for the fence every
        // allocation makes before its block is referenced (`alloc_small`'s
        // persist of the bitmap word, or the caller's, for deferred ones).
        let carved = self.carve_ordered(pool, g.pages, RunKind::Slab(class), true)?;
        if carved != page {
            return Err(PmemError::Invariant {
                name: "alloc.free_index",
                detail: format!("best fit changed between bitmap init ({page}) and carve ({carved})"),
            });
        }
        self.slabs.insert(page, Slab { class, free: g.blocks, hint: 0, cold, lazy_words: 0 });
        self.index_slab(page, class, true);
        self.partial[list(class, cold)].insert(page);
        self.empty_slabs[list(class, cold)] += 1;
        Ok(page)
    }

    /// Marks (or clears) the pages of the slab of `class` at `page` in
    /// `slab_pages`.
    fn index_slab(&mut self, page: u64, class: u8, on: bool) {
        let pages = geometry(class).pages;
        debug_assert!(pages <= 256 && (class as usize) < 64);
        for back in 0..pages {
            if let Some(v) = self.slab_pages.get_mut((page + back) as usize) {
                *v = if on { slab_page_code(back, class) } else { 0 };
            }
        }
    }

    /// The run holding `offset`, as (run page, run).
    fn run_of(&self, offset: PoolOffset) -> Option<(u64, Run)> {
        if offset < HEADER_BYTES {
            return None;
        }
        let page = (offset - HEADER_BYTES) / PAGE_BYTES;
        if let Some(&v) = self.slab_pages.get(page as usize).filter(|v| **v != 0) {
            let (back, class) = (u64::from((v - 1) >> 6), ((v - 1) & 63) as u8);
            return Some((page - back, Run { pages: geometry(class).pages, kind: RunKind::Slab(class) }));
        }
        let (&p, &run) = self.runs.range(..=page).next_back()?;
        (page < p + run.pages).then_some((p, run))
    }

    /// Brings `offset`'s page entry of `slab_pages` into the cache.
    fn prefetch_index_of(&self, offset: PoolOffset) {
        if let Some(page) = offset.checked_sub(HEADER_BYTES).map(|o| o / PAGE_BYTES) {
            if let Some(entry) = self.slab_pages.get(page as usize) {
                Pool::prefetch_value(entry);
            }
        }
    }

    /// The bitmap word that would hold `offset`'s bit if it is a block of
    /// a slab (unchecked beyond that: for prefetching).
    fn bitmap_word_of(&self, offset: PoolOffset) -> Option<PoolOffset> {
        let (page, run) = self.run_of(offset)?;
        let RunKind::Slab(class) = run.kind else { return None };
        let g = geometry(class);
        let run_off = page_offset(page);
        let index = offset.checked_sub(run_off + g.first_block)? / g.block_bytes;
        Some(bitmap_word(run_off, index))
    }

    /// Where an allocated block starting at `offset` is: its run page, slab
    /// bitmap word and bit (for slab blocks), and its usable size.
    fn locate(&self, pool: &Pool, offset: PoolOffset) -> std::result::Result<BlockAt, &'static str> {
        let (page, run) = self.run_of(offset).ok_or("not inside the heap")?;
        let run_off = page_offset(page);
        match run.kind {
            RunKind::Free => Err("inside a free run"),
            RunKind::Large if offset == run_off + RUN_HEADER_BYTES => {
                Ok(BlockAt { page, slot: None, usable: run.pages * PAGE_BYTES - RUN_HEADER_BYTES })
            }
            RunKind::Large => Err("not the start of a large block"),
            RunKind::Slab(class) => {
                let g = geometry(class);
                let rel = offset.checked_sub(run_off + g.first_block).ok_or("inside a slab's header")?;
                if rel % g.block_bytes != 0 || rel / g.block_bytes >= g.blocks {
                    return Err("not the start of a slab block");
                }
                let index = rel / g.block_bytes;
                let word_off = bitmap_word(run_off, index);
                let bits = pool.load_u64(word_off).map_err(|_| "bitmap unreadable")?;
                if bits & (1 << (index % 64)) == 0 {
                    return Err("not allocated (double free?)");
                }
                Ok(BlockAt { page, slot: Some((class, word_off, index % 64)), usable: g.block_bytes })
            }
        }
    }

    /// Frees every block of `offsets` that can be; the first that cannot
    /// is the error, the others are freed all the same.
    fn free_each(&mut self, pool: &Pool, offsets: &[PoolOffset], how: FreeFlush) -> Result<()> {
        let mut first = Ok(());
        for (i, &offset) in offsets.iter().enumerate() {
            // A batch of retired blocks lies all over the heap, and each
            // free waits for two misses in turn: the page's index entry,
            // then the slab's bitmap word. Fetching both ahead lets a
            // batch's misses overlap (the limbo frees hundreds at a time;
            // in a profile of 1M random deletes the frees went from 11.2%
            // to 9.0% of the time, the bitmap word's miss out of `locate`).
            if let Some(&far) = offsets.get(i + 2 * FREE_AHEAD) {
                self.prefetch_index_of(far);
            }
            if let Some(&near) = offsets.get(i + FREE_AHEAD) {
                if let Some(word) = self.bitmap_word_of(near) {
                    pool.prefetch(word, 8);
                }
            }
            if let Err(e) = self.free(pool, offset, how) {
                if first.is_ok() {
                    first = Err(e);
                }
            }
        }
        first
    }

    fn free(&mut self, pool: &Pool, offset: PoolOffset, how: FreeFlush) -> Result<()> {
        let at = self.locate(pool, offset).map_err(|why| PmemError::InvalidFree { offset, why })?;
        self.free_located_with(pool, at, how)
    }

    fn free_located(&mut self, pool: &Pool, at: BlockAt) -> Result<()> {
        self.free_located_with(pool, at, FreeFlush::Persist)
    }

    /// Frees a located block; what happens to a slab block's bitmap word
    /// is `how`'s.
    fn free_located_with(&mut self, pool: &Pool, at: BlockAt, how: FreeFlush) -> Result<()> {
        self.used_bytes -= at.usable;
        self.freed_bytes += at.usable;
        self.blocks -= 1;
        let Some((class, word_off, bit)) = at.slot else {
            return self.release_run(pool, at.page);
        };
        let word = pool.atomic_u64(word_off)?;
        word.store(word.load(Ordering::Relaxed) & !(1 << bit), Ordering::Release);
        let g = geometry(class);
        let slab = self.slabs.get_mut(&at.page).ok_or_else(|| PmemError::Invariant {
            name: "alloc.free_index",
            detail: format!("slab at page {} is not indexed", at.page),
        })?;
        match how {
            FreeFlush::Persist => pool.persist(word_off, 8),
            FreeFlush::Defer => self.unflushed_frees.push(word_off),
            FreeFlush::Lazy => {
                let bit = 1u64 << ((word_off - page_offset(at.page) - RUN_HEADER_BYTES) / 8);
                if slab.lazy_words & bit == 0 {
                    if slab.lazy_words == 0 {
                        self.lazy_slabs.push_back(at.page);
                    }
                    slab.lazy_words |= bit;
                    self.lazy_count += 1;
                }
            }
        }
        slab.free += 1;
        let free = slab.free;
        let li = list(class, slab.cold);
        if free == 1 {
            // It was full: it has room again (a slab is in the partial set
            // exactly while it has a free block, so no lookup otherwise).
            self.partial[li].insert(at.page);
        }
        if free == g.blocks {
            // Keep one empty slab per class and arena for the next
            // allocations; give further ones back as free pages.
            if self.empty_slabs[li] >= 1 {
                if let Some(gone) = self.slabs.remove(&at.page) {
                    // Its lazy clears need no flush: the persisted release
                    // below makes its bitmap meaningless.
                    self.lazy_count -= gone.lazy_words.count_ones() as usize;
                }
                self.index_slab(at.page, class, false);
                self.partial[li].remove(&at.page);
                self.release_run(pool, at.page)?;
            } else {
                self.empty_slabs[li] += 1;
            }
        }
        Ok(())
    }

    /// Takes lazily cleared bitmap words off the masks of the slabs that
    /// have waited longest, slab by slab, until at least `want` are taken
    /// or none is left: their offsets, for the caller to flush.
    fn take_lazy_words(&mut self, want: usize) -> Vec<PoolOffset> {
        let mut out = Vec::new();
        while out.len() < want {
            let Some(page) = self.lazy_slabs.pop_front() else { break };
            if let Some(slab) = self.slabs.get_mut(&page) {
                let words = std::mem::take(&mut slab.lazy_words);
                self.lazy_count -= words.count_ones() as usize;
                out.extend(lazy_word_offsets(page, words));
            }
        }
        out
    }

    /// The allocated blocks of the runs starting at page `from` or later,
    /// run by run until at least `budget` blocks are listed: the blocks and
    /// the page to continue from (`None`: no run left).
    fn blocks_from(&self, pool: &Pool, from: u64, budget: usize) -> Result<(Vec<Block>, Option<u64>)> {
        let mut out = Vec::new();
        for (&page, run) in self.runs.range(from..) {
            if out.len() >= budget {
                return Ok((out, Some(page)));
            }
            self.run_blocks(pool, page, run, &mut out)?;
        }
        Ok((out, None))
    }

    fn run_blocks(&self, pool: &Pool, page: u64, run: &Run, out: &mut Vec<Block>) -> Result<()> {
        let run_off = page_offset(page);
        match run.kind {
            RunKind::Free => {}
            RunKind::Large => out.push((run_off + RUN_HEADER_BYTES, run.pages * PAGE_BYTES - RUN_HEADER_BYTES)),
            RunKind::Slab(class) => {
                let g = geometry(class);
                for w in 0..g.bitmap_words {
                    let mut bits = pool.load_u64(run_off + RUN_HEADER_BYTES + w * 8)?;
                    while bits != 0 {
                        let b = bits.trailing_zeros() as u64;
                        bits &= bits - 1;
                        out.push((run_off + g.first_block + (w * 64 + b) * g.block_bytes, g.block_bytes));
                    }
                }
            }
        }
        Ok(())
    }

    /// Every allocated block as (offset, usable size), in address order.
    /// Blocks set aside (`reserved`) are not listed: nothing owns them yet.
    fn blocks(&self, pool: &Pool) -> Result<Vec<(PoolOffset, u64)>> {
        let mut out = Vec::with_capacity(self.blocks as usize);
        for (&page, run) in &self.runs {
            self.run_blocks(pool, page, run, &mut out)?;
        }
        if self.reserved_blocks() > 0 {
            let set_aside: std::collections::HashSet<PoolOffset> = self.reserved.iter().flatten().copied().collect();
            out.retain(|(o, _)| !set_aside.contains(o));
        }
        Ok(out)
    }

    fn stats(&self, pool: &Pool) -> AllocStats {
        let heap_bytes = self.pages * PAGE_BYTES;
        let free_run_bytes: u64 = self.free_runs.iter().map(|(p, _)| p * PAGE_BYTES).sum();
        let largest = self.free_runs.iter().next_back().map_or(0, |(p, _)| p * PAGE_BYTES);
        let slab_free: u64 = self.slabs.values().map(|s| s.free * geometry(s.class).block_bytes).sum();
        let free_bytes = free_run_bytes + slab_free;
        let large_runs = self.runs.values().filter(|r| r.kind == RunKind::Large).count() as u64;
        AllocStats {
            pool_bytes: pool.size(),
            heap_bytes,
            used_bytes: self.used_bytes,
            allocated_blocks: self.blocks,
            free_bytes,
            free_run_bytes,
            largest_free_run_bytes: largest,
            free_runs: self.free_runs.len() as u64,
            slabs: self.slabs.len() as u64,
            large_runs,
            overhead_bytes: heap_bytes.saturating_sub(self.used_bytes + free_bytes),
            fragmentation: if free_run_bytes == 0 { 0.0 } else { 1.0 - largest as f64 / free_run_bytes as f64 },
            growable_bytes: pool.max_size().saturating_sub(pool.size()),
            reserve_bytes: pool.reserve_pages() * PAGE_BYTES,
        }
    }

    fn check(&self, pool: &Pool) -> CheckReport {
        let mut rep = CheckReport::default();
        let mut v = |name, detail: String| rep.violations.push(Violation { name, detail });
        let mut page = 0;
        let mut used = 0u64;
        let mut blocks = 0u64;
        let mut runs = 0u64;
        while page < self.pages {
            runs += 1;
            let (kind, pages) = match read_header(pool, page) {
                Ok(h) => h,
                Err(e) => {
                    v("alloc.run_header", e.to_string());
                    break;
                }
            };
            let expect = |back: u64| match kind {
                RunKind::Slab(class) => slab_page_code(back, class),
                _ => 0,
            };
            if let Some(back) = (0..pages.min(self.pages - page))
                .find(|&b| self.slab_pages.get((page + b) as usize).copied() != Some(expect(b)))
            {
                v("alloc.slab_index", format!("page {}: slab index disagrees with the run {kind:?}", page + back));
            }
            if self.runs.get(&page) != Some(&Run { pages, kind }) {
                v(
                    "alloc.run_header",
                    format!("page {page}: media has {kind:?}×{pages}, index has {:?}", self.runs.get(&page)),
                );
            }
            match kind {
                RunKind::Free => {
                    if !self.free_runs.contains(&(pages, page)) {
                        v("alloc.free_index", format!("free run at page {page} missing from the index"));
                    }
                }
                RunKind::Large => {
                    used += pages * PAGE_BYTES - RUN_HEADER_BYTES;
                    blocks += 1;
                }
                RunKind::Slab(class) if (class as usize) < CLASS_COUNT => match count_slab(pool, page, class) {
                    Ok(n) => {
                        let g = geometry(class);
                        used += n * g.block_bytes;
                        blocks += n;
                        let cold = match self.slabs.get(&page) {
                            Some(s) if s.free == g.blocks - n && s.class == class => s.cold,
                            other => {
                                v("alloc.slab_bitmap", format!("slab at page {page}: {n} blocks set, index {other:?}"));
                                false
                            }
                        };
                        if (n < g.blocks) != self.partial[list(class, cold)].contains(&page) {
                            v("alloc.free_index", format!("slab at page {page} partial-list membership wrong"));
                        }
                    }
                    Err(e) => v("alloc.slab_bitmap", e.to_string()),
                },
                RunKind::Slab(class) => v("alloc.run_header", format!("page {page}: bad class {class}")),
            }
            if pages == 0 || pages > self.pages - page {
                v("alloc.runs_cover_heap", format!("run at page {page} of {pages} pages overruns the heap"));
                break;
            }
            page += pages;
        }
        if runs as usize != self.runs.len() {
            v("alloc.runs_cover_heap", format!("walked {runs} runs, index has {}", self.runs.len()));
        }
        let free_indexed = self.runs.values().filter(|r| r.kind == RunKind::Free).count();
        if free_indexed != self.free_runs.len() {
            v(
                "alloc.free_index",
                format!("{} free runs indexed by size, {free_indexed} in the run map", self.free_runs.len()),
            );
        }
        let free_pages: u64 = self.free_runs.iter().map(|(p, _)| p).sum();
        if free_pages != self.free_pages {
            v("alloc.free_index", format!("free runs hold {free_pages} pages, the counter says {}", self.free_pages));
        }
        // The media also holds the blocks set aside (`reserved`).
        let (set_aside, set_aside_bytes) = (self.reserved_blocks() as u64, self.reserved_bytes());
        if used != self.used_bytes + set_aside_bytes || blocks != self.blocks + set_aside {
            v(
                "alloc.used_bytes",
                format!(
                    "media: {blocks} blocks / {used} bytes; counters: {} / {} and {set_aside} / {set_aside_bytes} set aside",
                    self.blocks, self.used_bytes
                ),
            );
        }
        if let Err(e) = pool.header() {
            v("header.valid", e.to_string());
        }
        rep.runs = runs;
        rep.blocks = blocks;
        rep
    }
}

#[derive(Clone, Copy, Debug)]
struct BlockAt {
    page: u64,
    slot: Option<(u8, PoolOffset, u64)>,
    usable: u64,
}

fn read_header(pool: &Pool, page: u64) -> Result<(RunKind, u64)> {
    let off = page_offset(page);
    let w = pool.load_u64(off)?;
    run::decode(page, w).ok_or_else(|| PmemError::corrupted(format!("run header at page {page}"), off))
}

/// Counts the set bits of a slab's bitmap, checking the bits past its last block.
fn count_slab(pool: &Pool, page: u64, class: u8) -> Result<u64> {
    let g = geometry(class);
    let base = bitmap_word(page_offset(page), 0);
    let mut used = 0;
    for w in 0..g.bitmap_words {
        let bits = pool.load_u64(base + w * 8)?;
        let valid = (g.blocks - w * 64).min(64);
        if valid < 64 && bits >> valid != 0 {
            return Err(PmemError::corrupted(
                format!("slab bitmap at page {page} has bits past its last block"),
                base + w * 8,
            ));
        }
        used += u64::from(bits.count_ones());
    }
    Ok(used)
}

impl Pool {
    /// Allocates a block of at least `size` bytes and returns its offset.
    ///
    /// The allocation is durable when this returns. The block's old contents
    /// are unspecified: write and persist what you need before linking it.
    /// Blocks are 16-byte aligned; large ones (over 32 KiB) 64-byte aligned.
    ///
    /// # Errors
    /// [`PmemError::PoolFull`] when neither free space nor growth room is left;
    /// [`PmemError::TooLarge`] above the format's limit.
    pub fn alloc(&self, size: u64) -> Result<PoolOffset> {
        self.alloc.lock().alloc(self, size, true, false)
    }

    /// [`Pool::alloc`] for a block that is written but rarely read (a
    /// backup copy): small ones come from slabs that hold only such blocks,
    /// so that the objects readers walk share pages (and TLB entries) with
    /// each other rather than with their copies. Kamino-Tx's full backup
    /// doubled the pages a read-only YCSB run touched and cost it 4–9 %
    /// against the undo log; see `docs/results/kamino.md`. Which slabs are
    /// cold is not recorded: after an open, new cold blocks start new
    /// slabs and old cold slabs take any block.
    ///
    /// # Errors
    /// As [`Pool::alloc`].
    pub fn alloc_cold(&self, size: u64) -> Result<PoolOffset> {
        self.alloc.lock().alloc(self, size, true, true)
    }

    /// [`Pool::alloc`] whose allocation becomes durable at the caller's next
    /// fence rather than before it returns (small blocks: the bitmap word is
    /// flushed, not fenced; large ones are fenced as always). For engines
    /// that fence before anything durable can reference the block — a
    /// commit store — and sweep leaks after a crash: a crash before that
    /// fence leaves the block free or leaked, never linked. Small blocks
    /// come from a bitmap word's worth set aside at once (flushed once for
    /// up to 64 of them; see the module docs): a crash leaks those not yet
    /// handed out, for the same sweep; [`Pool::alloc_stats`] and
    /// [`Pool::allocated_blocks`] do not count them.
    ///
    /// # Errors
    /// As [`Pool::alloc`].
    pub fn alloc_deferred(&self, size: u64) -> Result<PoolOffset> {
        self.alloc_unfenced(size, false)
    }

    /// [`Pool::alloc_cold`] made durable as [`Pool::alloc_deferred`]'s
    /// allocations are: at the caller's next fence.
    ///
    /// # Errors
    /// As [`Pool::alloc`].
    pub fn alloc_cold_deferred(&self, size: u64) -> Result<PoolOffset> {
        self.alloc_unfenced(size, true)
    }

    fn alloc_unfenced(&self, size: u64, cold: bool) -> Result<PoolOffset> {
        let (r, unflushed) = {
            let mut a = self.alloc.lock();
            let r = a.alloc(self, size, false, cold);
            (r, a.unflushed.take())
        };
        if let Some(word) = unflushed {
            self.flush(word, 8);
        }
        r
    }

    /// Frees a block returned by [`Pool::alloc`]; unlink it (persisted) first.
    ///
    /// # Errors
    /// [`PmemError::InvalidFree`] for anything that is not an allocated
    /// block's start (including a double free); the pool is unchanged then.
    pub fn free(&self, offset: PoolOffset) -> Result<()> {
        self.alloc.lock().free(self, offset, FreeFlush::Persist)
    }

    /// Frees several blocks, each as [`Pool::free`] would, with one fence
    /// for them all instead of one each (a batch of retired blocks). A free
    /// that a crash undoes before that fence leaves its block allocated and
    /// unreachable — a leak the recovery's sweep reclaims — never a block
    /// in use twice. Blocks that cannot be freed are skipped.
    ///
    /// # Errors
    /// The first block that could not be freed, as [`Pool::free`] reports
    /// it; every other block is freed all the same.
    pub fn free_many(&self, offsets: &[PoolOffset]) -> Result<()> {
        let r = self.free_many_deferred(offsets);
        self.fence();
        r
    }

    /// [`Pool::free_many`] without its fence: the frees become durable at
    /// the caller's next fence (an engine that commits again soon). Until
    /// then a crash leaves the blocks allocated and unreachable, a leak the
    /// recovery's sweep reclaims, as `free_many` promises before its
    /// fence. The bitmap words are flushed after the allocator's lock is
    /// released: a flush issued under it made the unlock's locked
    /// instruction wait for the write-back, as a fence would.
    ///
    /// # Errors
    /// As [`Pool::free_many`].
    pub fn free_many_deferred(&self, offsets: &[PoolOffset]) -> Result<()> {
        let (first, words) = {
            let mut a = self.alloc.lock();
            let first = a.free_each(self, offsets, FreeFlush::Defer);
            (first, std::mem::take(&mut a.unflushed_frees))
        };
        for w in words {
            self.flush(w, 8);
        }
        first
    }

    /// Frees several blocks without making the frees durable: each bitmap
    /// word is flushed when the pool closes (cleanly), or earlier when
    /// 2^16 words wait; a word a later allocation or free in it flushes
    /// carries the clear along. A crash may undo any of these frees,
    /// leaving the block allocated and unreachable: **only for engines
    /// whose recovery reclaims leaks** (the CDDS tree's sweep does, after
    /// every unclean open). Never a block in use twice: a lost clear only
    /// keeps a block allocated. What it saves is a flushed line per freed
    /// block (deleting a million keys frees a million records, whose
    /// clears share about 16,000 bitmap words).
    ///
    /// # Errors
    /// As [`Pool::free_many`].
    pub fn free_many_lazy(&self, offsets: &[PoolOffset]) -> Result<()> {
        let (first, spill) = {
            let mut a = self.alloc.lock();
            let first = a.free_each(self, offsets, FreeFlush::Lazy);
            // Slabs released since they were listed stay listed (their
            // masks went with them): a long list is emptied of them too.
            let spill = if a.lazy_count > LAZY_FREE_WORDS || a.lazy_slabs.len() > LAZY_FREE_WORDS {
                a.take_lazy_words(LAZY_FREE_WORDS / 8)
            } else {
                Vec::new()
            };
            (first, spill)
        };
        for w in spill {
            self.flush(w, 8);
        }
        first
    }

    /// Frees the blocks set aside for deferred allocations and flushes the
    /// bitmap words of every lazy free (the close, before its fence and
    /// clean flag).
    pub(crate) fn flush_lazy_frees(&self) {
        let words = {
            let mut a = self.alloc.lock();
            // No sweep follows a clean open: blocks set aside for deferred
            // allocations must be free on the media by then.
            let _ = a.release_reserved(self);
            a.take_lazy_words(usize::MAX)
        };
        for w in words {
            self.flush(w, 8);
        }
    }

    /// The usable size of an allocated block.
    ///
    /// # Errors
    /// [`PmemError::BadReference`] if `offset` is not an allocated block.
    pub fn usable_size(&self, offset: PoolOffset) -> Result<u64> {
        self.alloc.lock().locate(self, offset).map(|b| b.usable).map_err(|what| PmemError::BadReference {
            what,
            offset,
            len: 0,
        })
    }

    /// Every allocated block as (offset, usable size), in address order.
    ///
    /// # Errors
    /// [`PmemError::BadReference`] if the allocator's state is inconsistent.
    pub fn allocated_blocks(&self) -> Result<Vec<(PoolOffset, u64)>> {
        self.alloc.lock().blocks(self)
    }

    /// Heap usage and fragmentation. Walks every slab and run under the
    /// allocator's lock: for reports, not for a loop; [`Pool::used_bytes`]
    /// is the cheap one.
    pub fn alloc_stats(&self) -> AllocStats {
        self.alloc.lock().stats(self)
    }

    /// Bytes in allocated blocks ([`AllocStats::used_bytes`]), from a
    /// counter the allocator keeps: no walk. A server's cron sampling the
    /// peak use ten times a second walked a million-key pool's slabs under
    /// the allocator's lock with [`Pool::alloc_stats`] (1.3% of a busy
    /// server's time).
    pub fn used_bytes(&self) -> u64 {
        self.alloc.lock().used_bytes
    }

    /// [`Pool::used_bytes`], and the bytes of every block freed since the
    /// pool was opened (a counter that only grows), read together.
    pub fn used_and_freed_bytes(&self) -> (u64, u64) {
        let st = self.alloc.lock();
        (st.used_bytes, st.freed_bytes)
    }

    /// Grows the pool to `new_size` bytes now (it also grows by itself when
    /// an allocation needs room). A size at or below the current one is a no-op.
    ///
    /// # Errors
    /// [`PmemError::PoolFull`] above the maximum size (raise it with
    /// [`Pool::set_max_size`] and reopen), [`PmemError::Io`] if the file
    /// cannot be extended.
    pub fn grow(&self, new_size: u64) -> Result<()> {
        let mut st = self.alloc.lock();
        let new_size = new_size.div_ceil(PAGE_BYTES) * PAGE_BYTES;
        if new_size <= self.size() {
            return Ok(());
        }
        if new_size > self.growth_limit() {
            return Err(PmemError::PoolFull {
                requested: new_size - self.size(),
                size: self.size(),
                max_size: self.max_size(),
                filesystem_full: false,
            });
        }
        st.grow_to(self, new_size)
    }

    /// Checks the header and the allocator's invariants (persistent metadata
    /// against the DRAM index), reporting every violation by name.
    pub fn check(&self) -> CheckReport {
        self.alloc.lock().check(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PoolOptions;

    /// The prefetching of a batch of frees must fetch the word the free
    /// will read: the same word `locate` finds, for every size class.
    #[test]
    fn the_prefetched_bitmap_word_is_the_one_a_free_reads() {
        let pool = Pool::in_memory(&PoolOptions::with_size(64 << 20)).unwrap();
        let mut blocks = Vec::new();
        for &size in size_class::CLASS_SIZES.iter() {
            for _ in 0..70 {
                blocks.push(pool.alloc(size).unwrap());
            }
        }
        let large = pool.alloc(MAX_SLAB_BLOCK + 1).unwrap();
        let a = pool.alloc.lock();
        for &b in &blocks {
            let (_, word, _) = a.locate(&pool, b).unwrap().slot.expect("a slab block");
            assert_eq!(a.bitmap_word_of(b), Some(word), "block {b:#x}");
        }
        assert_eq!(a.bitmap_word_of(large), None);
        assert_eq!(a.bitmap_word_of(0), None);
    }
}
