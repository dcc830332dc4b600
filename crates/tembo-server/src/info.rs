//! INFO: the sections Redis tools read, in Redis 7.0's order and words,
//! filled with Tembo's real figures.
//!
//! Fields for machinery Tembo does not have — forks, the AOF, replicas,
//! eviction, defragmentation, I/O threads — carry the values a Redis
//! without that activity shows (`0`, `-1`, `ok`), so that monitoring tools
//! parse the reply as they parse Redis's; they are never estimates of
//! something Tembo does. Tembo adds its own fields (the pool, the engine,
//! group commits) where they say more.

use std::fmt::Display;

use crate::cmd::{CmdError, CmdResult};
use crate::exec::Ctx;
use crate::net::Net;
use crate::proc_stats;
use crate::resp::Reply;
use crate::stats::Rate;

/// Sections in Redis's order, with their titles.
const SECTIONS: &[(&str, &str)] = &[
    ("server", "Server"),
    ("clients", "Clients"),
    ("memory", "Memory"),
    ("persistence", "Persistence"),
    ("stats", "Stats"),
    ("replication", "Replication"),
    ("cpu", "CPU"),
    ("modules", "Modules"),
    ("commandstats", "Commandstats"),
    ("errorstats", "Errorstats"),
    ("latencystats", "Latencystats"),
    ("cluster", "Cluster"),
    ("keyspace", "Keyspace"),
];

/// What plain INFO (and `INFO default`) shows: all but the per-command sections.
fn in_default(name: &str) -> bool {
    !matches!(name, "commandstats" | "latencystats")
}

/// INFO [section ...]
pub fn info(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    // A backup that has just finished is reported as finished.
    cx.st.bgsave.poll(cx.st.store.db());
    let mut wanted: Vec<String> = Vec::new();
    let explicit = a.len() > 1;
    for s in &a[1..] {
        let s = String::from_utf8_lossy(s).to_ascii_lowercase();
        match s.as_str() {
            "all" | "everything" => wanted.extend(SECTIONS.iter().map(|x| x.0.to_string())),
            "default" => wanted.extend(SECTIONS.iter().filter(|x| in_default(x.0)).map(|x| x.0.to_string())),
            _ => wanted.push(s),
        }
    }
    if wanted.is_empty() {
        wanted = SECTIONS.iter().filter(|x| in_default(x.0)).map(|x| x.0.to_string()).collect();
    }
    let mut out = String::new();
    for (name, title) in SECTIONS {
        if !wanted.iter().any(|w| w == name) {
            continue;
        }
        if !out.is_empty() {
            out.push_str("\r\n");
        }
        let body = section(cx, name, explicit).map_err(|e| CmdError::err(format!("INFO {name}: {e}")))?;
        out.push_str(&format!("# {title}\r\n"));
        out.push_str(&body);
    }
    Ok(Reply::Verbatim(out))
}

fn section(cx: &mut Ctx, name: &str, explicit: bool) -> Result<String, tembo_store::DbError> {
    let mut s = String::new();
    let mut kv = |k: &str, v: &dyn Display| s.push_str(&format!("{k}:{v}\r\n"));
    let st = &cx.st;
    let inert = |name: &str| crate::cmd::inert_value(&st.inert, name).unwrap_or("").to_string();
    match name {
        "server" => {
            let up = st.stats.started.elapsed().as_secs();
            let now_us = crate::exec::now_ms() * 1000;
            kv("redis_version", &crate::REDIS_VERSION);
            kv("redis_git_sha1", &"00000000");
            kv("redis_git_dirty", &0);
            kv("tembo_version", &env!("CARGO_PKG_VERSION"));
            kv("redis_mode", &"standalone");
            kv("os", &proc_stats::os());
            kv("arch_bits", &64);
            kv("monotonic_clock", &"POSIX clock_gettime");
            kv("multiplexing_api", &if cfg!(target_os = "linux") { "epoll" } else { "tokio" });
            kv("process_id", &std::process::id());
            kv("process_supervised", &"no");
            kv("run_id", &st.run_id);
            kv("tcp_port", &st.cfg.port);
            kv("server_time_usec", &now_us);
            kv("uptime_in_seconds", &up);
            kv("uptime_in_days", &(up / 86400));
            // The cron runs every 100 ms whatever `hz` says.
            kv("hz", &10);
            kv("configured_hz", &inert("hz"));
            kv("lru_clock", &((now_us / 1_000_000) & ((1 << 24) - 1)));
            kv("executable", &std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_default());
            kv("config_file", &st.config_file);
            kv("io_threads_active", &0);
            kv("engine", &st.store.db().engine());
        }
        "clients" => {
            kv("connected_clients", &(st.clients.len() + 1));
            kv("cluster_connections", &0);
            kv("maxclients", &st.shared.maxclients());
            kv("blocked_clients", &(st.blocking.len() + st.postponed_count()));
            let me = cx.client.tracking.on as usize;
            kv("tracking_clients", &(st.clients.values().filter(|c| c.tracking.on).count() + me));
            kv("clients_in_timeout_table", &st.blocking.timed());
        }
        "memory" => {
            let pool = st.store.db().pool();
            let alloc = pool.alloc_stats();
            let used = alloc.used_bytes;
            let peak = st.stats.peak_memory.max(used);
            let rss = proc_stats::rss_bytes();
            let system = proc_stats::total_memory();
            let vm = st.scripts.as_ref().map_or(0, |e| e.vm_bytes());
            kv("used_memory", &used);
            kv("used_memory_human", &human(used));
            kv("used_memory_rss", &rss);
            kv("used_memory_rss_human", &human(rss));
            kv("used_memory_peak", &peak);
            kv("used_memory_peak_human", &human(peak));
            kv("used_memory_peak_perc", &format!("{:.2}%", percent(used, peak)));
            kv("total_system_memory", &system);
            kv("total_system_memory_human", &human(system));
            kv("used_memory_lua", &vm);
            kv("used_memory_lua_human", &human(vm as u64));
            kv("number_of_cached_scripts", &st.scripts.as_ref().map_or(0, |e| e.len()));
            kv("number_of_functions", &st.scripts.as_ref().map_or(0, |e| e.function_count()));
            kv("number_of_libraries", &st.scripts.as_ref().map_or(0, |e| e.libraries().count()));
            kv("used_memory_scripts", &st.scripts.as_ref().map_or(0, |e| e.source_bytes()));
            // DRAM the sorted sets' rank indexes hold (a cache; see `ranks`).
            kv("rank_index_bytes", &st.store.rank_index_bytes());
            kv("pool_size", &pool.size());
            kv("pool_size_human", &human(pool.size()));
            kv("pool_max_size", &pool.max_size());
            kv("pool_free_bytes", &alloc.free_bytes);
            // Pages of the pool the kernel maps as 2 MiB pages (a tmpfs
            // mounted with huge=advise): fewer TLB misses. Reading it walks
            // the page tables, so only when INFO names its sections (not on
            // every monitoring poll of plain INFO).
            if explicit {
                if let Some(huge) = pool.huge_page_bytes() {
                    kv("pool_huge_page_bytes", &huge);
                }
            }
            // Redis leaves replication and AOF buffers out of the count it
            // evicts by; Tembo counts the pool alone.
            kv("mem_not_counted_for_evict", &0);
            kv("maxmemory", &st.maxmemory.limit);
            kv("maxmemory_human", &human(st.maxmemory.limit));
            kv("maxmemory_policy", &st.maxmemory.policy.name());
            kv("mem_allocator", &"tembo-pmem");
            kv("active_defrag_running", &0);
            kv("lazyfree_pending_objects", &st.lazyfree_pending);
            kv("lazyfreed_objects", &st.stats.lazyfreed);
        }
        "persistence" => {
            let mode = st.store.db().mode();
            kv("loading", &0);
            kv("async_loading", &0);
            kv("pool_path", &st.store.db().path().display());
            kv("pool_mode", &mode);
            kv("pool_guarantee", &mode.guarantee());
            kv("durability", &"every write is durable before its reply (group commit)");
            kv("rdb_changes_since_last_save", &0);
            kv("rdb_bgsave_in_progress", &u8::from(st.bgsave.in_progress()));
            kv("rdb_last_save_time", &st.bgsave.last_save());
            kv("last_commit_time", &st.last_commit);
            kv("rdb_last_bgsave_status", &if st.bgsave.last_ok() { "ok" } else { "err" });
            kv("rdb_last_bgsave_time_sec", &st.bgsave.last_secs());
            kv("rdb_current_bgsave_time_sec", &st.bgsave.current_secs());
            kv("rdb_saves", &st.bgsave.finished());
            kv("backup_path", &st.cfg.backup_file().display());
            kv("backup_pairs_copied", &st.bgsave.current_keys());
            kv("backup_last_pairs", &st.bgsave.last_keys());
            kv("backup_last_success_time", &st.bgsave.last_success_unix());
            kv("aof_enabled", &0);
            kv("aof_rewrite_in_progress", &0);
            kv("aof_rewrite_scheduled", &0);
            kv("aof_last_rewrite_time_sec", &-1);
            kv("aof_current_rewrite_time_sec", &-1);
            kv("aof_last_bgrewrite_status", &"ok");
            kv("aof_last_write_status", &"ok");
            kv("module_fork_in_progress", &0);
            kv("commits", &st.stats.commits);
            kv("committed_writes", &st.stats.committed_writes);
            kv("reclaimed_elements", &st.stats.reclaimed);
            // What durability has cost since the pool was opened: cache
            // lines written back, fences, and (in msync mode) msync calls,
            // each of which waits for the disk.
            let w = st.store.db().pool().write_stats();
            kv("pool_flushed_lines", &w.flush_count);
            kv("pool_fences", &w.fence_count);
            kv("pool_msyncs", &w.msync_count);
            let r = st.store.db().recovery_progress();
            kv("last_open_recovered", &if r.ran { 1 } else { 0 });
            kv("recovery_in_progress", &if r.ran && !r.finished { 1 } else { 0 });
        }
        "stats" => {
            let rates = &st.stats.rates;
            kv("total_connections_received", &st.stats.connections);
            kv("total_commands_processed", &st.stats.commands);
            // Each a scan of a whole sorted set (`ranks`).
            kv("rank_index_builds", &st.store.rank_index_builds());
            kv("instantaneous_ops_per_sec", &(rates.get(Rate::Ops).round() as u64));
            kv("total_net_input_bytes", &st.shared.net(Net::InBytes));
            kv("total_net_output_bytes", &st.shared.net(Net::OutBytes));
            kv("instantaneous_input_kbps", &format!("{:.2}", rates.get(Rate::NetIn) / 1024.0));
            kv("instantaneous_output_kbps", &format!("{:.2}", rates.get(Rate::NetOut) / 1024.0));
            kv("rejected_connections", &st.shared.net(Net::Rejected));
            kv("sync_full", &0);
            kv("sync_partial_ok", &0);
            kv("sync_partial_err", &0);
            kv("expired_keys", &st.stats.expired_keys);
            kv("expired_time_cap_reached_count", &st.stats.expire_cap_reached);
            kv("expire_cycle_cpu_milliseconds", &(st.stats.expire_cycle_us / 1000));
            kv("evicted_keys", &st.stats.evicted_keys);
            kv("evicted_clients", &0);
            kv("keyspace_hits", &st.stats.hits);
            kv("keyspace_misses", &st.stats.misses);
            kv("pubsub_channels", &st.pubsub.channel_count());
            kv("pubsub_patterns", &st.pubsub.pattern_count());
            kv("pubsubshard_channels", &st.pubsub.shard_count());
            kv("latest_fork_usec", &0);
            kv("total_forks", &0);
            kv("migrate_cached_sockets", &0);
            let (keys, items, prefixes) = st.tracking.totals();
            kv("tracking_total_keys", &keys);
            kv("tracking_total_items", &items);
            kv("tracking_total_prefixes", &prefixes);
            kv("total_error_replies", &st.stats.errors);
            kv("total_reads_processed", &st.shared.net(Net::Reads));
            kv("total_writes_processed", &st.shared.net(Net::Writes));
            let denied = &st.acl.log.denied;
            kv("acl_access_denied_auth", &denied[0]);
            kv("acl_access_denied_cmd", &denied[1]);
            kv("acl_access_denied_key", &denied[2]);
            kv("acl_access_denied_channel", &denied[3]);
        }
        "replication" => {
            kv("role", &"master");
            kv("connected_slaves", &0);
            kv("master_failover_state", &"no-failover");
            kv("master_replid", &st.replid);
            kv("master_replid2", &"0".repeat(40));
            kv("master_repl_offset", &0);
            kv("second_repl_offset", &-1);
            kv("repl_backlog_active", &0);
            kv("repl_backlog_size", &inert("repl-backlog-size"));
            kv("repl_backlog_first_byte_offset", &0);
            kv("repl_backlog_histlen", &0);
            // Tembo's own: RDB snapshots sent to `redis-cli --rdb` and the like.
            kv("rdb_snapshot_transfers_running", &st.syncs.running());
            kv("rdb_snapshot_transfers_started", &st.syncs.started);
        }
        "cpu" => {
            let (user, sys, child_user, child_sys) = proc_stats::cpu_times();
            let (main_user, main_sys) = proc_stats::thread_cpu_times();
            kv("used_cpu_sys", &format!("{sys:.6}"));
            kv("used_cpu_user", &format!("{user:.6}"));
            kv("used_cpu_sys_children", &format!("{child_sys:.6}"));
            kv("used_cpu_user_children", &format!("{child_user:.6}"));
            kv("used_cpu_sys_main_thread", &format!("{main_sys:.6}"));
            kv("used_cpu_user_main_thread", &format!("{main_user:.6}"));
        }
        "commandstats" => {
            for (name, c) in st.stats.per_command_sorted() {
                let usec = c.nanos / 1000;
                let per = if c.calls == 0 { 0.0 } else { c.nanos as f64 / 1000.0 / c.calls as f64 };
                kv(
                    &format!("cmdstat_{name}"),
                    &format!(
                        "calls={},usec={},usec_per_call={per:.2},rejected_calls={},failed_calls={}",
                        c.calls, usec, c.rejected, c.failed
                    ),
                );
            }
        }
        "errorstats" => {
            for (code, n) in &st.stats.error_codes {
                kv(&format!("errorstat_{code}"), &format!("count={n}"));
            }
        }
        "latencystats" => {
            let wanted = parse_percentiles(&inert("latency-tracking-info-percentiles")).unwrap_or_default();
            for (name, c) in st.stats.per_command_sorted() {
                let Some(h) = c.hdr.as_ref().filter(|h| !h.is_empty()) else { continue };
                let shown: Vec<String> = wanted
                    .iter()
                    .map(|p| {
                        let usec = h.value_at_quantile(p / 100.0) as f64 / 1000.0;
                        format!("p{}={usec:.3}", fmt_percentile(*p))
                    })
                    .collect();
                kv(&format!("latency_percentiles_usec_{name}"), &shown.join(","));
            }
        }
        "cluster" => kv("cluster_enabled", &0),
        "keyspace" => {
            // Numbered as clients select them (SWAPDB may have exchanged two).
            for db in 0..st.keys.len() {
                let stored = st.phys(db as u8) as usize;
                let n = st.key_count(stored);
                if n > 0 {
                    kv(&format!("db{db}"), &format!("keys={n},expires={},avg_ttl=0", st.expire_count(stored)));
                }
            }
        }
        _ => {}
    }
    Ok(s)
}

/// `latency-tracking-info-percentiles`: percentiles between 0 and 100,
/// separated by spaces (an empty list shows none); Redis's words for a bad one.
pub fn parse_percentiles(v: &str) -> Result<Vec<f64>, &'static str> {
    v.split_whitespace()
        .map(|w| {
            let p: f64 = w.parse().map_err(|_| "Invalid latency-tracking-info-percentiles parameters")?;
            if !(0.0..=100.0).contains(&p) {
                return Err("latency-tracking-info-percentiles parameters should sit between [0.0,100.0]");
            }
            Ok(p)
        })
        .collect()
}

/// A percentile as Redis prints it: `50`, `99.9` (no trailing zeros).
pub fn fmt_percentile(p: f64) -> String {
    let s = format!("{p:.6}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        100.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

fn human(b: u64) -> String {
    let units = ["B", "K", "M", "G", "T"];
    let mut v = b as f64;
    let mut i = 0;
    while v >= 1024.0 && i + 1 < units.len() {
        v /= 1024.0;
        i += 1;
    }
    format!("{v:.2}{}", units[i])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_parse_and_print_as_redis() {
        assert_eq!(parse_percentiles("50 99 99.9"), Ok(vec![50.0, 99.0, 99.9]));
        assert_eq!(parse_percentiles(""), Ok(vec![]));
        assert!(parse_percentiles("50 101").unwrap_err().contains("between [0.0,100.0]"));
        assert!(parse_percentiles("abc").unwrap_err().contains("Invalid"));
        assert_eq!(fmt_percentile(50.0), "50");
        assert_eq!(fmt_percentile(99.9), "99.9");
        assert_eq!(fmt_percentile(50.5), "50.5");
    }
}
