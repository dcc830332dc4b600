//! Sorted-set argument parsing, apart from the commands so that every
//! sorted-set module reads scores and ranges the same way: scores as Redis's
//! `string2d` (C `strtod`) accepts them, score ranges as `zslParseRange`
//! reads them (`(` for an exclusive bound), lex ranges as
//! `zslParseLexRange` (`[`, `(`, `-`, `+`), and the index-key bounds each
//! range covers.

use std::cmp::Ordering;
use std::ops::Bound;

use super::CmdError;
use crate::encoding::{normalize_zero, prefix_end, score_bytes};
use crate::keyspace::Res;

/// Lower and upper bound of a sub-key range.
pub(super) type KeyRange = (Bound<Vec<u8>>, Bound<Vec<u8>>);

fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// C's `strtod` on `s`: (value, bytes consumed, range error). Nothing
/// converted: consumed 0. The range error is set where C sets ERANGE and
/// returns ±HUGE_VAL or zero (an overflow, or an underflow to zero).
pub(super) fn strtod(s: &[u8]) -> (f64, usize, bool) {
    let mut i = 0;
    while i < s.len() && is_c_space(s[i]) {
        i += 1;
    }
    let start = i;
    let neg = s.get(i) == Some(&b'-');
    if matches!(s.get(i), Some(b'+' | b'-')) {
        i += 1;
    }
    let sign = if neg { -1.0 } else { 1.0 };
    let word = |at: usize, w: &[u8]| s.get(at..at + w.len()).is_some_and(|p| p.eq_ignore_ascii_case(w));
    if word(i, b"infinity") {
        return (sign * f64::INFINITY, i + 8, false);
    }
    if word(i, b"inf") {
        return (sign * f64::INFINITY, i + 3, false);
    }
    if word(i, b"nan") {
        let mut j = i + 3;
        if s.get(j) == Some(&b'(') {
            let mut k = j + 1;
            while k < s.len() && (s[k].is_ascii_alphanumeric() || s[k] == b'_') {
                k += 1;
            }
            if s.get(k) == Some(&b')') {
                j = k + 1;
            }
        }
        return (f64::NAN, j, false);
    }
    let digit_at =
        |at: usize, hex: bool| s.get(at).is_some_and(|c| if hex { c.is_ascii_hexdigit() } else { c.is_ascii_digit() });
    let hex_start = s.get(i) == Some(&b'0') && matches!(s.get(i + 1), Some(b'x' | b'X'));
    if hex_start && (digit_at(i + 2, true) || (s.get(i + 2) == Some(&b'.') && digit_at(i + 3, true))) {
        let mut j = i + 2;
        let (mut mant, mut exp, mut nonzero) = (0f64, 0i64, false);
        let mut take = |c: u8, mant: &mut f64| {
            let d = (c as char).to_digit(16).unwrap_or(0);
            nonzero |= d != 0;
            *mant = *mant * 16.0 + d as f64;
        };
        while digit_at(j, true) {
            take(s[j], &mut mant);
            j += 1;
        }
        if s.get(j) == Some(&b'.') {
            j += 1;
            while digit_at(j, true) {
                take(s[j], &mut mant);
                exp -= 4;
                j += 1;
            }
        }
        if matches!(s.get(j), Some(b'p' | b'P')) {
            let mut k = j + 1;
            let eneg = s.get(k) == Some(&b'-');
            if matches!(s.get(k), Some(b'+' | b'-')) {
                k += 1;
            }
            if digit_at(k, false) {
                let mut e = 0i64;
                while digit_at(k, false) {
                    e = (e * 10 + (s[k] - b'0') as i64).min(1 << 20);
                    k += 1;
                }
                exp += if eneg { -e } else { e };
                j = k;
            }
        }
        let mut v = mant;
        // Scale in steps so that intermediate powers neither overflow nor underflow early.
        let mut e = exp.clamp(-1 << 21, 1 << 21);
        while e != 0 {
            let step = e.clamp(-1000, 1000);
            v *= 2f64.powi(step as i32);
            e -= step;
        }
        let erange = v.is_infinite() || (v == 0.0 && nonzero);
        return (sign * v, j, erange);
    }
    let mut j = i;
    let mut digits = 0;
    let mut nonzero = false;
    while digit_at(j, false) {
        nonzero |= s[j] != b'0';
        digits += 1;
        j += 1;
    }
    if s.get(j) == Some(&b'.') {
        let mut k = j + 1;
        while digit_at(k, false) {
            nonzero |= s[k] != b'0';
            digits += 1;
            k += 1;
        }
        if digits > 0 {
            j = k;
        }
    }
    if digits == 0 {
        return (0.0, 0, false);
    }
    if matches!(s.get(j), Some(b'e' | b'E')) {
        let mut k = j + 1;
        if matches!(s.get(k), Some(b'+' | b'-')) {
            k += 1;
        }
        if digit_at(k, false) {
            while digit_at(k, false) {
                k += 1;
            }
            j = k;
        }
    }
    let text = std::str::from_utf8(&s[start..j]).unwrap_or("0");
    let v: f64 = text.parse().unwrap_or(0.0);
    let erange = v.is_infinite() || (v == 0.0 && nonzero);
    (v, j, erange)
}

/// A score argument as Redis's `string2d` accepts it (ZADD, ZINCRBY).
pub(super) fn parse_score(arg: &[u8]) -> Res<f64> {
    let (v, used, erange) = strtod(arg);
    if arg.is_empty() || is_c_space(arg[0]) || used != arg.len() || erange || v.is_nan() {
        return Err(CmdError::not_float());
    }
    Ok(v)
}

/// A score range (ZCOUNT, ZRANGEBYSCORE...): `(` makes a bound exclusive.
#[derive(Debug, Clone, Copy)]
pub(super) struct ScoreRange {
    min: f64,
    max: f64,
    minex: bool,
    maxex: bool,
}

/// One bound of a score range, as `zslParseRange` reads it (C string, strtod).
fn score_item(arg: &[u8]) -> Option<(f64, bool)> {
    let (text, ex) = match arg.strip_prefix(b"(") {
        Some(rest) => (rest, true),
        None => (arg, false),
    };
    let text = &text[..text.iter().position(|&b| b == 0).unwrap_or(text.len())];
    let (v, used, _) = strtod(text);
    (used == text.len() && !v.is_nan()).then_some((v, ex))
}

pub(super) fn parse_score_range(min: &[u8], max: &[u8]) -> Res<ScoreRange> {
    match (score_item(min), score_item(max)) {
        (Some((min, minex)), Some((max, maxex))) => Ok(ScoreRange { min, max, minex, maxex }),
        _ => Err(CmdError::err("min or max is not a float")),
    }
}

impl ScoreRange {
    pub(super) fn is_empty(&self) -> bool {
        self.min > self.max || (self.min == self.max && (self.minex || self.maxex))
    }

    /// The index-field bounds of the range; `None` when it is empty.
    pub(super) fn bounds(&self) -> Option<KeyRange> {
        if self.is_empty() {
            return None;
        }
        let (lo, hi) = (score_bytes(normalize_zero(self.min)), score_bytes(normalize_zero(self.max)));
        let lo = if self.minex { Bound::Included(prefix_end(&lo)?) } else { Bound::Included(lo.to_vec()) };
        let hi = if self.maxex {
            Bound::Excluded(hi.to_vec())
        } else {
            prefix_end(&hi).map_or(Bound::Unbounded, Bound::Excluded)
        };
        Some((lo, hi))
    }
}

/// One bound of a lex range.
#[derive(Debug, Clone)]
enum Lex {
    /// `-`: below every member.
    Min,
    /// `+`: above every member.
    Max,
    /// `[m`
    In(Vec<u8>),
    /// `(m`
    Ex(Vec<u8>),
}

fn lex_item(arg: &[u8]) -> Option<Lex> {
    match arg.first()? {
        b'+' if arg.len() == 1 => Some(Lex::Max),
        b'-' if arg.len() == 1 => Some(Lex::Min),
        b'[' => Some(Lex::In(arg[1..].to_vec())),
        b'(' => Some(Lex::Ex(arg[1..].to_vec())),
        _ => None,
    }
}

#[derive(Debug, Clone)]
pub(super) struct LexRange {
    min: Lex,
    max: Lex,
}

pub(super) fn parse_lex_range(min: &[u8], max: &[u8]) -> Res<LexRange> {
    match (lex_item(min), lex_item(max)) {
        (Some(min), Some(max)) => Ok(LexRange { min, max }),
        _ => Err(CmdError::err("min or max not valid string range item")),
    }
}

impl LexRange {
    pub(super) fn is_empty(&self) -> bool {
        let ord = match (&self.min, &self.max) {
            (Lex::Min, Lex::Min) | (Lex::Max, Lex::Max) => Ordering::Equal,
            (Lex::Min, _) | (_, Lex::Max) => Ordering::Less,
            (Lex::Max, _) | (_, Lex::Min) => Ordering::Greater,
            (Lex::In(a) | Lex::Ex(a), Lex::In(b) | Lex::Ex(b)) => a.cmp(b),
        };
        let ex = |l: &Lex| !matches!(l, Lex::In(_));
        ord == Ordering::Greater || (ord == Ordering::Equal && (ex(&self.min) || ex(&self.max)))
    }

    pub(super) fn gte_min(&self, m: &[u8]) -> bool {
        match &self.min {
            Lex::Min => true,
            Lex::Max => false,
            Lex::In(x) => m >= x.as_slice(),
            Lex::Ex(x) => m > x.as_slice(),
        }
    }

    pub(super) fn lte_max(&self, m: &[u8]) -> bool {
        match &self.max {
            Lex::Max => true,
            Lex::Min => false,
            Lex::In(x) => m <= x.as_slice(),
            Lex::Ex(x) => m < x.as_slice(),
        }
    }

    /// The index-field bounds of the range among members of score bytes `sb`.
    pub(super) fn bounds_at(&self, sb: &[u8]) -> Option<KeyRange> {
        let with = |x: &[u8]| [sb, x].concat();
        let lo = match &self.min {
            Lex::Min => Bound::Included(sb.to_vec()),
            Lex::Max => return None,
            Lex::In(x) => Bound::Included(with(x)),
            Lex::Ex(x) => Bound::Excluded(with(x)),
        };
        let hi = match &self.max {
            Lex::Max => prefix_end(sb).map_or(Bound::Unbounded, Bound::Excluded),
            Lex::Min => return None,
            Lex::In(x) => Bound::Included(with(x)),
            Lex::Ex(x) => Bound::Excluded(with(x)),
        };
        Some((lo, hi))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(s: &str) -> Option<f64> {
        parse_score(s.as_bytes()).ok()
    }

    #[test]
    fn scores_parse_like_string2d() {
        assert_eq!(f("1.5"), Some(1.5));
        assert_eq!(f("-3"), Some(-3.0));
        assert_eq!(f("+2e3"), Some(2000.0));
        assert_eq!(f(".5"), Some(0.5));
        assert_eq!(f("5."), Some(5.0));
        assert_eq!(f("inf"), Some(f64::INFINITY));
        assert_eq!(f("-Infinity"), Some(f64::NEG_INFINITY));
        assert_eq!(f("0x10"), Some(16.0));
        assert_eq!(f("0x1p-2"), Some(0.25));
        assert_eq!(f("1e-310"), Some(1e-310));
        for bad in ["", " 1", "1 ", "nan", "1e400", "-1e400", "1e-400", "abc", "1e", "0x", ".", "1..2"] {
            assert_eq!(f(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn range_items_parse_like_zslparserange() {
        assert_eq!(score_item(b"(1.5"), Some((1.5, true)));
        assert_eq!(score_item(b"-inf"), Some((f64::NEG_INFINITY, false)));
        assert_eq!(score_item(b"1e400"), Some((f64::INFINITY, false)));
        assert_eq!(score_item(b" 2"), Some((2.0, false)));
        assert_eq!(score_item(b""), Some((0.0, false)));
        assert_eq!(score_item(b"("), Some((0.0, true)));
        assert_eq!(score_item(b"3\0junk"), Some((3.0, false)));
        assert_eq!(score_item(b"x"), None);
        assert_eq!(score_item(b"nan"), None);
        assert_eq!(score_item(b"  "), None);
        assert_eq!(score_item(b"1 "), None);
    }

    #[test]
    fn score_bounds() {
        let r = ScoreRange { min: 1.0, max: 1.0, minex: true, maxex: false };
        assert!(r.is_empty() && r.bounds().is_none());
        let r = ScoreRange { min: -0.0, max: 0.0, minex: false, maxex: false };
        let (lo, hi) = r.bounds().unwrap();
        let zero = score_bytes(0.0).to_vec();
        assert_eq!(lo, Bound::Included(zero.clone()));
        assert!(matches!(hi, Bound::Excluded(ref e) if e > &zero));
    }

    #[test]
    fn lex_ranges() {
        let r = |a: &str, b: &str| parse_lex_range(a.as_bytes(), b.as_bytes()).unwrap();
        assert!(!r("-", "+").is_empty());
        assert!(r("+", "-").is_empty());
        assert!(r("-", "-").is_empty());
        assert!(r("[b", "[a").is_empty());
        assert!(!r("[a", "[a").is_empty());
        assert!(r("(a", "[a").is_empty());
        assert!(r("[c", "-").is_empty());
        assert!(r("(a", "(b").gte_min(b"ab"));
        assert!(!r("(a", "(b").lte_max(b"b"));
        assert!(parse_lex_range(b"a", b"+").is_err());
        assert!(parse_lex_range(b"[a", b"+x").is_err());
        assert!(parse_lex_range(b"", b"+").is_err());
    }
}
