//! Byte sizes on the command line (`64M`, `1G`, `512K`, `65536`) and in
//! output (`64.0 MiB`).
//!
//! Suffixes are binary (K = 1024), as pool sizes are counted in pages; `B`,
//! `iB` and lower case are accepted so that what `stat` prints can be typed
//! back.

/// Parses a size: a whole number of bytes, or a number (fractions allowed)
/// with a suffix K, M, G or T (powers of 1024), optionally followed by `B`
/// or `iB`.
///
/// # Errors
/// A message saying what is accepted.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let lower = t.to_ascii_lowercase();
    let body = lower.strip_suffix("ib").or_else(|| lower.strip_suffix('b')).unwrap_or(&lower);
    let (num, shift) = match body.chars().last() {
        Some('k') => (&body[..body.len() - 1], 10),
        Some('m') => (&body[..body.len() - 1], 20),
        Some('g') => (&body[..body.len() - 1], 30),
        Some('t') => (&body[..body.len() - 1], 40),
        _ => (body, 0),
    };
    let bad = || format!("invalid size {s:?}: use bytes or a number with K, M, G or T (e.g. 512K, 64M, 1G)");
    let num = num.trim();
    if num.is_empty() {
        return Err(bad());
    }
    if let Ok(n) = num.parse::<u64>() {
        return n.checked_mul(1u64 << shift).ok_or_else(|| format!("size {s:?} is too large"));
    }
    let f: f64 = num.parse().map_err(|_| bad())?;
    if shift == 0 || !f.is_finite() || f < 0.0 {
        return Err(bad());
    }
    let bytes = f * (1u64 << shift) as f64;
    if bytes >= u64::MAX as f64 {
        return Err(format!("size {s:?} is too large"));
    }
    Ok(bytes.round() as u64)
}

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
    fn parses_suffixes() {
        assert_eq!(parse_size("65536"), Ok(65536));
        assert_eq!(parse_size("512K"), Ok(512 << 10));
        assert_eq!(parse_size("64M"), Ok(64 << 20));
        assert_eq!(parse_size("64mib"), Ok(64 << 20));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert_eq!(parse_size("1GB"), Ok(1 << 30));
        assert_eq!(parse_size("1.5G"), Ok(3 << 29));
        assert_eq!(parse_size(" 2T "), Ok(2 << 40));
        assert_eq!(parse_size("100B"), Ok(100));
        for bad in ["", "M", "-1M", "1.5", "abc", "1X", "99999999999999T"] {
            assert!(parse_size(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn prints_sizes() {
        assert_eq!(human(512), "512 B");
        assert_eq!(human(64 << 20), "64.0 MiB");
        assert_eq!(human(1536), "1.5 KiB");
        assert_eq!(human_exact(1 << 30), "1.0 GiB (1073741824 bytes)");
    }
}
