//! Damage as Redis's corrupt-dump fuzzer does it (one or two bytes
//! replaced), plus a cut and an insertion: what the fuzz smoke tests apply
//! to their seeds.

use proptest::prelude::*;

/// Bytes replaced (position, byte), a cut, an insertion (positions are
/// taken modulo the input's length).
pub type Damage = (Vec<(usize, u8)>, Option<usize>, Option<(usize, u8)>);

pub fn damage() -> impl Strategy<Value = Damage> {
    (
        proptest::collection::vec((any::<usize>(), any::<u8>()), 1..3),
        proptest::option::of(any::<usize>()),
        proptest::option::of((any::<usize>(), any::<u8>())),
    )
}

/// `data` with `damage` done to it.
pub fn apply(mut data: Vec<u8>, (flips, cut, insert): Damage) -> Vec<u8> {
    for (at, byte) in flips {
        let n = data.len();
        data[at % n] = byte;
    }
    if let Some((at, byte)) = insert {
        let n = data.len();
        data.insert(at % (n + 1), byte);
    }
    if let Some(c) = cut {
        let n = data.len();
        data.truncate(c % (n + 1));
    }
    data
}
