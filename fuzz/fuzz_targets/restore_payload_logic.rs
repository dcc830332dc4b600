// The `restore_payload` fuzz target's logic, shared with
// `crates/tembo-server/tests/fuzz_smoke.rs`.

use tembo_server::rdb::open_checked;
use tembo_server::rdb_value::{decode, encode, Value};

/// Treats `data` as a RESTORE payload (its checksum not checked, as
/// `DEBUG SET-SKIP-CHECKSUM-VALIDATION 1` lets a client ask) and checks what
/// must hold: no panic; what decodes holds no more elements than the
/// payload's bytes could expand to (LZF yields at most 132 bytes a byte:
/// a forged count or length gets an error, not an allocation); and Tembo's own encoding of it (what DUMP writes) decodes
/// back to the same value.
pub fn restore_payload(data: &[u8]) {
    let Ok(body) = open_checked(data, false) else { return };
    let Ok(value) = decode(body) else { return };
    let elements = match &value {
        Value::String(_) => 1,
        Value::List(v) | Value::Set(v) => v.len(),
        Value::ZSet(v) => v.len(),
        Value::Hash(v) => v.len(),
    };
    assert!(elements <= 132 * body.len() + 32, "{elements} elements from {} bytes", body.len());
    let again = decode(&encode(&value)).expect("Tembo's own encoding decodes");
    // NaN never decodes (RESTORE refuses it), so values compare exactly.
    assert_eq!(again, value);
}
