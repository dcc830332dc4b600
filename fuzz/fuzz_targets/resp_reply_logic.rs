// The `resp_reply` fuzz target's logic, shared with
// `crates/tembo-bench/tests/resp_reply_fuzz_smoke.rs`.

use tembo_bench::targets::resp::{read_reply, Reply};
use tembo_server::resp::Reply as ServerReply;

/// Reads `data` as a server's byte stream with the bench's RESP client and
/// checks what must hold: no panic; every reply read consumes at least one
/// byte; an error ends the stream; a reply re-encoded by the server's
/// encoder reads back the same (status and error lines with CR or LF
/// aside: the encoder blanks those); and the same replies come whether the
/// bytes are read through a small buffer or a large one.
pub fn resp_reply(data: &[u8]) {
    let whole = replies(data, 64 * 1024);
    let cap = data.first().map_or(1, |b| (*b as usize % 16) + 1);
    assert_eq!(whole, replies(data, cap), "read through a {cap}-byte buffer");
    // The server's encoder writes CR and LF of a status or error line as
    // spaces (as Redis does), so only the other replies round-trip exactly.
    for r in whole.iter().filter(|r| verbatim(r)) {
        let mut enc = Vec::new();
        to_server(r).encode(2, &mut enc);
        let back = read_reply(&mut &enc[..], 0).expect("a re-encoded reply reads back");
        assert_eq!(&back, r);
    }
}

fn replies(data: &[u8], buffer: usize) -> Vec<Reply> {
    let mut rd = std::io::BufReader::with_capacity(buffer, data);
    let mut out = Vec::new();
    while let Ok(r) = read_reply(&mut rd, 0) {
        out.push(r);
    }
    // The same stream as a plain slice, whose length shows what each
    // reply consumed.
    let mut cur = data;
    for _ in 0..out.len() {
        let before = cur.len();
        read_reply(&mut cur, 0).expect("read once, reads again");
        assert!(cur.len() < before, "a reply consumed nothing");
    }
    out
}

fn verbatim(r: &Reply) -> bool {
    match r {
        Reply::Status(s) | Reply::Error(s) => !s.contains(['\r', '\n']),
        Reply::Array(Some(items)) => items.iter().all(verbatim),
        _ => true,
    }
}

/// The same reply as the server's encoder takes it.
pub fn to_server(r: &Reply) -> ServerReply {
    match r {
        Reply::Status(s) => ServerReply::Simple(s.clone()),
        Reply::Error(s) => ServerReply::Error(s.clone()),
        Reply::Int(n) => ServerReply::Int(*n),
        Reply::Bulk(None) => ServerReply::Nil,
        Reply::Array(None) => ServerReply::NilArray,
        Reply::Bulk(Some(b)) => ServerReply::Bulk(b.clone()),
        Reply::Array(Some(items)) => ServerReply::Array(items.iter().map(to_server).collect()),
    }
}
