//! Stream entry IDs (`<ms>-<seq>`): parsing with Redis 7.0's rules and
//! error words, formatting, and the 16-byte big-endian form the stream's
//! sub-keys use, so that byte order is ID order.
//!
//! It is a module of its own because every stream command (and COPY, the
//! consumer groups' records, the blocking serve) reads or writes IDs.

use crate::cmd::CmdError;

/// A stream entry ID.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId {
    /// Milliseconds part.
    pub ms: u64,
    /// Sequence part.
    pub seq: u64,
}

/// The error every malformed ID gets.
pub fn invalid_id() -> CmdError {
    CmdError::err("Invalid stream ID specified as stream command argument")
}

impl StreamId {
    /// The smallest ID, 0-0.
    pub const MIN: StreamId = StreamId { ms: 0, seq: 0 };
    /// The largest ID.
    pub const MAX: StreamId = StreamId { ms: u64::MAX, seq: u64::MAX };

    /// An ID from its parts.
    pub fn new(ms: u64, seq: u64) -> StreamId {
        StreamId { ms, seq }
    }

    /// The 16 big-endian bytes (sub-key form).
    pub fn bytes(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&self.ms.to_be_bytes());
        b[8..].copy_from_slice(&self.seq.to_be_bytes());
        b
    }

    /// Reads the first 16 bytes of `b`.
    pub fn from_bytes(b: &[u8]) -> Option<StreamId> {
        let ms = u64::from_be_bytes(b.get(..8)?.try_into().ok()?);
        let seq = u64::from_be_bytes(b.get(8..16)?.try_into().ok()?);
        Some(StreamId { ms, seq })
    }

    /// The next ID, `None` past the last one.
    pub fn incr(&self) -> Option<StreamId> {
        if self.seq == u64::MAX {
            if self.ms == u64::MAX {
                return None;
            }
            return Some(StreamId::new(self.ms + 1, 0));
        }
        Some(StreamId::new(self.ms, self.seq + 1))
    }

    /// The previous ID, `None` before 0-0.
    pub fn decr(&self) -> Option<StreamId> {
        if self.seq == 0 {
            if self.ms == 0 {
                return None;
            }
            return Some(StreamId::new(self.ms - 1, u64::MAX));
        }
        Some(StreamId::new(self.ms, self.seq - 1))
    }

    /// Whether this is 0-0.
    pub fn is_zero(&self) -> bool {
        self.ms == 0 && self.seq == 0
    }
}

impl std::fmt::Display for StreamId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

/// Redis's `string2ull`: a strict `long long` first (a negative one is
/// refused), else `strtoull` (blanks, a sign, leading zeros; `-n` wraps).
fn string2ull(s: &[u8]) -> Option<u64> {
    if let Ok(v) = crate::cmd::args::int(s) {
        return u64::try_from(v).ok();
    }
    let mut i = 0;
    while i < s.len() && matches!(s[i], b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c) {
        i += 1;
    }
    let neg = match s.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let digits = s.get(i..)?;
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let v: u64 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    Some(if neg { v.wrapping_neg() } else { v })
}

/// How an ID argument was written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Parsed {
    /// The ID (`seq` 0 when not given).
    pub id: StreamId,
    /// False for the `<ms>-*` form (XADD only).
    pub seq_given: bool,
}

/// `streamGenericParseIDOrReply`: `-`, `+` (unless `strict`), `<ms>`
/// (seq = `missing_seq`), `<ms>-<seq>`, and `<ms>-*` when `allow_star`.
pub fn parse_generic(arg: &[u8], missing_seq: u64, strict: bool, allow_star: bool) -> Result<Parsed, CmdError> {
    if arg.len() > 127 {
        return Err(invalid_id());
    }
    // The C code reads a NUL-terminated copy: an embedded NUL ends it.
    let arg = match arg.iter().position(|&b| b == 0) {
        Some(p) => &arg[..p],
        None => arg,
    };
    if strict && (arg == b"-" || arg == b"+") {
        return Err(invalid_id());
    }
    if arg == b"-" {
        return Ok(Parsed { id: StreamId::MIN, seq_given: true });
    }
    if arg == b"+" {
        return Ok(Parsed { id: StreamId::MAX, seq_given: true });
    }
    let (ms_part, seq_part) = match arg.iter().position(|&b| b == b'-') {
        Some(p) => (&arg[..p], Some(&arg[p + 1..])),
        None => (arg, None),
    };
    let ms = string2ull(ms_part).ok_or_else(invalid_id)?;
    match seq_part {
        Some(b"*") if allow_star => Ok(Parsed { id: StreamId::new(ms, 0), seq_given: false }),
        Some(s) => {
            let seq = string2ull(s).ok_or_else(invalid_id)?;
            Ok(Parsed { id: StreamId::new(ms, seq), seq_given: true })
        }
        None => Ok(Parsed { id: StreamId::new(ms, missing_seq), seq_given: true }),
    }
}

/// An ID where `-` and `+` are allowed.
pub fn parse(arg: &[u8], missing_seq: u64) -> Result<StreamId, CmdError> {
    Ok(parse_generic(arg, missing_seq, false, false)?.id)
}

/// An ID where `-` and `+` are refused.
pub fn parse_strict(arg: &[u8], missing_seq: u64) -> Result<StreamId, CmdError> {
    Ok(parse_generic(arg, missing_seq, true, false)?.id)
}

/// A range bound: `(id` is exclusive (and strict), else [`parse`].
/// Returns (id, exclusive).
pub fn parse_interval(arg: &[u8], missing_seq: u64) -> Result<(StreamId, bool), CmdError> {
    if arg.len() > 1 && arg[0] == b'(' {
        Ok((parse_strict(&arg[1..], missing_seq)?, true))
    } else {
        Ok((parse(arg, missing_seq)?, false))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_like_redis() {
        assert_eq!(parse(b"-", 0).unwrap(), StreamId::MIN);
        assert_eq!(parse(b"+", 0).unwrap(), StreamId::MAX);
        assert_eq!(parse(b"5", u64::MAX).unwrap(), StreamId::new(5, u64::MAX));
        assert_eq!(parse(b"5-3", 0).unwrap(), StreamId::new(5, 3));
        assert_eq!(parse(b"05-+3", 0).unwrap(), StreamId::new(5, 3));
        assert!(parse(b"-1", 0).is_err());
        assert!(parse(b"1-x", 0).is_err());
        assert!(parse(b"1-", 0).is_err());
        assert!(parse(b"18446744073709551616", 0).is_err());
        assert!(parse_strict(b"+", 0).is_err());
        let p = parse_generic(b"7-*", 0, true, true).unwrap();
        assert_eq!(p, Parsed { id: StreamId::new(7, 0), seq_given: false });
        assert!(parse(b"7-*", 0).is_err());
        assert_eq!(parse_interval(b"(1-1", 0).unwrap(), (StreamId::new(1, 1), true));
        assert!(parse_interval(b"(+", 0).is_err());
        assert_eq!(parse_interval(b"(", 0).unwrap_err(), invalid_id());
    }

    #[test]
    fn byte_order_is_id_order_and_steps() {
        let a = StreamId::new(1, u64::MAX);
        let b = StreamId::new(2, 0);
        assert!(a.bytes() < b.bytes());
        assert_eq!(a.incr(), Some(b));
        assert_eq!(b.decr(), Some(a));
        assert_eq!(StreamId::MAX.incr(), None);
        assert_eq!(StreamId::MIN.decr(), None);
        assert_eq!(StreamId::from_bytes(&b.bytes()), Some(b));
        assert_eq!(b.to_string(), "2-0");
    }
}
