//! The order of a small hash's fields.
//!
//! Redis keeps a hash of at most `hash-max-listpack-entries` fields, none
//! of whose fields or values is longer than `hash-max-listpack-value`
//! bytes, as a listpack: HGETALL, HKEYS, HVALS, HSCAN and HRANDFIELD give
//! its fields in the order they were first set (an overwrite keeps a
//! field's place, HDEL closes the gap), and applications show or compare
//! them in that order. A bigger hash becomes a hash table, whose order is
//! arbitrary, and never goes back.
//!
//! Tembo's fields are sub-keys, in byte order. While a hash has the
//! listpack's shape its metadata record also holds its *field order*: the
//! byte [`HASH_ORDERED`], then each field name (a LEB128 length and its
//! bytes) in order. Adding a field appends its name, HDEL removes names,
//! and outgrowing the shape empties the value, after which the hash reads
//! in byte order, as Redis's hash table reads in its own; a hash written by
//! an older Tembo has an empty value too. The record is rewritten by any
//! command that adds or removes a field anyway (its size changes), and an
//! overwrite leaves it alone, so the order costs no extra key: a name per
//! field in a record that reads are already fetching. (A first version kept
//! an index of `seq -> field` keys beside the fields; the second range scan
//! halved HGETALL's throughput on 20-field hashes.)
//!
//! Reads treat the order as a hint, never as the truth: the sub-keys say
//! which fields exist, the order only where they go; a field it does not
//! name comes after those it does, in byte order.

use std::collections::HashSet;

use crate::encoding::{Kind, Meta, HASH_ORDERED};
use crate::exec::Ctx;

/// The listpack limits in force (`hash-max-listpack-entries`, `-value`).
struct Shape {
    entries: u64,
    value: usize,
}

impl Shape {
    fn of(cx: &Ctx) -> Shape {
        let setting = |name: &str, default: u64| super::inert_u64(&cx.st.inert, name, default);
        Shape {
            entries: setting("hash-max-listpack-entries", 512),
            value: usize::try_from(setting("hash-max-listpack-value", 64)).unwrap_or(usize::MAX),
        }
    }
}

/// Whether the hash `m` keeps its field order.
pub fn is_ordered(m: &Meta) -> bool {
    m.kind == Kind::Hash && m.value.first() == Some(&HASH_ORDERED)
}

/// The field names of an ordered hash's value, in order; a name cut short
/// (a damaged record) ends them.
fn names(m: &Meta) -> impl Iterator<Item = &[u8]> {
    let mut rest = if is_ordered(m) { &m.value[1..] } else { &[][..] };
    std::iter::from_fn(move || {
        let (len, used) = read_len(rest)?;
        let name = rest.get(used..used.checked_add(len)?)?;
        rest = &rest[used + len..];
        Some(name)
    })
}

/// A LEB128 length at the start of `b`, and how many bytes it took.
fn read_len(b: &[u8]) -> Option<(usize, usize)> {
    let mut n: u64 = 0;
    for (i, &byte) in b.iter().enumerate().take(10) {
        n |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some((usize::try_from(n).ok()?, i + 1));
        }
    }
    None
}

fn push_name(value: &mut Vec<u8>, name: &[u8]) {
    let mut n = name.len();
    while n >= 0x80 {
        value.push((n as u8 & 0x7f) | 0x80);
        n >>= 7;
    }
    value.push(n as u8);
    value.extend_from_slice(name);
}

/// Before `field` is set to a value `value_len` bytes long in the hash
/// `m`: a field or value too long for a listpack drops the order (as Redis
/// converts before it sets).
pub fn before_set(cx: &Ctx, m: &mut Meta, field: &[u8], value_len: usize) {
    if is_ordered(m) {
        let shape = Shape::of(cx);
        if field.len() > shape.value || value_len > shape.value {
            m.value.clear();
        }
    }
}

/// After `field` was set in the hash `m` (`m.size` counts it; `added`: it
/// was new): a new field goes at the end of the order, and a hash of more
/// than `hash-max-listpack-entries` fields drops it (Redis checks after an
/// overwrite too, so a lowered limit converts on the next write).
pub fn after_set(cx: &Ctx, m: &mut Meta, field: &[u8], added: bool) {
    if !is_ordered(m) {
        return;
    }
    if m.size > Shape::of(cx).entries {
        m.value.clear();
    } else if added {
        push_name(&mut m.value, field);
    }
}

/// After `removed` fields were deleted from the hash `m`: their names go.
pub fn after_delete(m: &mut Meta, removed: &HashSet<&[u8]>) {
    if !is_ordered(m) || removed.is_empty() {
        return;
    }
    let mut value = vec![HASH_ORDERED];
    for name in names(m).filter(|name| !removed.contains(name)) {
        push_name(&mut value, name);
    }
    m.value = value;
}

/// The order of a new hash `m` whose `fields` are given in order: kept when
/// they fit a listpack (as Redis loads a hash from a payload), else none.
pub fn set_new(cx: &Ctx, m: &mut Meta, fields: &[(Vec<u8>, Vec<u8>)]) {
    let shape = Shape::of(cx);
    let fits = fields.len() as u64 <= shape.entries
        && fields.iter().all(|(f, v)| f.len() <= shape.value && v.len() <= shape.value);
    m.value.clear();
    if fits {
        m.value.push(HASH_ORDERED);
        for (field, _) in fields {
            push_name(&mut m.value, field);
        }
    }
}

/// Puts `pairs` (fields of the hash `m`, in byte order) in the hash's
/// order: the recorded order's, then any field it does not name.
pub fn sort<T>(m: &Meta, pairs: &mut Vec<(Vec<u8>, T)>) {
    if !is_ordered(m) || pairs.len() < 2 {
        return;
    }
    // Fields set in byte order (a fixed schema often is) are in place.
    let in_place = names(m).count() == pairs.len()
        && names(m).zip(pairs.iter()).all(|(name, (field, _))| name == field.as_slice());
    if in_place {
        return;
    }
    // The names by name, with their places; `pairs` is in byte order too,
    // so one merge walk gives each pair its place (no hashing: this runs
    // on every HGETALL of a small hash).
    let mut by_name: Vec<(&[u8], usize)> = names(m).enumerate().map(|(i, name)| (name, i)).collect();
    by_name.sort_unstable();
    let mut places = Vec::with_capacity(pairs.len());
    let mut j = 0;
    for (field, _) in pairs.iter() {
        while j < by_name.len() && by_name[j].0 < field.as_slice() {
            j += 1;
        }
        let named = j < by_name.len() && by_name[j].0 == field.as_slice();
        // Fields the order misses keep their byte order, after the rest.
        places.push(if named { by_name[j].1 } else { usize::MAX });
    }
    let mut keyed: Vec<(usize, (Vec<u8>, T))> = places.into_iter().zip(pairs.drain(..)).collect();
    keyed.sort_by_key(|(place, _)| *place);
    pairs.extend(keyed.into_iter().map(|(_, pair)| pair));
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ordered(names_in: &[Vec<u8>]) -> Meta {
        let mut m = Meta::collection(Kind::Hash, 1);
        for n in names_in {
            push_name(&mut m.value, n);
        }
        m
    }

    proptest! {
        #[test]
        fn names_come_back_in_order(list in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 0..20)) {
            let m = ordered(&list);
            let got: Vec<Vec<u8>> = names(&m).map(<[u8]>::to_vec).collect();
            prop_assert_eq!(got, list);
        }

        #[test]
        fn a_damaged_order_never_panics(value in proptest::collection::vec(any::<u8>(), 0..64)) {
            let mut m = Meta::collection(Kind::Hash, 1);
            m.value = value;
            let mut pairs: Vec<(Vec<u8>, ())> = vec![(b"a".to_vec(), ()), (b"b".to_vec(), ())];
            sort(&m, &mut pairs);
            prop_assert_eq!(pairs.len(), 2);
        }
    }

    #[test]
    fn sort_follows_the_order_then_byte_order() {
        let m = ordered(&[b"z".to_vec(), b"a".to_vec(), b"gone".to_vec(), b"m".to_vec()]);
        let mut pairs =
            vec![(b"a".to_vec(), 1), (b"b".to_vec(), 2), (b"c".to_vec(), 3), (b"m".to_vec(), 4), (b"z".to_vec(), 5)];
        sort(&m, &mut pairs);
        let fields: Vec<&[u8]> = pairs.iter().map(|(f, _)| f.as_slice()).collect();
        assert_eq!(fields, vec![&b"z"[..], b"a", b"m", b"b", b"c"]);
        let mut m2 = m.clone();
        after_delete(&mut m2, &[&b"a"[..]].into_iter().collect());
        assert_eq!(names(&m2).collect::<Vec<_>>(), vec![&b"z"[..], b"gone", b"m"]);
    }
}
