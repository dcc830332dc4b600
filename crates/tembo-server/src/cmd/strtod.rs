//! C's `strtod` as SORT's numeric mode uses it in Redis 7.0: a value is a
//! weight if `strtod` consumes it to its end (the first NUL ends it, as it
//! ends a C string), gives no `ERANGE` and no NaN. So an empty value, or
//! one with leading blanks, is a weight (0 and the number), as are hex
//! floats (`0x1p3`) and `infinity`; `1 ` (a trailing blank) or `1e400`
//! (overflow) are not. Redis's other numeric arguments use stricter
//! parsers (`string2d`, [`super::zparse`]).

/// The weight `s` reads as, or `None` where Redis's SORT reports "One or
/// more scores can't be converted into double".
pub fn sort_weight(s: &[u8]) -> Option<f64> {
    let s = s.split(|&b| b == 0).next().unwrap_or(&[]);
    let start = s.iter().position(|&b| !is_c_space(b)).unwrap_or(s.len());
    let Some((value, end, exact_zero)) = number(&s[start..]) else {
        // No conversion: strtod leaves the end at the very start, so only
        // an empty string is consumed whole.
        return s.is_empty().then_some(0.0);
    };
    if start + end != s.len() || value.is_nan() {
        return None;
    }
    let overflow = value.is_infinite() && !is_inf_word(&s[start..]);
    // glibc reports underflow (ERANGE) for a result that is zero or
    // subnormal while the digits were not all zero.
    let underflow = !exact_zero && (value == 0.0 || value.is_subnormal());
    (!overflow && !underflow).then_some(value)
}

fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

fn is_inf_word(s: &[u8]) -> bool {
    let s = s.strip_prefix(b"+").or_else(|| s.strip_prefix(b"-")).unwrap_or(s);
    s.len() >= 3 && s[..3].eq_ignore_ascii_case(b"inf")
}

/// The longest number at the start of `s` (after the blanks): its value,
/// how many bytes it took, and whether its digits were all zeros. (Also
/// `cjson.decode`'s number reader, `crate::script_json`.)
pub(crate) fn number(s: &[u8]) -> Option<(f64, usize, bool)> {
    let (neg, mut i) = match s.first() {
        Some(b'-') => (true, 1),
        Some(b'+') => (false, 1),
        _ => (false, 0),
    };
    let sign = |v: f64| if neg { -v } else { v };
    let rest = &s[i..];
    if rest.len() >= 3 && rest[..3].eq_ignore_ascii_case(b"inf") {
        let n = if rest.len() >= 8 && rest[..8].eq_ignore_ascii_case(b"infinity") { 8 } else { 3 };
        return Some((sign(f64::INFINITY), i + n, false));
    }
    if rest.len() >= 3 && rest[..3].eq_ignore_ascii_case(b"nan") {
        let mut n = 3;
        // "nan(chars)": the parenthesised part is taken only when closed.
        if rest.get(3) == Some(&b'(') {
            if let Some(close) = rest[4..].iter().position(|&b| !(b.is_ascii_alphanumeric() || b == b'_')) {
                if rest[4 + close] == b')' {
                    n = 4 + close + 1;
                }
            }
        }
        return Some((f64::NAN, i + n, false));
    }
    if rest.len() >= 2 && rest[0] == b'0' && (rest[1] | 0x20) == b'x' {
        if let Some((v, n, zero)) = hex(&rest[2..]) {
            return Some((sign(v), i + 2 + n, zero));
        }
        // "0x" with no hex digits after it: strtod reads the "0".
        return Some((sign(0.0), i + 1, true));
    }
    let digits_from = i;
    let mut saw_digit = false;
    let mut nonzero = false;
    while i < s.len() && s[i].is_ascii_digit() {
        nonzero |= s[i] != b'0';
        saw_digit = true;
        i += 1;
    }
    if i < s.len() && s[i] == b'.' {
        let mut j = i + 1;
        while j < s.len() && s[j].is_ascii_digit() {
            nonzero |= s[j] != b'0';
            saw_digit = true;
            j += 1;
        }
        if saw_digit {
            i = j;
        }
    }
    if !saw_digit {
        return None;
    }
    if i < s.len() && (s[i] | 0x20) == b'e' {
        let mut j = i + 1;
        if j < s.len() && (s[j] == b'+' || s[j] == b'-') {
            j += 1;
        }
        if j < s.len() && s[j].is_ascii_digit() {
            while j < s.len() && s[j].is_ascii_digit() {
                j += 1;
            }
            i = j;
        }
    }
    let text = std::str::from_utf8(&s[digits_from..i]).ok()?;
    let v: f64 = text.parse().ok()?;
    Some((sign(v), i, !nonzero))
}

/// A hex float's digits after "0x": `h[.h][p[±]d]`.
fn hex(s: &[u8]) -> Option<(f64, usize, bool)> {
    let mut mantissa = 0f64;
    let mut exp: i64 = 0;
    let mut nonzero = false;
    let mut i = hex_run(s, 0, &mut mantissa, &mut nonzero);
    let mut saw = i > 0;
    if i < s.len() && s[i] == b'.' {
        let j = hex_run(s, i + 1, &mut mantissa, &mut nonzero);
        exp -= 4 * (j - i - 1) as i64;
        if saw || j > i + 1 {
            saw = true;
            i = j;
        }
    }
    if !saw {
        return None;
    }
    if i < s.len() && (s[i] | 0x20) == b'p' {
        let mut j = i + 1;
        let neg = match s.get(j) {
            Some(b'-') => {
                j += 1;
                true
            }
            Some(b'+') => {
                j += 1;
                false
            }
            _ => false,
        };
        if j < s.len() && s[j].is_ascii_digit() {
            let mut e: i64 = 0;
            while j < s.len() && s[j].is_ascii_digit() {
                e = (e * 10 + (s[j] - b'0') as i64).min(1 << 20);
                j += 1;
            }
            exp += if neg { -e } else { e };
            i = j;
        }
    }
    let v = mantissa * 2f64.powi(exp.clamp(-4000, 4000) as i32);
    Some((v, i, !nonzero))
}

/// Folds the hex digits of `s` from `i` on into `mantissa`; the index
/// after them.
fn hex_run(s: &[u8], mut i: usize, mantissa: &mut f64, nonzero: &mut bool) -> usize {
    while i < s.len() && s[i].is_ascii_hexdigit() {
        *mantissa = *mantissa * 16.0 + hex_value(s[i]);
        *nonzero |= s[i] != b'0';
        i += 1;
    }
    i
}

fn hex_value(b: u8) -> f64 {
    (b as char).to_digit(16).unwrap_or(0) as f64
}

#[cfg(test)]
mod tests {
    use super::sort_weight;

    #[test]
    fn reads_what_strtod_consumes_whole() {
        let cases: &[(&[u8], Option<f64>)] = &[
            (b"", Some(0.0)),
            (b"1", Some(1.0)),
            (b"-1.5", Some(-1.5)),
            (b" 2", Some(2.0)),
            (b"\t\n3e2", Some(300.0)),
            (b"+.5", Some(0.5)),
            (b"5.", Some(5.0)),
            (b"1e", None),
            (b"1e+", None),
            (b"1 ", None),
            (b"   ", None),
            (b"abc", None),
            (b".", None),
            (b"0x10", Some(16.0)),
            (b"0x1p3", Some(8.0)),
            (b"0x.8", Some(0.5)),
            (b"0x", None),
            (b"0xg", None),
            (b"inf", Some(f64::INFINITY)),
            (b"-Infinity", Some(f64::NEG_INFINITY)),
            (b"infin", None),
            (b"nan", None),
            (b"1e400", None),
            (b"1e-400", None),
            (b"0e-400", Some(0.0)),
            (b"1\0abc", Some(1.0)),
            (b"\0", Some(0.0)),
            (b"007", Some(7.0)),
        ];
        for (input, want) in cases {
            assert_eq!(sort_weight(input), *want, "{:?}", String::from_utf8_lossy(input));
        }
    }
}
