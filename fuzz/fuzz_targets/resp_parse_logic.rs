// The `resp_parse` fuzz target's logic, shared with
// `crates/tembo-server/tests/fuzz_smoke.rs`.

use tembo_server::resp::{parse, parse_stream, ParseLimits, Reply, Step};

/// Parses `data` as a client's byte stream and checks what must hold:
/// no panic; every frame consumes at least one byte and no more than is
/// there; an error only ends the stream; a frame's args re-encoded as a
/// multibulk parse back to the same args; feeding the stream in two
/// pieces (at `split`) gives the same frames as feeding it whole; and so
/// does a connection's resumable parser (`parse_stream`, which keeps a
/// request's arguments between reads) fed pieces of 1 to 16 bytes.
pub fn resp_parse(data: &[u8]) {
    // The first byte's top bit picks the limits of a client yet to log in.
    let unauthenticated = data.first().is_some_and(|b| b & 0x80 != 0);
    let limits = ParseLimits { max_bulk: 1 << 20, unauthenticated };
    let whole = frames(data, &limits, data.len());
    let split = if data.is_empty() { 0 } else { data[0] as usize % (data.len() + 1) };
    let pieces = frames(data, &limits, split);
    assert_eq!(whole, pieces, "split at {split}");
    let step = data.get(1).map_or(1, |b| (*b as usize % 16) + 1);
    assert_eq!(whole, streamed(data, &limits, step), "fed {step} bytes at a time");
    // An inline line may hold more args than the multibulk limits of a
    // client yet to log in allow (Redis bounds inline only by its length),
    // so the round trip is checked with a logged-in client's limits.
    let logged_in = ParseLimits { unauthenticated: false, ..limits };
    for args in whole.0.iter().filter(|a| !a.is_empty()) {
        let mut enc = Vec::new();
        Reply::Array(args.iter().map(|a| Reply::Bulk(a.clone())).collect()).encode(2, &mut enc);
        let (again, used) = parse(&enc, &logged_in).expect("re-encoded frame parses").expect("complete");
        assert_eq!(&again, args);
        assert_eq!(used, enc.len());
    }
}

type Frames = (Vec<Vec<Vec<u8>>>, bool);

/// Frames of `data` when only `data[..avail]` is there at first and the rest comes later.
fn frames(data: &[u8], limits: &ParseLimits, avail: usize) -> Frames {
    let mut out = Vec::new();
    let mut at = 0;
    let mut have = avail;
    loop {
        match parse(&data[at..have], limits) {
            Ok(Some((args, used))) => {
                assert!(used > 0 && at + used <= have, "used {used} of {}", have - at);
                at += used;
                out.push(args);
            }
            Ok(None) if have < data.len() => have = data.len(),
            Ok(None) => return (out, false),
            Err(_) => return (out, true),
        }
    }
}

/// Frames of `data` fed `step` bytes at a time to [`parse_stream`], as a
/// connection does: consumed bytes leave the buffer, the partial request
/// stays between reads.
fn streamed(data: &[u8], limits: &ParseLimits, step: usize) -> Frames {
    let mut out = Vec::new();
    let mut buf: Vec<u8> = Vec::new();
    let mut partial = None;
    let mut fed = 0;
    loop {
        match parse_stream(&buf, limits, &mut partial) {
            Ok(Step::Request(args, used)) => {
                assert!(used <= buf.len(), "used {used} of {}", buf.len());
                buf.drain(..used);
                out.push(args);
            }
            Ok(Step::More(used)) => {
                assert!(used <= buf.len(), "used {used} of {}", buf.len());
                buf.drain(..used);
                if fed == data.len() {
                    return (out, false);
                }
                let next = (fed + step).min(data.len());
                buf.extend_from_slice(&data[fed..next]);
                fed = next;
            }
            Err(_) => return (out, true),
        }
    }
}
