//! The x87 80-bit `long double` of INCRBYFLOAT and HINCRBYFLOAT.
//!
//! Redis 7 does these increments in `long double`: it reads both numbers
//! with `strtold` (`string2ld`), adds them, and writes the sum with
//! `"%.17Lf"` minus trailing zeros (`ld2string`, `LD_STR_HUMAN`). On x86-64
//! Linux — where Redis runs and where the differential test compares — a
//! `long double` has a 64-bit significand, so `INCRBYFLOAT` of 0.1 on 1000
//! answers "1000.09999999999999998" and 0.1 + 0.2 answers "0.3", not what
//! `f64` arithmetic would print. Rust has no such type, and this crate has
//! no unsafe code for a C call, so this module does the three steps in
//! software, exactly: correct rounding to nearest-even at every step, the
//! x87 exponent range (subnormals down to 2^-16445, overflow at 2^16384),
//! and exact decimal output — on a small big-integer type of its own.

use std::cmp::Ordering;

/// Significand bits of the x87 extended format.
const P: u64 = 64;
/// Exponent of the smallest subnormal's unit (2^-16445).
const EMIN: i64 = -16445;
/// Every finite value is below 2^EMAX.
const EMAX: i64 = 16384;
/// `string2ld` refuses strings this long or longer (`MAX_LONG_DOUBLE_CHARS`).
const MAX_CHARS: usize = 5 * 1024;

/// A `long double`: ±`mant` × 2^`exp`, or an infinity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ld {
    /// A finite value (zero has `mant` 0 and keeps its sign).
    Finite {
        /// Negative.
        neg: bool,
        /// The significand (at most 64 bits).
        mant: u64,
        /// The power of two it is scaled by.
        exp: i64,
    },
    /// An infinity.
    Inf {
        /// Negative.
        neg: bool,
    },
}

impl Ld {
    /// Positive zero (a missing key or field counts as 0).
    pub const ZERO: Ld = Ld::Finite { neg: false, mant: 0, exp: 0 };

    /// Whether this is neither infinite (nor NaN, which `Ld` cannot hold).
    pub fn is_finite(&self) -> bool {
        matches!(self, Ld::Finite { .. })
    }

    /// The sum, rounded to nearest-even; `None` for NaN (inf + -inf).
    pub fn add(self, other: Ld) -> Option<Ld> {
        let (Ld::Finite { neg: an, mant: am, exp: ae }, Ld::Finite { neg: bn, mant: bm, exp: be }) = (self, other)
        else {
            return match (self, other) {
                (Ld::Inf { neg: a }, Ld::Inf { neg: b }) if a != b => None,
                (Ld::Inf { .. }, _) => Some(self),
                _ => Some(other),
            };
        };
        if am == 0 && bm == 0 {
            return Some(Ld::Finite { neg: an && bn, mant: 0, exp: 0 });
        }
        if am == 0 {
            return Some(other);
        }
        if bm == 0 {
            return Some(self);
        }
        let e = ae.min(be);
        let a = Big::from_u128(am as u128).shl((ae - e) as u64);
        let b = Big::from_u128(bm as u128).shl((be - e) as u64);
        Some(if an == bn {
            round(an, a.add(&b), false, e)
        } else {
            match a.cmp(&b) {
                Ordering::Equal => Ld::ZERO,
                Ordering::Greater => round(an, a.sub(&b), false, e),
                Ordering::Less => round(bn, b.sub(&a), false, e),
            }
        })
    }

    /// `"%.17Lf"` with the trailing zeros (and a bare '.') removed and "-0"
    /// written "0": Redis's `ld2string(..., LD_STR_HUMAN)`. Finite values only.
    pub fn to_human(self) -> String {
        let Ld::Finite { neg, mant, exp } = self else {
            return if matches!(self, Ld::Inf { neg: true }) { "-inf".into() } else { "inf".into() };
        };
        let mut n = Big::from_u128(mant as u128);
        n.mul_pow10(17);
        let r = if exp >= 0 {
            n.shl(exp as u64)
        } else {
            let sh = (-exp) as u64;
            let mut q = n.shr(sh);
            let half = n.bit(sh - 1);
            if half && (n.any_below(sh - 1) || q.bit(0)) {
                q = q.add(&Big::from_u128(1));
            }
            q
        };
        let mut digits = r.to_decimal();
        if digits.len() < 18 {
            digits = format!("{}{digits}", "0".repeat(18 - digits.len()));
        }
        let (int, frac) = digits.split_at(digits.len() - 17);
        let frac = frac.trim_end_matches('0');
        let mut s = String::with_capacity(digits.len() + 2);
        if neg {
            s.push('-');
        }
        s.push_str(int);
        if !frac.is_empty() {
            s.push('.');
            s.push_str(frac);
        }
        if s == "-0" {
            s = "0".into();
        }
        s
    }
}

/// Redis's `string2ld`: the whole string must be a `strtold` number (decimal
/// or hexadecimal, `inf`/`infinity`), not empty, not 5120 bytes or longer,
/// not starting with a space; NaN and results out of range (an overflow to
/// infinity or an underflow to zero) are refused.
pub fn string2ld(s: &[u8]) -> Option<Ld> {
    if s.is_empty() || s.len() >= MAX_CHARS || s[0].is_ascii_whitespace() || s[0] == 0x0b {
        return None;
    }
    let (neg, body) = match s[0] {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    if body.eq_ignore_ascii_case(b"inf") || body.eq_ignore_ascii_case(b"infinity") {
        return Some(Ld::Inf { neg });
    }
    let hex = body.len() > 2 && body[0] == b'0' && (body[1] | 0x20) == b'x';
    let (digits, frac_digits, rest) = if hex { mantissa(&body[2..], 16)? } else { mantissa(body, 10)? };
    let exp_char = if hex { b'p' } else { b'e' };
    let exp = match rest.split_first() {
        None => 0,
        Some((&c, e)) if c | 0x20 == exp_char => exponent(e)?,
        Some(_) => return None,
    };
    let base = if hex { 16 } else { 10 };
    let mut m = Big::default();
    let mut nonzero = false;
    for &d in &digits {
        nonzero |= d != 0;
        if nonzero {
            m.mul_small(base, d as u32);
        }
    }
    if m.is_zero() {
        return Some(Ld::Finite { neg, mant: 0, exp: 0 });
    }
    let v = if hex {
        round(neg, m, false, exp.saturating_sub(4 * frac_digits as i64))
    } else {
        decimal(neg, m, exp.saturating_sub(frac_digits as i64))
    };
    match v {
        Ld::Finite { mant: 0, .. } | Ld::Inf { .. } => None, // ERANGE: underflow to 0, overflow
        v => Some(v),
    }
}

/// The digits of `[digits][.digits]` (at least one) in `base`, how many came
/// after the point, and what follows them.
fn mantissa(s: &[u8], base: u32) -> Option<(Vec<u8>, usize, &[u8])> {
    let mut digits = Vec::new();
    let mut i = 0;
    let mut frac = None;
    while i < s.len() {
        match (s[i] as char).to_digit(base) {
            Some(d) => {
                digits.push(d as u8);
                if let Some(f) = frac.as_mut() {
                    *f += 1;
                }
            }
            None if s[i] == b'.' && frac.is_none() => frac = Some(0),
            None => break,
        }
        i += 1;
    }
    (!digits.is_empty()).then_some((digits, frac.unwrap_or(0), &s[i..]))
}

/// A decimal exponent `[+-]digits`, saturated far beyond any finite result.
fn exponent(s: &[u8]) -> Option<i64> {
    let (neg, d) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if d.is_empty() || !d.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let v = d.iter().fold(0i64, |v, &c| (v * 10 + (c - b'0') as i64).min(1 << 40));
    Some(if neg { -v } else { v })
}

/// ±`m` × 10^`e10`, rounded.
fn decimal(neg: bool, m: Big, e10: i64) -> Ld {
    let m_digits = (m.bits() as i64 * 30103) / 100_000 + 1; // m < 10^m_digits
    if e10 >= 0 {
        if m_digits + e10 > 4940 {
            return Ld::Inf { neg }; // >= 10^4940 > 2^16384
        }
        let mut n = m;
        n.mul_pow10(e10 as u64);
        return round(neg, n, false, 0);
    }
    let d = -e10;
    if m_digits - d < -4960 {
        return Ld::Finite { neg, mant: 0, exp: 0 }; // < 10^-4960: rounds to zero
    }
    let mut p10 = Big::from_u128(1);
    p10.mul_pow10(d as u64);
    // q = floor(m * 2^k / 10^d) with at least P + 3 bits (k < 0: m's low
    // bits dropped first); a remainder or a dropped bit is sticky.
    let k = (p10.bits() + P + 3) as i64 - m.bits() as i64;
    let (n, lost) = if k >= 0 { (m.shl(k as u64), false) } else { (m.shr(-k as u64), m.any_below(-k as u64)) };
    let (q, r) = n.divrem(&p10);
    round(neg, q, lost || !r.is_zero(), -k)
}

/// Rounds ±(`q` + a fraction when `sticky`) × 2^`exp` to the format,
/// nearest-even, with subnormals and overflow to infinity.
fn round(neg: bool, mut q: Big, sticky: bool, mut exp: i64) -> Ld {
    if sticky {
        // Jam the lost fraction into a low bit below the rounding position.
        let need = (P + 2).saturating_sub(q.bits());
        q = q.shl(need + 1);
        q.set_bit(0);
        exp -= need as i64 + 1;
    }
    if q.is_zero() {
        return Ld::Finite { neg, mant: 0, exp: 0 };
    }
    let bits = q.bits() as i64;
    let mut shift = bits - P as i64;
    if exp + shift < EMIN {
        shift = EMIN - exp;
    }
    let mut mant: u128 = if shift > 0 {
        let sh = shift as u64;
        let mut m = q.shr(sh).low_u128();
        if q.bit(sh - 1) && (q.any_below(sh - 1) || m & 1 == 1) {
            m += 1;
        }
        exp += shift;
        m
    } else {
        q.low_u128()
    };
    if mant == 1 << P {
        mant >>= 1;
        exp += 1;
    }
    if mant != 0 && exp + (128 - mant.leading_zeros() as i64) > EMAX {
        return Ld::Inf { neg };
    }
    if mant == 0 {
        exp = 0;
    }
    Ld::Finite { neg, mant: mant as u64, exp }
}

/// An unsigned big integer, little-endian 32-bit limbs, no leading zero limb.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Big(Vec<u32>);

impl Big {
    fn from_u128(mut v: u128) -> Big {
        let mut b = Big(Vec::new());
        while v != 0 {
            b.0.push(v as u32);
            v >>= 32;
        }
        b
    }

    fn trim(mut self) -> Big {
        while self.0.last() == Some(&0) {
            self.0.pop();
        }
        self
    }

    fn is_zero(&self) -> bool {
        self.0.is_empty()
    }

    fn bits(&self) -> u64 {
        self.0.last().map_or(0, |&top| (self.0.len() as u64 - 1) * 32 + (32 - top.leading_zeros() as u64))
    }

    fn bit(&self, i: u64) -> bool {
        self.0.get((i / 32) as usize).is_some_and(|&l| l >> (i % 32) & 1 == 1)
    }

    fn set_bit(&mut self, i: u64) {
        let limb = (i / 32) as usize;
        if self.0.len() <= limb {
            self.0.resize(limb + 1, 0);
        }
        self.0[limb] |= 1 << (i % 32);
    }

    /// Whether any bit below position `i` is set.
    fn any_below(&self, i: u64) -> bool {
        let full = ((i / 32) as usize).min(self.0.len());
        self.0[..full].iter().any(|&l| l != 0)
            || (i % 32 != 0 && self.0.get(full).is_some_and(|&l| l & ((1u32 << (i % 32)) - 1) != 0))
    }

    fn low_u128(&self) -> u128 {
        self.0.iter().take(4).enumerate().fold(0u128, |v, (i, &l)| v | (l as u128) << (32 * i))
    }

    /// self * m + add.
    fn mul_small(&mut self, m: u32, add: u32) {
        let mut carry = add as u64;
        for l in self.0.iter_mut() {
            let v = *l as u64 * m as u64 + carry;
            *l = v as u32;
            carry = v >> 32;
        }
        if carry != 0 {
            self.0.push(carry as u32);
        }
    }

    fn mul_pow10(&mut self, mut n: u64) {
        if self.is_zero() {
            return;
        }
        while n >= 9 {
            self.mul_small(1_000_000_000, 0);
            n -= 9;
        }
        self.mul_small(10u32.pow(n as u32), 0);
    }

    fn shl(&self, n: u64) -> Big {
        if self.is_zero() {
            return Big::default();
        }
        let (limbs, bits) = ((n / 32) as usize, (n % 32) as u32);
        let mut out = vec![0u32; limbs];
        out.reserve(self.0.len() + 1);
        let mut carry = 0u32;
        for &l in &self.0 {
            out.push(if bits == 0 { l } else { l << bits | carry });
            carry = if bits == 0 { 0 } else { l >> (32 - bits) };
        }
        out.push(carry);
        Big(out).trim()
    }

    fn shr(&self, n: u64) -> Big {
        let limbs = (n / 32) as usize;
        if limbs >= self.0.len() {
            return Big::default();
        }
        let bits = (n % 32) as u32;
        let src = &self.0[limbs..];
        let out = (0..src.len())
            .map(|i| {
                let hi = src.get(i + 1).copied().unwrap_or(0);
                if bits == 0 {
                    src[i]
                } else {
                    src[i] >> bits | hi << (32 - bits)
                }
            })
            .collect();
        Big(out).trim()
    }

    fn add(&self, o: &Big) -> Big {
        let (a, b) = if self.0.len() >= o.0.len() { (self, o) } else { (o, self) };
        let mut out = Vec::with_capacity(a.0.len() + 1);
        let mut carry = 0u64;
        for (i, &l) in a.0.iter().enumerate() {
            let v = l as u64 + b.0.get(i).copied().unwrap_or(0) as u64 + carry;
            out.push(v as u32);
            carry = v >> 32;
        }
        if carry != 0 {
            out.push(carry as u32);
        }
        Big(out)
    }

    /// self - o, for self >= o.
    fn sub(&self, o: &Big) -> Big {
        let mut out = Vec::with_capacity(self.0.len());
        let mut borrow = 0i64;
        for (i, &l) in self.0.iter().enumerate() {
            let mut v = l as i64 - o.0.get(i).copied().unwrap_or(0) as i64 - borrow;
            borrow = 0;
            if v < 0 {
                v += 1 << 32;
                borrow = 1;
            }
            out.push(v as u32);
        }
        Big(out).trim()
    }

    fn cmp(&self, o: &Big) -> Ordering {
        self.0.len().cmp(&o.0.len()).then_with(|| self.0.iter().rev().cmp(o.0.iter().rev()))
    }

    /// (self / d, self % d), by shifting and subtracting: the quotients here
    /// have about 70 bits.
    fn divrem(&self, d: &Big) -> (Big, Big) {
        let mut r = self.clone();
        let mut q = Big::default();
        if self.bits() < d.bits() {
            return (q, r);
        }
        for i in (0..=self.bits() - d.bits()).rev() {
            let t = d.shl(i);
            if r.cmp(&t) != Ordering::Less {
                r = r.sub(&t);
                q.set_bit(i);
            }
        }
        (q, r)
    }

    fn to_decimal(&self) -> String {
        if self.is_zero() {
            return "0".into();
        }
        let mut chunks = Vec::new();
        let mut n = self.clone();
        while !n.is_zero() {
            let mut rem = 0u64;
            for l in n.0.iter_mut().rev() {
                let v = rem << 32 | *l as u64;
                *l = (v / 1_000_000_000) as u32;
                rem = v % 1_000_000_000;
            }
            n = n.trim();
            chunks.push(rem as u32);
        }
        let mut s = chunks.pop().map_or_else(String::new, |c| c.to_string());
        for c in chunks.iter().rev() {
            s.push_str(&format!("{c:09}"));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn incr(a: &str, b: &str) -> Option<String> {
        let s = string2ld(a.as_bytes())?.add(string2ld(b.as_bytes())?)?;
        s.is_finite().then(|| s.to_human())
    }

    #[test]
    fn sums_match_redis_on_x86_64() {
        // Each expected text is what redis-server 7.0.15 (x86-64) answers.
        assert_eq!(incr("1000", "0.1").as_deref(), Some("1000.09999999999999998"));
        assert_eq!(incr("0.1", "0.2").as_deref(), Some("0.3"));
        assert_eq!(incr("10.50", "0.1").as_deref(), Some("10.6"));
        assert_eq!(incr("5.0e3", "2.0e2").as_deref(), Some("5200"));
        assert_eq!(incr("0", "1e-300").as_deref(), Some("0"));
        assert_eq!(incr("-9223372036854775808", "-2").as_deref(), Some("-9223372036854775810"));
        assert_eq!(incr("1.5", "0x10").as_deref(), Some("17.5"));
        assert_eq!(incr("0", "0x1p3").as_deref(), Some("8"));
        assert_eq!(incr("0", "-1e-30").as_deref(), Some("0"));
        assert_eq!(incr("3", "-3").as_deref(), Some("0"));
        assert!(incr("1.5", "1e300").unwrap().starts_with("10000000000000000000089973240795591938705239442732907479382600823212656465961809357558491520837504971903503725086142748359035925561846729839130962605207486462873271356418436532940842551076"));
        assert!(incr("0", "1e4000").unwrap().starts_with(
            "9999999999999999999965463873099623784932492583506957631301508333043261943306342355481821641865509279"
        ));
        assert_eq!(incr("0", "inf"), None);
        assert_eq!(incr("inf", "-inf"), None);
    }

    #[test]
    fn strings_string2ld_refuses() {
        for bad in ["", " 1", "1 ", "nan", "abc", "1e", "0x", ".", "1..2", "1e-5000", "1e5000", "--1", "inf1"] {
            assert_eq!(string2ld(bad.as_bytes()), None, "{bad:?}");
        }
        assert_eq!(string2ld(b"-inf"), Some(Ld::Inf { neg: true }));
        assert_eq!(string2ld(b"+1"), Some(Ld::Finite { neg: false, mant: 1, exp: 0 }));
        assert!(string2ld(b".5").is_some() && string2ld(b"5.").is_some() && string2ld(b"0x.8p1").is_some());
        assert!(string2ld("1".repeat(MAX_CHARS).as_bytes()).is_none());
    }

    #[test]
    fn rounding_is_nearest_even() {
        // 2^64 + 1 is halfway between 2^64 and 2^64 + 2: even wins.
        assert_eq!(string2ld(b"18446744073709551617").unwrap().to_human(), "18446744073709551616");
        assert_eq!(string2ld(b"18446744073709551619").unwrap().to_human(), "18446744073709551620");
        assert_eq!(string2ld(b"1.1").unwrap().to_human(), "1.1");
        assert_eq!(string2ld(b"-0").unwrap().to_human(), "0");
    }
}
