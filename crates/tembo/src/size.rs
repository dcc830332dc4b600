//! Byte sizes on the command line (`64M`, `1G`, `512K`, `65536`: parsed as
//! the server's config file parses them, `tembo_server::size::parse_bytes`)
//! and in output (`64.0 MiB`).

pub use tembo_server::size::parse_bytes as parse_size;

/// `64.0 MiB`, `512 B`: a size for people.
pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut v = bytes as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

/// `64.0 MiB (67108864 bytes)`.
pub fn human_exact(bytes: u64) -> String {
    format!("{} ({bytes} bytes)", human(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_sizes() {
        assert_eq!(human(512), "512 B");
        assert_eq!(human(64 << 20), "64.0 MiB");
        assert_eq!(human(1536), "1.5 KiB");
        assert_eq!(human_exact(1 << 30), "1.0 GiB (1073741824 bytes)");
    }
}
