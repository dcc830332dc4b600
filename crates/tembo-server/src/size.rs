//! Sizes as Redis configs write them (`1048576`, `64mb`, `1gb`, `512k`:
//! [`parse`], for CONFIG SET) and as Tembo's own flags and config file do
//! (`64M`, `1G`, `512K`, `1.5G`: [`parse_bytes`]).

/// Parses a size; `None` if it is not one.
pub fn parse(s: &str) -> Option<u64> {
    let s = s.trim().to_ascii_lowercase();
    let digits = s.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let unit = &s[digits.len()..];
    let n: u64 = digits.parse().ok()?;
    let mult: u64 = match unit {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1000 * 1000,
        "mb" => 1024 * 1024,
        "g" => 1000 * 1000 * 1000,
        "gb" => 1024 * 1024 * 1024,
        _ => return None,
    };
    n.checked_mul(mult)
}

/// Parses a size: a whole number of bytes, or a number (fractions allowed)
/// with a suffix K, M, G or T (powers of 1024, as pool sizes are counted in
/// pages), optionally followed by `B` or `iB`, in either case, so that what
/// `tembo pool stat` prints can be typed back.
///
/// # Errors
/// A message saying what is accepted.
pub fn parse_bytes(s: &str) -> Result<u64, String> {
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

#[cfg(test)]
mod tests {
    #[test]
    fn sizes() {
        assert_eq!(super::parse("512mb"), Some(512 << 20));
        assert_eq!(super::parse("1gb"), Some(1 << 30));
        assert_eq!(super::parse("100"), Some(100));
        assert_eq!(super::parse("1k"), Some(1000));
        assert_eq!(super::parse("x"), None);
    }

    #[test]
    fn parses_suffixes() {
        assert_eq!(super::parse_bytes("65536"), Ok(65536));
        assert_eq!(super::parse_bytes("512K"), Ok(512 << 10));
        assert_eq!(super::parse_bytes("64M"), Ok(64 << 20));
        assert_eq!(super::parse_bytes("64mib"), Ok(64 << 20));
        assert_eq!(super::parse_bytes("1G"), Ok(1 << 30));
        assert_eq!(super::parse_bytes("1GB"), Ok(1 << 30));
        assert_eq!(super::parse_bytes("1.5G"), Ok(3 << 29));
        assert_eq!(super::parse_bytes(" 2T "), Ok(2 << 40));
        assert_eq!(super::parse_bytes("100B"), Ok(100));
        for bad in ["", "M", "-1M", "1.5", "abc", "1X", "99999999999999T"] {
            assert!(super::parse_bytes(bad).is_err(), "{bad:?} accepted");
        }
    }
}
