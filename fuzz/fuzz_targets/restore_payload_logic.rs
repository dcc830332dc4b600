// The `restore_payload` fuzz target's logic, shared with
// `crates/tembo-server/tests/restore_fuzz_smoke.rs`.

use tembo_server::rdb::open_checked;
use tembo_server::rdb_stream::{GroupValue, StreamValue};
use tembo_server::rdb_value::{decode, encode, Value};

/// Treats `data` as a RESTORE payload (its checksum not checked, as
/// `DEBUG SET-SKIP-CHECKSUM-VALIDATION 1` lets a client ask) and checks what
/// must hold: no panic; what decodes holds no more elements than the
/// payload's bytes could expand to (LZF yields at most 132 bytes a byte:
/// a forged count or length gets an error, not an allocation); and
/// Tembo's own encoding of it (what DUMP writes) decodes back to the same
/// value.
pub fn restore_payload(data: &[u8]) {
    let Ok(body) = open_checked(data, false) else { return };
    let Ok(value) = decode(body) else { return };
    let elements = match &value {
        Value::String(_) => 1,
        Value::List(v) | Value::Set(v) => v.len(),
        Value::ZSet(v) => v.len(),
        Value::Hash(v) => v.len(),
        Value::Stream(s) => s.entries.len() + s.groups.iter().map(|g| 1 + g.pending.len() + g.consumers.len()).sum::<usize>(),
    };
    assert!(elements <= 132 * body.len() + 32, "{elements} elements from {} bytes", body.len());
    let again = decode(&encode(&value)).expect("Tembo's own encoding decodes");
    // NaN never decodes (RESTORE refuses it), so values compare exactly.
    assert_eq!(again, as_written(value));
}

/// What DUMP's encoding of `v` decodes to: a stream is written as Redis
/// 7.0's type, so one read from Redis 5-6's is no longer `legacy`, and the
/// entries read its groups did not record (to be estimated) read back as
/// unknown.
fn as_written(v: Value) -> Value {
    match v {
        Value::Stream(s) if s.legacy => Value::Stream(StreamValue {
            legacy: false,
            groups: s.groups.into_iter().map(|g| GroupValue { entries_read: None, ..g }).collect(),
            ..s
        }),
        v => v,
    }
}
