//! Throughput of batches whose keys ascend, the shape of a server's group
//! commit: how the engine's descents starting on the batch's previous path
//! (`tembo-cdds`, `write.rs`: `finger_start`) pay off.
//!
//! ```sh
//! cargo run --release -p tembo-store --example sorted_batches -- /dev/shm 100
//! ```
//!
//! Two phases on a fresh pool in DIR: 1M random 25-byte keys × 256 B put
//! in sorted batches of BATCH (neighbours in a batch are ~1/BATCH of the
//! key space apart, so only the upper levels are shared), then 100,000
//! items of ten neighbouring sub-keys × 100 B each (a hash's fields, as
//! the server encodes them), BATCH items per sorted batch. Prints pairs
//! written per second for each phase.

use std::time::Instant;

use tembo_store::{Db, Options, WriteBatch};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(dir), Some(batch)) = (args.next(), args.next()) else {
        eprintln!("usage: sorted_batches DIR BATCH   (e.g. /dev/shm 100)");
        std::process::exit(2);
    };
    let batch: usize = batch.parse()?;
    if batch == 0 {
        return Err("BATCH must be at least 1".into());
    }
    let path = std::path::Path::new(&dir).join("sorted-batches-example.pool");
    if path.exists() {
        std::fs::remove_file(&path)?;
    }
    let db = Db::create(&path, &Options::default())?;
    let mut x = 88_172_645_463_325_252u64;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let value = vec![7u8; 256];

    let keys = 1_000_000usize.div_ceil(batch) * batch;
    let t = Instant::now();
    for _ in 0..keys / batch {
        let mut ks: Vec<Vec<u8>> = (0..batch).map(|_| format!("{:025}", rnd() % 10_000_000_000).into_bytes()).collect();
        ks.sort();
        let mut b = WriteBatch::with_capacity(batch);
        for k in ks {
            b.put(k, value.clone());
        }
        db.write(&b)?;
    }
    let load = keys as f64 / t.elapsed().as_secs_f64();

    let items = 100_000usize.div_ceil(batch) * batch;
    let t = Instant::now();
    for _ in 0..items / batch {
        let mut ks: Vec<Vec<u8>> = Vec::with_capacity(batch * 10);
        for _ in 0..batch {
            let item = rnd() % 10_000_000_000;
            ks.extend((0..10).map(|f| format!("S{item:020}:field{f}").into_bytes()));
        }
        ks.sort();
        let mut b = WriteBatch::with_capacity(ks.len());
        for k in ks {
            b.put(k, value[..100].to_vec());
        }
        db.write(&b)?;
    }
    let sub_keys = (items * 10) as f64 / t.elapsed().as_secs_f64();
    println!("batch {batch}: random keys {load:.0} puts/s, neighbouring sub-keys {sub_keys:.0} puts/s");
    db.close()?;
    std::fs::remove_file(&path)?;
    Ok(())
}
