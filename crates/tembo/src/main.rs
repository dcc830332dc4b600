//! `tembo`: the command-line tool.
//!
//! One binary for everything a user does by hand: create and inspect pools
//! (`tembo pool …`) and run the measurements (`tembo bench …`); later the
//! server, crash tests and dump/load. It is a thin shell: parsing, messages
//! and exit codes here, all work in the library crates. It has no `unsafe`.
//!
//! Exit codes: 0 success; 1 failure (an error, or violations found by
//! `pool check`); 2 bad usage (from the argument parser).

#![forbid(unsafe_code)]

mod bench_cmd;
mod bench_kamino_cmd;
mod bench_sizes_cmd;
mod bench_targets_cmd;
mod crashtest_cmd;
mod pool_cmd;
mod rdb_cmd;
mod serve_cmd;
mod size;
mod stat;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// mimalloc instead of glibc's malloc: the server allocates and frees a few
/// small buffers per request (arguments, replies, keys), and glibc's
/// `malloc`/`free` were ~10% of its time under pipelined writes; the
/// benchmark's targets share the same allocator, so ratios stay fair.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Tembo: a key-value store for persistent memory.
#[derive(Debug, Parser)]
#[command(
    name = "tembo",
    version,
    about = "Tembo: a key-value store for persistent memory",
    long_about = "Tembo: a key-value store for persistent memory.\n\n\
        Data lives in one pool file, mapped into memory and made durable with cache-line \
        flushes. Start with `tembo serve`: a Redis-compatible server on 127.0.0.1:6379 whose data lives in ./tembo-data/tembo.pool (created on first run).",
    after_help = "Examples:\n  tembo serve\n  tembo serve --port 7000 --pool /dev/shm/t.pool --pool-size 1G\n  tembo pool init\n  tembo pool create /dev/shm/t.pool --size 1G\n  \
                  tembo pool stat /dev/shm/t.pool --json\n  tembo bench flush --quick\n  \
                  tembo bench plot-flush docs/results/flush.json"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the Redis-compatible server (127.0.0.1:6379, pool ./tembo-data/tembo.pool by default)
    Serve(serve_cmd::ServeArgs),
    /// Create, inspect, check and grow pool files
    #[command(subcommand)]
    Pool(pool_cmd::PoolCommand),
    /// Run benchmarks and print their tables; draw their charts
    #[command(subcommand)]
    Bench(bench_cmd::BenchCommand),
    /// Move data between pools and Redis's RDB files (export, import, inspect)
    #[command(subcommand)]
    Rdb(rdb_cmd::RdbCommand),
    /// Crash the engine at every fence of random workloads on the crash
    /// simulator and check what recovery gives back
    Crashtest(crashtest_cmd::CrashtestArgs),
}

fn main() -> ExitCode {
    // The bench's `tembo-serve` target starts this same executable (set
    // before parsing: `--targets all` asks which targets can start).
    if let Ok(me) = std::env::current_exe() {
        tembo_bench::targets::net::set_tembo_binary(me);
    }
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve(args) => serve_cmd::run(args),
        Command::Pool(cmd) => pool_cmd::run(cmd),
        Command::Bench(cmd) => bench_cmd::run(cmd).map(|()| ExitCode::SUCCESS),
        Command::Crashtest(args) => crashtest_cmd::run_cmd(args),
        Command::Rdb(cmd) => rdb_cmd::run(cmd).map(|()| ExitCode::SUCCESS),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("tembo: error: {}", describe(&e));
            ExitCode::FAILURE
        }
    }
}

/// The error and its causes joined by ": ", each cause left out when the
/// message before it already says it (the pool's errors put their OS
/// error in their own message and also report it as their source).
fn describe(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_error_chain_is_told_once() {
        let io = std::io::Error::from_raw_os_error(28);
        let inner = anyhow::Error::new(io).context("reserving 8 bytes: No space left on device (os error 28)");
        let e = inner.context("tembo serve: pool p");
        assert_eq!(
            super::describe(&e),
            "tembo serve: pool p: reserving 8 bytes: No space left on device (os error 28)"
        );
    }
}
