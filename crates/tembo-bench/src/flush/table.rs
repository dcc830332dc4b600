//! The plain-text rendering of a [`FlushReport`].

use std::fmt::Write;

use super::FlushReport;

/// `64 B`, `4 KiB`, `64 MiB` for powers of two.
pub(crate) fn size_label(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 && b % (1 << 30) == 0 => format!("{} GiB", b >> 30),
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} B"),
    }
}

/// Renders the report as a table: one row per object size, for each
/// instruction millions of cache lines flushed per second and GB/s; then the
/// msync cost and the persist comparison.
pub fn render_table(r: &FlushReport) -> String {
    let mut s = String::new();
    let m = &r.machine;
    let _ = writeln!(
        s,
        "Flush throughput, MultCallFlushLRU (CDDS thesis §5.2, Fig. 5.1) — {} mode\n\
         machine: {} ({} CPUs), kernel {}\n\
         region: {} of {}, {} timed passes per object size (median pass shown)\n\
         each object: write every line; fence; flush every line; fence\n",
        r.mode,
        m.cpu_model,
        m.cpus,
        m.kernel,
        size_label(r.region_bytes),
        r.region_backing,
        r.passes
    );
    let _ = write!(s, "{:>12}", "object size");
    for sw in &r.sweeps {
        let _ = write!(s, " | {:>21}", format!("{} (+{})", sw.instruction, sw.fence));
    }
    let _ = write!(s, "\n{:>12}", "");
    for _ in &r.sweeps {
        let _ = write!(s, " | {:>11} {:>9}", "Mlines/s", "GB/s");
    }
    let _ = writeln!(s);
    let _ = writeln!(s, "{}", "-".repeat(12 + r.sweeps.len() * 24));
    let rows = r.sweeps.first().map_or(0, |sw| sw.points.len());
    for i in 0..rows {
        let _ = write!(s, "{:>12}", size_label(r.sweeps[0].points[i].object_bytes));
        for sw in &r.sweeps {
            match sw.points.get(i) {
                Some(p) => {
                    let _ = write!(s, " | {:>11.2} {:>9.2}", p.lines_per_sec / 1e6, p.gb_per_sec);
                }
                None => {
                    let _ = write!(s, " | {:>21}", "-");
                }
            }
        }
        let _ = writeln!(s);
    }
    let ms = &r.msync;
    let _ = writeln!(
        s,
        "\nmsync(MS_SYNC) of one dirty 4 KiB page, file in {} ({}): median {:.0} ns, p99 {:.0} ns \
         (min {:.0}, max {:.0}; {} calls)",
        ms.dir.display(),
        ms.filesystem,
        ms.median_ns,
        ms.p99_ns,
        ms.min_ns,
        ms.max_ns,
        ms.iterations
    );
    let p = &r.persist;
    let _ = writeln!(
        s,
        "persist one cache line, {} pool in {} ({}), {}:\n  \
         store + Pool::persist(off, 64): {:.1} ns   store + {} + fence (raw): {:.1} ns   \
         ratio {:.3} ({:+.1}%; median of {} repetitions × {} batches × {} ops)",
        p.mode,
        p.dir.display(),
        p.filesystem,
        p.instruction,
        p.pool_ns,
        p.instruction,
        p.raw_ns,
        p.ratio,
        (p.ratio - 1.0) * 100.0,
        p.repetitions,
        p.batches,
        p.batch_ops
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels() {
        assert_eq!(size_label(64), "64 B");
        assert_eq!(size_label(4096), "4 KiB");
        assert_eq!(size_label(64 << 20), "64 MiB");
        assert_eq!(size_label(1 << 30), "1 GiB");
    }
}
