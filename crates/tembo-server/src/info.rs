//! INFO: the sections Redis tools read, filled with Tembo's real figures.

use crate::cmd::{CmdError, CmdResult};
use crate::exec::Ctx;
use crate::resp::Reply;

const DEFAULT: &[&str] = &["server", "clients", "memory", "persistence", "stats", "replication", "cpu", "keyspace"];
const ALL: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "commandstats",
    "errorstats",
    "keyspace",
];

/// INFO [section ...]
pub fn info(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let mut wanted: Vec<String> = Vec::new();
    let explicit = a.len() > 1;
    for s in &a[1..] {
        let s = String::from_utf8_lossy(s).to_ascii_lowercase();
        match s.as_str() {
            "all" | "everything" => wanted.extend(ALL.iter().map(|x| x.to_string())),
            "default" => wanted.extend(DEFAULT.iter().map(|x| x.to_string())),
            _ => wanted.push(s),
        }
    }
    if wanted.is_empty() {
        wanted = DEFAULT.iter().map(|x| x.to_string()).collect();
    }
    let mut out = String::new();
    for name in ALL {
        if !wanted.iter().any(|w| w == name) {
            continue;
        }
        if !out.is_empty() {
            out.push_str("\r\n");
        }
        let body = section(cx, name, explicit).map_err(|e| CmdError::err(format!("INFO {name}: {e}")))?;
        out.push_str(&format!("# {}\r\n", capitalize(name)));
        out.push_str(&body);
    }
    Ok(Reply::Verbatim(out))
}

fn capitalize(s: &str) -> String {
    match s {
        "commandstats" => "Commandstats".into(),
        "errorstats" => "Errorstats".into(),
        _ => {
            let mut c = s.chars();
            c.next().map(|f| f.to_ascii_uppercase().to_string() + c.as_str()).unwrap_or_default()
        }
    }
}

fn section(cx: &mut Ctx, name: &str, explicit: bool) -> Result<String, tembo_store::DbError> {
    let mut s = String::new();
    let mut kv = |k: &str, v: &dyn std::fmt::Display| s.push_str(&format!("{k}:{v}\r\n"));
    let st = &cx.st;
    match name {
        "server" => {
            let up = st.stats.started.elapsed().as_secs();
            kv("redis_version", &crate::REDIS_VERSION);
            kv("tembo_version", &env!("CARGO_PKG_VERSION"));
            kv("redis_mode", &"standalone");
            kv("os", &std::env::consts::OS);
            kv("arch_bits", &64);
            kv("multiplexing_api", &"tokio");
            kv("process_id", &std::process::id());
            kv("run_id", &st.run_id);
            kv("tcp_port", &st.cfg.port);
            kv("uptime_in_seconds", &up);
            kv("uptime_in_days", &(up / 86400));
            kv("executable", &std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_default());
            kv("config_file", &st.config_file);
            kv("engine", &st.store.db().engine());
        }
        "clients" => {
            kv("connected_clients", &(st.clients.len() + 1));
            kv("maxclients", &st.shared.maxclients());
            kv("blocked_clients", &(st.blocking.len() + st.postponed_count()));
            let me = cx.client.tracking.on as usize;
            kv("tracking_clients", &(st.clients.values().filter(|c| c.tracking.on).count() + me));
        }
        "memory" => {
            let pool = st.store.db().pool();
            let alloc = pool.alloc_stats();
            kv("used_memory", &alloc.used_bytes);
            kv("used_memory_human", &human(alloc.used_bytes));
            kv("number_of_cached_scripts", &st.scripts.as_ref().map_or(0, |e| e.len()));
            kv("used_memory_scripts", &st.scripts.as_ref().map_or(0, |e| e.source_bytes()));
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
            kv("maxmemory", &pool.max_size());
            kv("maxmemory_policy", &"noeviction");
            kv("mem_allocator", &"tembo-pmem");
        }
        "persistence" => {
            let mode = st.store.db().mode();
            kv("loading", &0);
            kv("pool_path", &st.store.db().path().display());
            kv("pool_mode", &mode);
            kv("pool_guarantee", &mode.guarantee());
            kv("durability", &"every write is durable before its reply (group commit)");
            kv("rdb_changes_since_last_save", &0);
            kv("rdb_bgsave_in_progress", &0);
            kv("rdb_last_save_time", &st.last_commit);
            kv("rdb_last_bgsave_status", &"ok");
            kv("aof_enabled", &0);
            kv("aof_rewrite_in_progress", &0);
            kv("commits", &st.stats.commits);
            kv("committed_writes", &st.stats.committed_writes);
            kv("reclaimed_elements", &st.stats.reclaimed);
            let r = st.store.db().recovery_progress();
            kv("last_open_recovered", &if r.ran { 1 } else { 0 });
            kv("recovery_in_progress", &if r.ran && !r.finished { 1 } else { 0 });
        }
        "stats" => {
            kv("total_connections_received", &st.stats.connections);
            kv("total_commands_processed", &st.stats.commands);
            kv("expired_keys", &st.stats.expired_keys);
            kv("pubsub_channels", &st.pubsub.channel_count());
            kv("pubsub_patterns", &st.pubsub.pattern_count());
            kv("evicted_keys", &0);
            kv("keyspace_hits", &st.stats.hits);
            kv("keyspace_misses", &st.stats.misses);
            kv("total_error_replies", &st.stats.errors);
            let denied = &st.acl.log.denied;
            kv("acl_access_denied_auth", &denied[0]);
            kv("acl_access_denied_cmd", &denied[1]);
            kv("acl_access_denied_key", &denied[2]);
            kv("acl_access_denied_channel", &denied[3]);
            let (keys, items, prefixes) = st.tracking.totals();
            kv("tracking_total_keys", &keys);
            kv("tracking_total_items", &items);
            kv("tracking_total_prefixes", &prefixes);
        }
        "replication" => {
            kv("role", &"master");
            kv("connected_slaves", &0);
            kv("master_repl_offset", &0);
        }
        "cpu" => {
            let (user, sys) = cpu_times();
            kv("used_cpu_sys", &format!("{sys:.6}"));
            kv("used_cpu_user", &format!("{user:.6}"));
        }
        "commandstats" => {
            for (name, c) in &st.stats.per_command {
                let per = if c.calls == 0 { 0.0 } else { c.usec as f64 / c.calls as f64 };
                kv(
                    &format!("cmdstat_{name}"),
                    &format!(
                        "calls={},usec={},usec_per_call={per:.2},rejected_calls={},failed_calls={}",
                        c.calls, c.usec, c.rejected, c.failed
                    ),
                );
            }
        }
        "errorstats" => {
            for (code, n) in &st.stats.error_codes {
                kv(&format!("errorstat_{code}"), &format!("count={n}"));
            }
        }
        "keyspace" => {
            for db in 0..st.keys.len() {
                let n = st.key_count(db);
                if n > 0 {
                    kv(&format!("db{db}"), &format!("keys={n},expires={},avg_ttl=0", st.expire_count(db)));
                }
            }
        }
        _ => {}
    }
    Ok(s)
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

fn cpu_times() -> (f64, f64) {
    // /proc/self/stat fields 14 and 15: utime and stime in clock ticks (100 Hz on Linux).
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else { return (0.0, 0.0) };
    let after = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = after.split_whitespace().collect();
    let tick = |i: usize| f.get(i).and_then(|x| x.parse::<f64>().ok()).unwrap_or(0.0) / 100.0;
    (tick(11), tick(12))
}
