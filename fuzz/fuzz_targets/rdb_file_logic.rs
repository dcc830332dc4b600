// The `rdb_file` fuzz target's logic, shared with
// `crates/tembo-server/tests/rdb_file_fuzz_smoke.rs`.

use tembo_server::rdb::{open_checked, version_of};
use tembo_server::rdb_load::index;
use tembo_server::rdb_value::decode_versioned;

/// Treats `data` as an RDB file (what `tembo rdb import` reads) and checks
/// what must hold: no panic and no allocation the file does not hold; an
/// accepted file names no (database, key) twice and holds no more entries
/// than bytes; every entry's RESTORE payload lies inside the file, opens
/// with its checksum and decodes at the version it is sealed with, as the
/// import then restores it; the libraries' FUNCTION RESTORE payload opens.
pub fn rdb_file(data: &[u8]) {
    let Ok(idx) = index(data) else { return };
    assert!(idx.entries.len() <= data.len(), "{} entries from {} bytes", idx.entries.len(), data.len());
    let mut seen = std::collections::HashSet::new();
    for e in &idx.entries {
        assert!(seen.insert((e.db, e.key.clone())), "key {:?} of db {} twice", e.key, e.db);
        let payload = e.payload(data, idx.version).expect("an entry lies inside its file");
        let body = open_checked(&payload, true).expect("a payload sealed here opens");
        decode_versioned(body, version_of(&payload)).expect("the index decoded this value already");
    }
    if let Some(p) = idx.functions_payload() {
        open_checked(&p, true).expect("the libraries' payload opens");
    }
}
