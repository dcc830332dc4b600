//! Persist primitives, ordering modes, write statistics and named roots.
//!
//! Proves that `flush`/`fence`/`persist` count what they do in each ordering
//! mode, that `OrderedWrites` persists once per cache line crossed in `fast`
//! mode and once per store in `full` mode, that `none` never flushes, that
//! the flush instruction can be forced, that named roots survive reopen and
//! are replaced with one atomic store, and that a 512 MiB block can be had.

use rand::SeedableRng;
use tembo_pmem::sim::CrashPolicy;
use tembo_pmem::{FlushInstruction, OrderedWrites, OrderingMode, Pool, PoolOptions, CACHE_LINE_BYTES};

fn sim_pool(ordering: OrderingMode) -> Pool {
    Pool::simulated(&PoolOptions { size: 256 << 10, ordering, ..PoolOptions::default() }).unwrap()
}

fn rng() -> rand_chacha::ChaCha8Rng {
    rand_chacha::ChaCha8Rng::seed_from_u64(1)
}

#[test]
fn persist_counts_lines_and_fences() {
    let pool = sim_pool(OrderingMode::Fast);
    let off = pool.alloc(256).unwrap();
    pool.reset_write_stats();
    pool.persist(off, 256);
    let s = pool.write_stats();
    assert_eq!(s.flush_count, 256 / CACHE_LINE_BYTES);
    assert_eq!(s.fence_count, 1);
    assert_eq!(s.persisted_bytes, 256);
    pool.persist(off + 60, 8); // straddles two lines
    assert_eq!(pool.write_stats().since(&s).flush_count, 2);
}

#[test]
fn ordering_none_never_flushes_or_fences() {
    let pool = sim_pool(OrderingMode::None);
    let off = pool.alloc(1024).unwrap();
    pool.reset_write_stats();
    pool.fill(off, 1024, 7).unwrap();
    pool.persist(off, 1024);
    let mut w = OrderedWrites::new(&pool);
    for i in 0..16 {
        w.wrote(off + i * 64, 64);
    }
    w.finish();
    assert_eq!(pool.write_stats().flush_count, 0);
    assert_eq!(pool.write_stats().fence_count, 0);
    let img = pool.simulator().unwrap().crash_image(&pool, CrashPolicy::None, &mut rng());
    assert!(img[off as usize..off as usize + 1024].iter().all(|b| *b != 7), "nothing reached the media");
}

#[test]
fn ordered_writes_fast_persists_once_per_line_crossed() {
    let pool = sim_pool(OrderingMode::Fast);
    let off = pool.alloc(512).unwrap();
    pool.reset_write_stats();
    let mut w = OrderedWrites::new(&pool);
    // A right-to-left shift of 16-byte entries over 8 lines: 32 stores.
    for i in (0..32u64).rev() {
        pool.write(off + i * 16, &[1u8; 16]).unwrap();
        w.wrote(off + i * 16, 16);
    }
    w.finish();
    let s = pool.write_stats();
    assert_eq!(s.flush_count, 512 / CACHE_LINE_BYTES, "one flush per line");
    assert_eq!(s.fence_count, 512 / CACHE_LINE_BYTES);
}

#[test]
fn ordered_writes_full_persists_every_store() {
    let pool = sim_pool(OrderingMode::Full);
    let off = pool.alloc(512).unwrap();
    pool.reset_write_stats();
    let mut w = OrderedWrites::new(&pool);
    for i in (0..32u64).rev() {
        pool.write(off + i * 16, &[1u8; 16]).unwrap();
        w.wrote(off + i * 16, 16);
    }
    w.finish();
    assert_eq!(pool.write_stats().fence_count, 32);
}

#[test]
fn persisted_data_reaches_media_and_unpersisted_may_not() {
    let pool = sim_pool(OrderingMode::Fast);
    let a = pool.alloc(64).unwrap();
    let b = pool.alloc(64).unwrap();
    pool.write(a, &[0xAA; 64]).unwrap();
    pool.persist(a, 64);
    pool.write(b, &[0xBB; 64]).unwrap();
    let sim = pool.simulator().unwrap();
    let none = sim.crash_image(&pool, CrashPolicy::None, &mut rng());
    assert!(none[a as usize..a as usize + 64].iter().all(|x| *x == 0xAA));
    assert!(none[b as usize..b as usize + 64].iter().all(|x| *x != 0xBB));
    let all = sim.crash_image(&pool, CrashPolicy::All, &mut rng());
    assert!(all[b as usize..b as usize + 64].iter().all(|x| *x == 0xBB));
    Pool::from_image(&none, &PoolOptions::default()).unwrap();
    Pool::from_image(&all, &PoolOptions::default()).unwrap();
}

#[test]
fn flush_instruction_can_be_forced_to_any_available_one() {
    for instr in FlushInstruction::ALL.into_iter().filter(|i| i.is_available()) {
        let opts = PoolOptions { flush: Some(instr), size: 128 << 10, ..PoolOptions::default() };
        let path = std::env::temp_dir().join(format!("tembo-persist-{}-{}.pool", instr, std::process::id()));
        let _ = std::fs::remove_file(&path);
        let pool = Pool::create(&path, &opts).unwrap();
        assert_eq!(pool.flush_instruction(), instr);
        let off = pool.alloc(4096).unwrap();
        pool.fill(off, 4096, 3).unwrap();
        pool.persist(off, 4096);
        drop(pool);
        let pool = Pool::open(&path, &opts).unwrap();
        assert!(!pool.opened_unclean());
        let mut buf = vec![0u8; 4096];
        pool.read(off, &mut buf).unwrap();
        assert!(buf.iter().all(|b| *b == 3));
        drop(pool);
        std::fs::remove_file(&path).unwrap();
    }
    assert!("nope".parse::<FlushInstruction>().is_err());
}

#[test]
fn roots_survive_reopen_and_replace_atomically() {
    let pool = sim_pool(OrderingMode::Fast);
    let a = pool.alloc(64).unwrap();
    let b = pool.alloc(64).unwrap();
    pool.set_root("cdds", a).unwrap();
    pool.set_root("kamino", b).unwrap();
    pool.set_root("cdds", b).unwrap();
    assert_eq!(pool.root("cdds"), Some(b));
    assert_eq!(pool.roots().len(), 2);
    assert!(pool.remove_root("kamino").unwrap());
    assert!(!pool.remove_root("kamino").unwrap());
    assert!(pool.set_root("x", a).is_err(), "one-byte names are refused");
    assert!(pool.set_root("a-name-longer-than-24-bytes", a).is_err());
    assert!(pool.set_root("ok", 1).is_err(), "roots point into the heap");
    let img = pool.simulator().unwrap().crash_image(&pool, CrashPolicy::None, &mut rng());
    let re = Pool::from_image(&img, &PoolOptions::default()).unwrap();
    assert_eq!(re.root("cdds"), Some(b));
    assert_eq!(re.root("kamino"), None);
    assert!(re.opened_unclean());
    for i in 0..31 {
        re.set_root(&format!("r{i:02}"), a).unwrap();
    }
    assert!(re.set_root("one-too-many", a).is_err());
}

#[test]
fn alloc_of_512_mib_succeeds_and_is_reused_in_place() {
    let opts = PoolOptions { size: 1 << 20, max_size: Some(1100 << 20), ..PoolOptions::default() };
    let pool = Pool::in_memory(&opts).unwrap();
    let big = pool.alloc(512 << 20).unwrap();
    assert!(pool.usable_size(big).unwrap() >= 512 << 20);
    assert_eq!(big % 64, 0);
    pool.store_u64(big + (512 << 20) - 8, 42).unwrap();
    let small = pool.alloc(16).unwrap();
    pool.free(big).unwrap();
    let again = pool.alloc(512 << 20).unwrap();
    assert_eq!(again, big, "freed pages are reused in place");
    pool.free(small).unwrap();
    pool.free(again).unwrap();
    assert_eq!(pool.alloc_stats().allocated_blocks, 0);
    assert!(pool.check().is_ok());
    assert!(matches!(pool.alloc(2 << 30), Err(tembo_pmem::PmemError::PoolFull { .. })));
}
