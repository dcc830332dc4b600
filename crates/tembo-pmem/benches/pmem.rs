//! Micro-benchmarks of the pool's two hottest paths, with the goals they
//! are held to (docs/results/foundation.md):
//!
//! - `alloc_free_64`: one 64-byte `alloc` + `free` pair in a volatile pool
//!   (`Pool::in_memory`): the allocator's own cost, with no flush to hide
//!   behind. Goal: median under 100 ns, single-threaded.
//! - `persist_line/pool` vs `persist_line/raw`: one 8-byte store and a
//!   persist of its cache line on an `emulated` pool in `/dev/shm`, through
//!   `Pool::persist` and as the raw flush + fence on the same mapping.
//!   Goal: the pool within 10% of the raw sequence.
//!
//! Run: `cargo bench -p tembo-pmem --bench pmem`.

use std::hint::black_box;
use std::path::PathBuf;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use tembo_pmem::persist::{fence, flush_line};
use tembo_pmem::{FlushInstruction, ModeRequest, Pool, PoolOptions, CACHE_LINE_BYTES};

fn alloc_free(c: &mut Criterion) {
    let pool = Pool::in_memory(&PoolOptions::with_size(64 << 20)).expect("volatile pool");
    // Warm the size class: its slab exists before timing starts.
    let keep = pool.alloc(64).expect("alloc");
    c.bench_function("alloc_free_64", |b| {
        b.iter(|| {
            let off = pool.alloc(black_box(64)).expect("alloc");
            pool.free(black_box(off)).expect("free");
        })
    });
    pool.free(keep).expect("free");
}

struct ShmPool {
    pool: Option<Pool>,
    path: PathBuf,
}

impl Drop for ShmPool {
    fn drop(&mut self) {
        drop(self.pool.take());
        let _ = std::fs::remove_file(&self.path);
    }
}

fn persist_line(c: &mut Criterion) {
    let dir = PathBuf::from("/dev/shm");
    let dir = if dir.is_dir() { dir } else { std::env::temp_dir() };
    let path = dir.join(format!("tembo-pmem-bench-{}.pool", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let opts = PoolOptions { size: 256 << 10, mode: ModeRequest::Emulated, ..PoolOptions::default() };
    let shm = ShmPool { pool: Some(Pool::create(&path, &opts).expect("emulated pool")), path };
    let pool = shm.pool.as_ref().expect("pool");
    let instr = pool.flush_instruction();
    if instr == FlushInstruction::Unsupported {
        eprintln!("persist_line: this CPU has no flush instruction; skipped");
        return;
    }
    let off = pool.alloc(2 * CACHE_LINE_BYTES).expect("alloc").next_multiple_of(CACHE_LINE_BYTES);
    let line = pool.raw(off, CACHE_LINE_BYTES).expect("raw").as_ptr();

    let mut g = c.benchmark_group("persist_line");
    let mut i = 0u64;
    g.bench_function("pool", |b| {
        b.iter(|| {
            i += 1;
            // SAFETY: `line` points to 64 mapped bytes of the pool (checked by
            // `raw`), 8-byte aligned, written only here while the pool lives.
            unsafe { line.cast::<u64>().write_volatile(i) };
            pool.persist(black_box(off), CACHE_LINE_BYTES);
        })
    });
    g.bench_function("raw", |b| {
        b.iter(|| {
            i += 1;
            // SAFETY: as above.
            unsafe { line.cast::<u64>().write_volatile(i) };
            // SAFETY: `line` is mapped; `instr` is the pool's, checked available.
            unsafe { flush_line(instr, black_box(line)) };
            fence(instr);
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1))
        .sample_size(30);
    targets = alloc_free, persist_line
}
criterion_main!(benches);
