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

/// Redis's glob match (`*`, `?`, `[a-z]`, `[^x]`, `\\x`), optionally ignoring
/// case: Redis's `stringmatchlen`, corner for corner (an unclosed class
/// ends the pattern, a range may end in `]`, escapes in a class keep
/// case), with its guard against abusive patterns: past 1,000 nested `*`
/// the match fails, so `KEYS` of a pattern built to take exponential time
/// answers at once (the limit Redis added in its fix for CVE-2022-36021).
pub fn glob(pattern: &[u8], s: &[u8], nocase: bool) -> bool {
    let mut skip_longer = false;
    glob_at(pattern, s, nocase, &mut skip_longer, 0)
}

/// How deep `*` may nest before a match gives up.
const GLOB_MAX_NESTING: usize = 1000;

fn glob_at(pattern: &[u8], s: &[u8], nocase: bool, skip_longer: &mut bool, nesting: usize) -> bool {
    if nesting > GLOB_MAX_NESTING {
        return false;
    }
    let fold = |c: u8| if nocase { c.to_ascii_lowercase() } else { c };
    // Past the end, C reads the pattern's terminating zero.
    let at = |i: usize| pattern.get(i).copied().unwrap_or(0);
    let (mut p, mut i) = (0usize, 0usize);
    while p < pattern.len() && i < s.len() {
        match pattern[p] {
            b'*' => {
                while p < pattern.len() && at(p + 1) == b'*' {
                    p += 1;
                }
                if p + 1 == pattern.len() {
                    return true;
                }
                while i < s.len() {
                    if glob_at(&pattern[p + 1..], &s[i..], nocase, skip_longer, nesting + 1) {
                        return true;
                    }
                    if *skip_longer {
                        return false;
                    }
                    i += 1;
                }
                // Nothing after this star matches anywhere in the rest of
                // the string: no earlier star can do better either.
                *skip_longer = true;
                return false;
            }
            b'?' => i += 1,
            b'[' => {
                p += 1;
                let negate = at(p) == b'^';
                if negate {
                    p += 1;
                }
                let c = s[i];
                let mut matched = false;
                loop {
                    let left = pattern.len().saturating_sub(p);
                    if at(p) == b'\\' && left >= 2 {
                        p += 1;
                        if pattern[p] == c {
                            matched = true;
                        }
                    } else if at(p) == b']' {
                        break;
                    } else if left == 0 {
                        // Unclosed: the class ends with the pattern.
                        p -= 1;
                        break;
                    } else if left >= 3 && pattern[p + 1] == b'-' {
                        // C compares these as (signed) chars: bytes from
                        // 0x80 sort below ASCII.
                        let signed = |b: u8| i32::from(fold(b) as i8);
                        let (mut lo, mut hi) = (pattern[p], pattern[p + 2]);
                        if (lo as i8) > (hi as i8) {
                            std::mem::swap(&mut lo, &mut hi);
                        }
                        if (signed(lo)..=signed(hi)).contains(&signed(c)) {
                            matched = true;
                        }
                        p += 2;
                    } else if fold(pattern[p]) == fold(c) {
                        matched = true;
                    }
                    p += 1;
                }
                if matched == negate {
                    return false;
                }
                i += 1;
            }
            b => {
                let b = if b == b'\\' && pattern.len() - p >= 2 {
                    p += 1;
                    pattern[p]
                } else {
                    b
                };
                if fold(b) != fold(s[i]) {
                    return false;
                }
                i += 1;
            }
        }
        p += 1;
        if i == s.len() {
            while at(p) == b'*' {
                p += 1;
            }
            break;
        }
    }
    p >= pattern.len() && i == s.len()
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

    /// Corners where Redis's `stringmatchlen` answers as it does (each
    /// checked against redis-server 7.0.15's KEYS).
    #[test]
    fn globs_as_redis_does() {
        // An unclosed class ends the pattern; a range may end in `]`.
        assert!(glob(b"a[bc", b"ab", false));
        assert!(!glob(b"a[bc", b"abc", false));
        assert!(glob(b"[a-]", b"]", false));
        assert!(glob(b"[z-a]", b"m", false));
        // Range ends compare as C's signed chars.
        assert!(!glob(b"[a-\xff]", b"b", false));
        assert!(glob(b"[\x80-c]", b"b", false));
        // Escapes inside a class keep case even when matching without it.
        assert!(!glob(b"[\\A]", b"a", true));
        assert!(glob(b"[A]", b"a", true));
        // A trailing backslash is itself.
        assert!(glob(b"a\\", b"a\\", false));
        // The matcher takes no empty string, even for `*` (callers treat
        // `*` alone as everything).
        assert!(!glob(b"*", b"", false));
        assert!(glob(b"", b"", false));
        // Past 1,000 nested stars a match gives up, where Redis does.
        let key = vec![b'a'; 50_000];
        assert!(!glob(&b"*?".repeat(50_000), &key, false));
        assert!(glob(&b"*a".repeat(1000), &key, false));
        assert!(!glob(&b"*a".repeat(1001), &key, false));
        // A pattern built to take exponential time answers at once.
        let mut p = b"a*".repeat(30);
        p.push(b'b');
        assert!(!glob(&p, &[b'a'; 60], false));
    }

    #[test]
    fn ints_and_ranges() {
        assert_eq!(int(b"-12").unwrap(), -12);
        assert!(int(b"012").is_err());
        assert!(int(b"+1").is_err());
        assert!(int(b"9223372036854775808").is_err());
        assert_eq!(range(0, -1, 3), Some((0, 2)));
        assert_eq!(range(-100, 100, 3), Some((0, 2)));
        assert_eq!(range(2, 1, 3), None);
        assert_eq!(range(0, -1, 0), None);
    }
}
