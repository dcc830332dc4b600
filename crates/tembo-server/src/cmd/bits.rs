//! Bit commands on strings: SETBIT GETBIT BITCOUNT BITPOS BITOP BITFIELD
//! BITFIELD_RO, with Redis 7.0's semantics — bit 0 is the most significant
//! bit of the first byte, a string grows zero-padded to the highest bit
//! written, and ranges take Redis's negative indices in BYTE or BIT units.
//!
//! A string lives whole in its metadata record, so a bit write is a
//! read-modify-write of that record inside the command's batch: durable and
//! atomic with the rest of the commit group, as every other write.

use super::args::{int, is};
use super::strings::put_string;
use super::{CmdError, CmdResult, Spec};
use crate::encoding::{Kind, Meta};
use crate::exec::Ctx;
use crate::keyspace::Res;
use crate::resp::Reply;

pub const COMMANDS: &[Spec] = &[
    Spec {
        name: "setbit",
        arity: 4,
        flags: &["write", "denyoom"],
        keys: (1, 1, 1),
        group: "bitmap",
        summary: "SETBIT key offset 0|1: sets one bit, returns its old value.",
        run: setbit,
    },
    Spec {
        name: "getbit",
        arity: 3,
        flags: &["readonly", "fast"],
        keys: (1, 1, 1),
        group: "bitmap",
        summary: "GETBIT key offset: the bit at offset (0 beyond the end).",
        run: getbit,
    },
    Spec {
        name: "bitcount",
        arity: -2,
        flags: &["readonly"],
        keys: (1, 1, 1),
        group: "bitmap",
        summary: "BITCOUNT key [start end [BYTE|BIT]]: counts set bits.",
        run: bitcount,
    },
    Spec {
        name: "bitpos",
        arity: -3,
        flags: &["readonly"],
        keys: (1, 1, 1),
        group: "bitmap",
        summary: "BITPOS key 0|1 [start [end [BYTE|BIT]]]: the first bit with that value.",
        run: bitpos,
    },
    Spec {
        name: "bitop",
        arity: -4,
        flags: &["write", "denyoom"],
        keys: (2, -1, 1),
        group: "bitmap",
        summary: "BITOP AND|OR|XOR|NOT destkey key [key ...]: bitwise operation into destkey.",
        run: bitop,
    },
    Spec {
        name: "bitfield",
        arity: -2,
        flags: &["write", "denyoom"],
        keys: (1, 1, 1),
        group: "bitmap",
        summary:
            "BITFIELD key [GET type offset] [SET type offset value] [INCRBY type offset incr] [OVERFLOW WRAP|SAT|FAIL].",
        run: bitfield,
    },
    Spec {
        name: "bitfield_ro",
        arity: -2,
        flags: &["readonly", "fast"],
        keys: (1, 1, 1),
        group: "bitmap",
        summary: "BITFIELD_RO key [GET type offset ...]: the read-only BITFIELD.",
        run: bitfield_ro,
    },
];

/// A bit offset argument, below proto-max-bulk-len × 8. With `hash`,
/// `#n` means n × `bits`.
fn bit_offset(cx: &Ctx, arg: &[u8], hash_bits: Option<u64>) -> Res<u64> {
    let bad = || CmdError::err("bit offset is not an integer or out of range");
    let (digits, mult) = match (hash_bits, arg.first()) {
        (Some(bits), Some(b'#')) => (&arg[1..], bits),
        _ => (arg, 1),
    };
    let n = int(digits).map_err(|_| bad())?;
    let n = u64::try_from(n).ok().and_then(|n| n.checked_mul(mult)).ok_or_else(bad)?;
    if n >> 3 >= cx.st.shared.max_bulk() as u64 {
        return Err(bad());
    }
    Ok(n)
}

fn string(cx: &mut Ctx, key: &[u8]) -> Res<Option<Meta>> {
    cx.lookup_kind(key, Kind::String)
}

fn bit_at(v: &[u8], bit: u64) -> u8 {
    v.get((bit >> 3) as usize).map_or(0, |b| (b >> (7 - (bit & 7))) & 1)
}

fn setbit(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let offset = bit_offset(cx, &a[2], None)?;
    let on = match a[3].as_slice() {
        b"0" => false,
        b"1" => true,
        _ => return Err(CmdError::err("bit is not an integer or out of range")),
    };
    let byte = offset >> 3;
    let mut e = cx.edit_string(&a[1], |_| (byte, byte + 1))?;
    let mask = 1u8 << (7 - (offset & 7));
    let at = (byte - e.lo()) as usize;
    let unchanged_len = e.existed() && byte < e.len;
    let bit = &mut e.bytes()[at];
    let was = (*bit & mask != 0) as i64;
    if unchanged_len && (was == 1) == on {
        // As in Redis 7.0: a bit that already holds the value writes
        // nothing, and so breaks no WATCH and sends no event.
        return Ok(Reply::Int(was));
    }
    if on {
        *bit |= mask;
    } else {
        *bit &= !mask;
    }
    let len = e.len.max(byte + 1);
    cx.finish_string_edit(&a[1], e, len)?;
    Ok(Reply::Int(was))
}

/// Reads only the byte that holds the bit.
fn getbit(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let offset = bit_offset(cx, &a[2], None)?;
    let byte = offset >> 3;
    let v = match cx.string_len(&a[1])? {
        Some(len) if byte < len => cx.string_part(&a[1], byte, 1)?,
        _ => Vec::new(),
    };
    Ok(Reply::Int(bit_at(&v, offset & 7) as i64))
}

/// Whether a range's unit argument asks for bits (BIT) or bytes (BYTE).
fn unit_is_bit(arg: &[u8]) -> Res<bool> {
    if is(arg, "bit") {
        Ok(true)
    } else if is(arg, "byte") {
        Ok(false)
    } else {
        Err(CmdError::syntax())
    }
}

/// Resolves Redis's [start, end] (negative from the end, clamped) over
/// `total` units to an inclusive range, or `None` when it is empty.
fn clamp_range(start: i64, end: i64, total: i64) -> Option<(u64, u64)> {
    let start = if start < 0 { (total + start).max(0) } else { start };
    let end = if end < 0 { (total + end).max(0) } else { end };
    let end = end.min(total - 1);
    (start <= end).then_some((start as u64, end as u64))
}

/// The inclusive bit range a BYTE or BIT range names.
fn bit_span(range: (u64, u64), in_bits: bool) -> (u64, u64) {
    if in_bits {
        range
    } else {
        (range.0 * 8, range.1 * 8 + 7)
    }
}

fn count_ones(v: &[u8], (first, last): (u64, u64)) -> i64 {
    let (fb, lb) = ((first >> 3) as usize, (last >> 3) as usize);
    let mut n: i64 = v[fb..=lb].iter().map(|b| b.count_ones() as i64).sum();
    // Take off the bits of the end bytes that lie outside the range.
    let before_first = (0xff00u16 >> (first & 7)) as u8; // the bits of v[fb] before `first`
    let after_last = ((1u16 << (7 - (last & 7))) - 1) as u8; // the bits of v[lb] after `last`
    n -= (v[fb] & before_first).count_ones() as i64;
    n -= (v[lb] & after_last).count_ones() as i64;
    n
}

fn bitcount(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    // Redis 7.0 looks the key up before it reads the range: a missing key
    // counts 0 and a wrong type is refused whatever follows.
    let Some(m) = string(cx, &a[1])? else { return Ok(Reply::Int(0)) };
    let range = match a.len() {
        2 => None,
        4 | 5 => {
            let (start, end) = (int(&a[2])?, int(&a[3])?);
            if start < 0 && end < 0 && start > end {
                // Redis 7.0 answers this before it reads the unit.
                return Ok(Reply::Int(0));
            }
            let in_bits = if a.len() == 5 { unit_is_bit(&a[4])? } else { false };
            Some((start, end, in_bits))
        }
        _ => return Err(CmdError::syntax()),
    };
    let v = m.value;
    let span = match range {
        None => clamp_range(0, -1, v.len() as i64).map(|r| bit_span(r, false)),
        Some((start, end, _)) if start < 0 && end < 0 && start > end => None,
        Some((start, end, in_bits)) => {
            let total = v.len() as i64 * if in_bits { 8 } else { 1 };
            clamp_range(start, end, total).map(|r| bit_span(r, in_bits))
        }
    };
    Ok(Reply::Int(span.map_or(0, |s| count_ones(&v, s))))
}

fn bitpos(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let want = match int(&a[2])? {
        0 => 0u8,
        1 => 1u8,
        _ => return Err(CmdError::err("The bit argument must be 1 or 0.")),
    };
    let Some(m) = string(cx, &a[1])? else { return Ok(Reply::Int(if want == 1 { -1 } else { 0 })) };
    if a.len() > 6 {
        return Err(CmdError::syntax());
    }
    let v = m.value;
    let start = if a.len() >= 4 { int(&a[3])? } else { 0 };
    let in_bits = if a.len() == 6 { unit_is_bit(&a[5])? } else { false };
    let total = v.len() as i64 * if in_bits { 8 } else { 1 };
    let end_given = a.len() >= 5;
    let end = if end_given { int(&a[4])? } else { total - 1 };
    let Some(span) = clamp_range(start, end, total).map(|r| bit_span(r, in_bits)) else {
        return Ok(Reply::Int(-1));
    };
    if let Some(pos) = (span.0..=span.1).find(|&b| bit_at(&v, b) == want) {
        return Ok(Reply::Int(pos as i64));
    }
    // No clear bit in the string: without an explicit end, the string
    // counts as padded with zeros on the right.
    Ok(Reply::Int(if want == 0 && !end_given { span.1 as i64 + 1 } else { -1 }))
}

fn bitop(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let op = String::from_utf8_lossy(&a[1]).to_ascii_lowercase();
    if !["and", "or", "xor", "not"].contains(&op.as_str()) {
        return Err(CmdError::syntax());
    }
    if op == "not" && a.len() != 4 {
        return Err(CmdError::err("BITOP NOT must be called with a single source key."));
    }
    let mut sources = Vec::with_capacity(a.len() - 3);
    for key in &a[3..] {
        sources.push(string(cx, key)?.map_or_else(Vec::new, |m| m.value));
    }
    let len = sources.iter().map(Vec::len).max().unwrap_or(0);
    let byte = |s: &Vec<u8>, i: usize| s.get(i).copied().unwrap_or(0);
    let out: Vec<u8> = (0..len)
        .map(|i| {
            let mut it = sources.iter().map(|s| byte(s, i));
            let first = it.next().unwrap_or(0);
            match op.as_str() {
                "and" => it.fold(first, |x, y| x & y),
                "or" => it.fold(first, |x, y| x | y),
                "xor" => it.fold(first, |x, y| x ^ y),
                _ => !first,
            }
        })
        .collect();
    let dest = &a[2];
    let old = cx.lookup(dest)?;
    if out.is_empty() {
        if let Some(m) = old {
            cx.remove(dest, &m);
        }
    } else {
        put_string(cx, dest, old.as_ref(), out, 0)?;
    }
    Ok(Reply::Int(len as i64))
}

/// What a BITFIELD operation does.
#[derive(Clone, Copy, PartialEq)]
enum Op {
    Get,
    Set(i64),
    IncrBy(i64),
}

#[derive(Clone, Copy, PartialEq)]
enum Overflow {
    Wrap,
    Sat,
    Fail,
}

/// One parsed BITFIELD operation on `bits` bits at bit `offset`.
struct Field {
    op: Op,
    signed: bool,
    bits: u32,
    offset: u64,
    overflow: Overflow,
}

fn field_type(arg: &[u8]) -> Res<(bool, u32)> {
    let bad = || {
        CmdError::err("Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.")
    };
    // Lower case only, as Redis's `getBitfieldTypeFromArgument` reads it.
    let signed = match arg.first() {
        Some(b'i') => true,
        Some(b'u') => false,
        _ => return Err(bad()),
    };
    let bits = int(&arg[1..]).map_err(|_| bad())?;
    let max = if signed { 64 } else { 63 };
    if !(1..=max).contains(&bits) {
        return Err(bad());
    }
    Ok((signed, bits as u32))
}

fn parse_fields(cx: &Ctx, a: &[Vec<u8>], read_only: bool) -> Res<Vec<Field>> {
    let mut fields = Vec::new();
    let mut overflow = Overflow::Wrap;
    let mut j = 2;
    while j < a.len() {
        let rest = a.len() - j - 1;
        let sub = &a[j];
        if is(sub, "overflow") && rest >= 1 {
            overflow = if is(&a[j + 1], "wrap") {
                Overflow::Wrap
            } else if is(&a[j + 1], "sat") {
                Overflow::Sat
            } else if is(&a[j + 1], "fail") {
                Overflow::Fail
            } else {
                return Err(CmdError::err("Invalid OVERFLOW type specified"));
            };
            j += 2;
            continue;
        }
        let takes = if is(sub, "get") && rest >= 2 {
            2
        } else if (is(sub, "set") || is(sub, "incrby")) && rest >= 3 {
            3
        } else {
            return Err(CmdError::syntax());
        };
        let (signed, bits) = field_type(&a[j + 1])?;
        let offset = bit_offset(cx, &a[j + 2], Some(bits as u64))?;
        let op = if takes == 2 {
            Op::Get
        } else {
            if read_only {
                return Err(CmdError::err("BITFIELD_RO only supports the GET subcommand"));
            }
            let n = int(&a[j + 3]).map_err(|_| CmdError::err("value is not an integer or out of range"))?;
            if is(sub, "set") {
                Op::Set(n)
            } else {
                Op::IncrBy(n)
            }
        };
        fields.push(Field { op, signed, bits, offset, overflow });
        j += 1 + takes;
    }
    Ok(fields)
}

fn get_unsigned(v: &[u8], offset: u64, bits: u32) -> u64 {
    (0..bits as u64).fold(0u64, |acc, i| (acc << 1) | bit_at(v, offset + i) as u64)
}

fn get_signed(v: &[u8], offset: u64, bits: u32) -> i64 {
    let u = get_unsigned(v, offset, bits);
    if bits == 64 {
        u as i64
    } else {
        // Sign-extend from the field's top bit.
        ((u << (64 - bits)) as i64) >> (64 - bits)
    }
}

fn set_bits(v: &mut [u8], offset: u64, bits: u32, value: u64) {
    for i in 0..bits as u64 {
        let bit = (value >> (bits as u64 - 1 - i)) & 1;
        let pos = offset + i;
        let (byte, mask) = ((pos >> 3) as usize, 1u8 << (7 - (pos & 7)));
        if bit == 1 {
            v[byte] |= mask;
        } else {
            v[byte] &= !mask;
        }
    }
}

/// `value + incr` for an unsigned field of `bits` bits: `Ok(sum)` when it
/// fits, else `Err(what the overflow policy makes of it)` (`None`: FAIL).
fn add_unsigned(value: u64, incr: i64, bits: u32, ow: Overflow) -> Result<u64, Option<u64>> {
    let max = if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 };
    let max_incr = max.wrapping_sub(value) as i64;
    let min_incr = (value as i64).wrapping_neg();
    let wrapped = value.wrapping_add(incr as u64) & max;
    if value > max || (incr > 0 && incr > max_incr) {
        Err(match ow {
            Overflow::Wrap => Some(wrapped),
            Overflow::Sat => Some(max),
            Overflow::Fail => None,
        })
    } else if incr < 0 && incr < min_incr {
        Err(match ow {
            Overflow::Wrap => Some(wrapped),
            Overflow::Sat => Some(0),
            Overflow::Fail => None,
        })
    } else {
        Ok(value.wrapping_add(incr as u64))
    }
}

/// The signed counterpart of [`add_unsigned`].
fn add_signed(value: i64, incr: i64, bits: u32, ow: Overflow) -> Result<i64, Option<i64>> {
    let max = if bits == 64 { i64::MAX } else { (1i64 << (bits - 1)) - 1 };
    let min = -max - 1;
    let max_incr = (max as u64).wrapping_sub(value as u64) as i64;
    let min_incr = min.wrapping_sub(value);
    let wrapped = {
        let mut c = (value as u64).wrapping_add(incr as u64);
        if bits < 64 {
            let mask = u64::MAX << bits;
            if c & (1u64 << (bits - 1)) != 0 {
                c |= mask;
            } else {
                c &= !mask;
            }
        }
        c as i64
    };
    let limit = |l: i64| match ow {
        Overflow::Wrap => Some(wrapped),
        Overflow::Sat => Some(l),
        Overflow::Fail => None,
    };
    if value > max || (bits != 64 && incr > max_incr) || (value >= 0 && incr > 0 && incr > max_incr) {
        Err(limit(max))
    } else if value < min || (bits != 64 && incr < min_incr) || (value < 0 && incr < 0 && incr < min_incr) {
        Err(limit(min))
    } else {
        Ok(value.wrapping_add(incr))
    }
}

fn run_fields(cx: &mut Ctx, key: &[u8], fields: &[Field]) -> CmdResult {
    let writes = fields.iter().any(|f| f.op != Op::Get);
    let top = fields.iter().filter(|f| f.op != Op::Get).map(|f| f.offset + f.bits as u64 - 1).max();
    let need = top.map_or(0, |t| (t >> 3) + 1);
    // The bytes the fields read or write: a read past the string's end
    // sees zeros without them being there.
    let lo = fields.iter().map(|f| f.offset >> 3).min().unwrap_or(0);
    let hi = fields.iter().map(|f| ((f.offset + f.bits as u64 - 1) >> 3) + 1).max().unwrap_or(0);
    let mut e = cx.edit_string(key, |len| (lo, need.max(hi.min(len))))?;
    let base = e.lo() * 8;
    let v = e.bytes();
    let mut out = Vec::with_capacity(fields.len());
    for f in fields {
        let (off, bits) = (f.offset - base, f.bits);
        let reply = match (f.op, f.signed) {
            (Op::Get, true) => Reply::Int(get_signed(v, off, bits)),
            (Op::Get, false) => Reply::Int(get_unsigned(v, off, bits) as i64),
            (op, true) => {
                let old = get_signed(v, off, bits);
                let (target, ret_new) = match op {
                    Op::Set(n) => (add_signed(n, 0, bits, f.overflow), false),
                    Op::IncrBy(n) => (add_signed(old, n, bits, f.overflow), true),
                    Op::Get => (Ok(old), false),
                };
                match target.or_else(|limited| limited.ok_or(())) {
                    Ok(new) => {
                        set_bits(v, off, bits, new as u64);
                        Reply::Int(if ret_new { new } else { old })
                    }
                    Err(()) => Reply::Nil,
                }
            }
            (op, false) => {
                let old = get_unsigned(v, off, bits);
                let (target, ret_new) = match op {
                    Op::Set(n) => (add_unsigned(n as u64, 0, bits, f.overflow), false),
                    Op::IncrBy(n) => (add_unsigned(old, n, bits, f.overflow), true),
                    Op::Get => (Ok(old), false),
                };
                match target.or_else(|limited| limited.ok_or(())) {
                    Ok(new) => {
                        set_bits(v, off, bits, new);
                        Reply::Int(if ret_new { new as i64 } else { old as i64 })
                    }
                    Err(()) => Reply::Nil,
                }
            }
        };
        out.push(reply);
    }
    if writes {
        let len = e.len.max(need);
        cx.finish_string_edit(key, e, len)?;
    }
    Ok(Reply::Array(out))
}

fn bitfield(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let fields = parse_fields(cx, a, false)?;
    run_fields(cx, &a[1], &fields)
}

fn bitfield_ro(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let fields = parse_fields(cx, a, true)?;
    run_fields(cx, &a[1], &fields)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bit_counting_masks_the_end_bytes() {
        let v = [0xffu8, 0xf0, 0x0f];
        assert_eq!(count_ones(&v, (0, 23)), 16);
        assert_eq!(count_ones(&v, (1, 7)), 7);
        assert_eq!(count_ones(&v, (4, 11)), 8);
        assert_eq!(count_ones(&v, (12, 19)), 0);
        assert_eq!(count_ones(&v, (20, 20)), 1);
    }

    #[test]
    fn fields_read_back_what_was_written() {
        let mut v = vec![0u8; 10];
        set_bits(&mut v, 5, 13, 0x1abc);
        assert_eq!(get_unsigned(&v, 5, 13), 0x1abc);
        set_bits(&mut v, 3, 8, (-3i64) as u64);
        assert_eq!(get_signed(&v, 3, 8), -3);
        set_bits(&mut v, 0, 64, u64::MAX);
        assert_eq!(get_signed(&v, 0, 64), -1);
    }

    #[test]
    fn overflow_policies_follow_redis() {
        assert_eq!(add_unsigned(250, 10, 8, Overflow::Wrap), Err(Some(4)));
        assert_eq!(add_unsigned(250, 10, 8, Overflow::Sat), Err(Some(255)));
        assert_eq!(add_unsigned(250, 10, 8, Overflow::Fail), Err(None));
        assert_eq!(add_unsigned(5, -10, 8, Overflow::Sat), Err(Some(0)));
        assert_eq!(add_unsigned(5, 3, 8, Overflow::Wrap), Ok(8));
        assert_eq!(add_signed(120, 10, 8, Overflow::Wrap), Err(Some(-126)));
        assert_eq!(add_signed(120, 10, 8, Overflow::Sat), Err(Some(127)));
        assert_eq!(add_signed(-120, -10, 8, Overflow::Sat), Err(Some(-128)));
        assert_eq!(add_signed(i64::MAX, 1, 64, Overflow::Wrap), Err(Some(i64::MIN)));
        assert_eq!(add_signed(300, 0, 8, Overflow::Sat), Err(Some(127)));
    }
}
