//! Sizes as Redis configs write them: `1048576`, `64mb`, `1gb`, `512k`.

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
}
