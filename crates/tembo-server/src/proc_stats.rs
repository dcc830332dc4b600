//! Readings of this process and machine from `/proc` (Linux), for INFO:
//! CPU times, resident memory, total memory, the kernel release. Where
//! `/proc` cannot be read (another OS, a sandbox), a reading is zero or
//! empty rather than an error: INFO must answer.

/// User and system CPU seconds: (user, sys, children user, children sys).
pub fn cpu_times() -> (f64, f64, f64, f64) {
    let f = stat_fields("/proc/self/stat");
    (tick(&f, 11), tick(&f, 12), tick(&f, 13), tick(&f, 14))
}

/// User and system CPU seconds of the calling thread (the executor's, when
/// INFO runs there).
pub fn thread_cpu_times() -> (f64, f64) {
    let f = stat_fields("/proc/thread-self/stat");
    (tick(&f, 11), tick(&f, 12))
}

/// The fields of a `stat` file after the command name (which may hold
/// spaces and parentheses, so the split is at the last `)`).
fn stat_fields(path: &str) -> Vec<String> {
    let Ok(stat) = std::fs::read_to_string(path) else { return Vec::new() };
    let after = stat.rsplit_once(')').map_or("", |(_, r)| r);
    after.split_whitespace().map(str::to_string).collect()
}

/// Field `i` (0 = state) in clock ticks, as seconds (100 ticks/s on Linux).
fn tick(f: &[String], i: usize) -> f64 {
    f.get(i).and_then(|x| x.parse::<f64>().ok()).unwrap_or(0.0) / 100.0
}

/// Resident set size of this process in bytes.
pub fn rss_bytes() -> u64 {
    kb_field("/proc/self/status", "VmRSS:")
}

/// The machine's memory in bytes.
pub fn total_memory() -> u64 {
    kb_field("/proc/meminfo", "MemTotal:")
}

fn kb_field(path: &str, name: &str) -> u64 {
    let Ok(text) = std::fs::read_to_string(path) else { return 0 };
    text.lines()
        .find_map(|l| l.strip_prefix(name))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kb| kb.parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// `Linux 6.1.0 x86_64`, as Redis's `os` field.
pub fn os() -> String {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let name = if cfg!(target_os = "linux") { "Linux" } else { std::env::consts::OS };
    format!("{name} {} {}", release.trim(), std::env::consts::ARCH)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readings_are_plausible_on_linux() {
        if !cfg!(target_os = "linux") {
            return;
        }
        assert!(rss_bytes() > 0);
        assert!(total_memory() >= rss_bytes());
        assert!(os().starts_with("Linux "));
        let (user, sys, _, _) = cpu_times();
        assert!(user >= 0.0 && sys >= 0.0);
    }
}
