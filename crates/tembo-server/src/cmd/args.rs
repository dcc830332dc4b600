//! Argument parsing shared by the command families, with Redis's error words.

use super::CmdError;

/// Whether `arg` equals `word`, ignoring ASCII case.
pub fn is(arg: &[u8], word: &str) -> bool {
    arg.eq_ignore_ascii_case(word.as_bytes())
}

/// A signed 64-bit integer, as Redis's `string2ll` accepts it.
pub fn int(arg: &[u8]) -> Result<i64, CmdError> {
    let s = std::str::from_utf8(arg).map_err(|_| CmdError::not_int())?;
    if s.is_empty() || s.starts_with('+') || (s.len() > 1 && s.starts_with('0')) || s.starts_with("-0") {
        return Err(CmdError::not_int());
    }
    s.parse().map_err(|_| CmdError::not_int())
}

/// A double as Redis accepts it (`inf`, `-inf`, `+inf` included; NaN refused).
pub fn float(arg: &[u8]) -> Result<f64, CmdError> {
    parse_float(arg).ok_or_else(CmdError::not_float)
}

/// The parser behind [`float`].
pub fn parse_float(arg: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(arg).ok()?;
    if s.is_empty() || s.trim() != s {
        return None;
    }
    let v = match s.to_ascii_lowercase().as_str() {
        "inf" | "+inf" | "infinity" | "+infinity" => f64::INFINITY,
        "-inf" | "-infinity" => f64::NEG_INFINITY,
        other if other.contains("nan") => return None,
        _ => s.parse().ok()?,
    };
    Some(v)
}

/// Resolves Redis's inclusive `[start, stop]` with negative indices against
/// `len`; `None` when the range is empty.
pub fn range(start: i64, stop: i64, len: i64) -> Option<(i64, i64)> {
    let s = if start < 0 { (len + start).max(0) } else { start };
    let e = if stop < 0 { len + stop } else { stop.min(len - 1) };
    if s > e || s >= len || len == 0 {
        None
    } else {
        Some((s, e))
    }
}

/// Redis's glob match (`*`, `?`, `[a-z]`, `[^x]`, `\x`), optionally ignoring case.
pub fn glob(pattern: &[u8], s: &[u8], nocase: bool) -> bool {
    let eq = |a: u8, b: u8| if nocase { a.eq_ignore_ascii_case(&b) } else { a == b };
    let (mut p, mut i) = (0usize, 0usize);
    let (mut star_p, mut star_i) = (usize::MAX, 0usize);
    while i < s.len() {
        if p < pattern.len() {
            match pattern[p] {
                b'*' => {
                    while p < pattern.len() && pattern[p] == b'*' {
                        p += 1;
                    }
                    if p == pattern.len() {
                        return true;
                    }
                    star_p = p;
                    star_i = i;
                    continue;
                }
                b'?' => {
                    p += 1;
                    i += 1;
                    continue;
                }
                b'[' => {
                    if let Some((matched, next)) = class(pattern, p, s[i], nocase) {
                        if matched {
                            p = next;
                            i += 1;
                            continue;
                        }
                    }
                }
                b'\\' if p + 1 < pattern.len() => {
                    if eq(pattern[p + 1], s[i]) {
                        p += 2;
                        i += 1;
                        continue;
                    }
                }
                c => {
                    if eq(c, s[i]) {
                        p += 1;
                        i += 1;
                        continue;
                    }
                }
            }
        }
        if star_p == usize::MAX {
            return false;
        }
        star_i += 1;
        i = star_i;
        p = star_p;
    }
    while p < pattern.len() && pattern[p] == b'*' {
        p += 1;
    }
    p == pattern.len()
}

/// Matches `c` against the class starting at `pattern[p] == '['`; returns
/// (matched, index after the class).
fn class(pattern: &[u8], p: usize, c: u8, nocase: bool) -> Option<(bool, usize)> {
    let mut j = p + 1;
    let negate = pattern.get(j) == Some(&b'^');
    if negate {
        j += 1;
    }
    let mut matched = false;
    let norm = |x: u8| if nocase { x.to_ascii_lowercase() } else { x };
    let c = norm(c);
    loop {
        let ch = *pattern.get(j)?;
        if ch == b']' {
            break;
        }
        if ch == b'\\' && j + 1 < pattern.len() {
            if norm(pattern[j + 1]) == c {
                matched = true;
            }
            j += 2;
        } else if pattern.get(j + 1) == Some(&b'-') && pattern.get(j + 2).is_some_and(|&e| e != b']') {
            let (mut lo, mut hi) = (norm(ch), norm(pattern[j + 2]));
            if lo > hi {
                std::mem::swap(&mut lo, &mut hi);
            }
            if (lo..=hi).contains(&c) {
                matched = true;
            }
            j += 3;
        } else {
            if norm(ch) == c {
                matched = true;
            }
            j += 1;
        }
    }
    Some((matched != negate, j + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob(b"*", b"anything", false));
        assert!(glob(b"h?llo", b"hello", false));
        assert!(glob(b"h*llo", b"heeeello", false));
        assert!(glob(b"h[ae]llo", b"hallo", false));
        assert!(!glob(b"h[^e]llo", b"hello", false));
        assert!(glob(b"h[a-b]llo", b"hbllo", false));
        assert!(glob(b"a\\*b", b"a*b", false));
        assert!(!glob(b"a\\*b", b"axb", false));
        assert!(glob(b"HELLO", b"hello", true));
        assert!(!glob(b"abc", b"abcd", false));
        assert!(glob(b"*:1", b"user:1", false));
    }

    #[test]
    fn ints_and_floats() {
        assert_eq!(int(b"-12").unwrap(), -12);
        assert!(int(b"012").is_err());
        assert!(int(b"+1").is_err());
        assert!(int(b"9223372036854775808").is_err());
        assert_eq!(float(b"-inf").unwrap(), f64::NEG_INFINITY);
        assert!(float(b"nan").is_err());
        assert_eq!(float(b"1e3").unwrap(), 1000.0);
        assert_eq!(range(0, -1, 3), Some((0, 2)));
        assert_eq!(range(-100, 100, 3), Some((0, 2)));
        assert_eq!(range(2, 1, 3), None);
        assert_eq!(range(0, -1, 0), None);
    }
}
