//! # tembo-bench — the evidence
//!
//! Tembo makes performance claims (a flush costs this much, a persist adds
//! nothing to the raw instructions, an allocation is this fast); this crate
//! holds the code that measures them, so that every figure in
//! `docs/results/` can be re-made by one command (`tembo bench …`) and read
//! as a table, a chart or JSON.
//!
//! ## Map
//! - [`flush`]: the CDDS thesis §5.2 flush benchmark ("MultCallFlushLRU",
//!   Figure 5.1) for every flush instruction this CPU has, the cost of one
//!   `msync` of a dirty page, and `Pool::persist` against the raw
//!   instruction sequence; its report as a table or an SVG chart.
//! - [`machine`]: what the numbers were measured on (CPU, kernel,
//!   filesystem), recorded with every report.
//! - [`progress`]: progress bars on stderr, hidden when it is not a terminal.
//! - `region` (private): page-aligned buffers, anonymous or mapped shared
//!   from a file; with `flush`, the only `unsafe` of the crate.
//! - [`summary`]: medians and percentiles.
//! - [`targets`]: the systems measured (Tembo's engines, `BTreeMap`, and
//!   with the `peers` feature LMDB, RocksDB, SQLite, Berkeley DB, redb and
//!   PMDK libpmemobj) behind one `Target` trait; over loopback, `tembo
//!   serve` and `redis-server` (AOF always / everysec / off), started for
//!   each run and driven through one RESP client (`targets::net`,
//!   `targets::resp`), so the same workloads measure the servers too.
//! - [`workload`]: the CDDS microbenchmark, YCSB A–F, the ordering study;
//!   all generated deterministically from a seed.
//! - [`heatmap`]: the thesis's chapter-6 write heat map, pages written per
//!   insert, counted by write-protecting the pool before each operation.
//! - [`report`]: runs a workload on every target (interleaved runs, fresh
//!   instances), medians, HdrHistogram percentiles, tables and JSON;
//!   [`plot`] draws them.
//! - [`txbench`]: the Kamino-Tx study — YCSB with many writer threads on
//!   `kamino`, `kamino-dynamic`, `undo`, `cdds` (and PMDK), and the
//!   paper's worst case.

pub mod churn;
pub mod flush;
pub mod heatmap;
pub mod machine;
pub mod plot;
pub mod progress;
pub mod recovery;
mod region;
pub mod report;
pub mod summary;
pub mod targets;
pub mod txbench;
pub mod workload;
