//! The one RESP2 client every network target is driven through, so that
//! `tembo serve` and `redis-server` pay the same client costs in a report.
//!
//! Why not a client library: the harness needs four reply shapes and a
//! client that adds the same small, allocation-light cost to every request;
//! the Rust Redis clients bring URL parsing, connection managers and their
//! dependency trees for what is a hundred lines here. The parser is checked
//! against the server's own reply encoder by a property test and by the
//! `resp_reply` fuzz target (`tests/resp_reply_fuzz_smoke.rs` runs its
//! checks in `cargo test`).
//!
//! Requests go out as arrays of bulk strings; replies are read whole (a
//! reply is never acted on before its last byte has arrived), and a
//! malformed or truncated reply is an error naming what was wrong, never a
//! panic.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use anyhow::{bail, Context, Result};

/// A reply, as RESP2 has them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// `+OK` and the like.
    Status(String),
    /// `-ERR …`: the server refused the request.
    Error(String),
    /// `:n`.
    Int(i64),
    /// `$n` (`None` for the null bulk string `$-1`).
    Bulk(Option<Vec<u8>>),
    /// `*n` (`None` for the null array `*-1`).
    Array(Option<Vec<Reply>>),
}

/// Nesting deeper than this is refused (no reply the bench asks for nests).
const MAX_DEPTH: usize = 8;
/// A bulk string longer than this (Redis's default `proto-max-bulk-len`)
/// is refused as malformed, before anything is allocated for it.
const MAX_BULK: i64 = 512 << 20;
/// An array with more elements than this is refused as malformed.
const MAX_ITEMS: i64 = 1 << 24;
/// A reply's header line longer than this is refused as malformed.
const MAX_LINE: u64 = 64 * 1024;
/// How long a request may wait for the socket to take it or for its reply.
const IO_TIMEOUT: Duration = Duration::from_secs(60);

/// A connection to one server.
#[derive(Debug)]
pub struct Client {
    reader: BufReader<TcpStream>,
    out: Vec<u8>,
}

impl Client {
    /// Connects to `127.0.0.1:port` with Nagle's algorithm off (every
    /// request is one write and waits for its reply); `timeout` bounds the
    /// connect, and every later write and read (see [`Client::set_timeout`]).
    ///
    /// # Errors
    /// The connect error.
    pub fn connect(port: u16, timeout: Duration) -> Result<Client> {
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
        let stream = TcpStream::connect_timeout(&addr, timeout).with_context(|| format!("connecting to {addr}"))?;
        stream.set_nodelay(true)?;
        let mut c = Client { reader: BufReader::with_capacity(64 * 1024, stream), out: Vec::with_capacity(4096) };
        c.set_timeout(timeout)?;
        Ok(c)
    }

    /// How long a write or a read may block before it fails.
    ///
    /// # Errors
    /// The socket refusing the option.
    pub fn set_timeout(&mut self, timeout: Duration) -> Result<()> {
        let stream = self.reader.get_ref();
        stream.set_read_timeout(Some(timeout))?;
        stream.set_write_timeout(Some(timeout))?;
        Ok(())
    }

    /// [`Client::set_timeout`] with the default for requests (60 s).
    ///
    /// # Errors
    /// As [`Client::set_timeout`].
    pub fn use_request_timeout(&mut self) -> Result<()> {
        self.set_timeout(IO_TIMEOUT)
    }

    /// Queues one request; [`Client::flush`] sends what is queued.
    pub fn queue(&mut self, args: &[&[u8]]) {
        encode(&mut self.out, args);
    }

    /// Sends every queued request in one write.
    ///
    /// # Errors
    /// The socket's error.
    pub fn flush(&mut self) -> Result<()> {
        let stream = self.reader.get_mut();
        stream.write_all(&self.out).context("sending a request")?;
        self.out.clear();
        Ok(())
    }

    /// Reads the next reply.
    ///
    /// # Errors
    /// The socket's error, a closed connection, or a malformed reply.
    pub fn reply(&mut self) -> Result<Reply> {
        read_reply(&mut self.reader, 0)
    }

    /// Sends one request and reads its reply.
    ///
    /// # Errors
    /// As [`Client::flush`] and [`Client::reply`].
    pub fn call(&mut self, args: &[&[u8]]) -> Result<Reply> {
        self.queue(args);
        self.flush()?;
        self.reply()
    }
}

/// Appends `args` as one RESP array of bulk strings.
pub fn encode(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.push(b'*');
    out.extend_from_slice(args.len().to_string().as_bytes());
    out.extend_from_slice(b"\r\n");
    for a in args {
        out.push(b'$');
        out.extend_from_slice(a.len().to_string().as_bytes());
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

/// Reads one reply from `r`.
///
/// # Errors
/// End of input before the reply is whole, or a reply that is not RESP2.
pub fn read_reply(r: &mut impl BufRead, depth: usize) -> Result<Reply> {
    if depth > MAX_DEPTH {
        bail!("reply nests deeper than {MAX_DEPTH} arrays");
    }
    let mut line = Vec::with_capacity(32);
    r.by_ref().take(MAX_LINE).read_until(b'\n', &mut line).context("reading a reply")?;
    if line.is_empty() {
        bail!("the server closed the connection");
    }
    if !line.ends_with(b"\r\n") {
        let shown = String::from_utf8_lossy(&line[..line.len().min(80)]).into_owned();
        bail!("reply line not ended by CRLF within {MAX_LINE} bytes: {shown:?}");
    }
    line.truncate(line.len() - 2);
    if line.is_empty() {
        bail!("empty reply line");
    }
    let (kind, rest) = (line[0], &line[1..]);
    let text = || String::from_utf8_lossy(rest).into_owned();
    let number = || -> Result<i64> {
        std::str::from_utf8(rest)
            .ok()
            .and_then(|s| s.parse::<i64>().ok())
            .with_context(|| format!("bad number in reply: {:?}", String::from_utf8_lossy(rest)))
    };
    Ok(match kind {
        b'+' => Reply::Status(text()),
        b'-' => Reply::Error(text()),
        b':' => Reply::Int(number()?),
        b'$' => match number()? {
            -1 => Reply::Bulk(None),
            n if (0..=MAX_BULK).contains(&n) => {
                let n = n as usize;
                // Grown as the bytes arrive, not allocated from the header.
                let mut body = Vec::with_capacity(n.min(1 << 20) + 2);
                r.by_ref().take(n as u64 + 2).read_to_end(&mut body).context("reading a bulk reply")?;
                if body.len() < n + 2 {
                    bail!("bulk reply of {n} bytes cut short after {}", body.len());
                }
                if &body[n..] != b"\r\n" {
                    bail!("bulk reply of {n} bytes not ended by CRLF");
                }
                body.truncate(n);
                Reply::Bulk(Some(body))
            }
            n => bail!("bad bulk length {n} in reply"),
        },
        b'*' => match number()? {
            -1 => Reply::Array(None),
            n if (0..=MAX_ITEMS).contains(&n) => {
                let mut items = Vec::with_capacity((n as usize).min(1024));
                for _ in 0..n {
                    items.push(read_reply(r, depth + 1)?);
                }
                Reply::Array(Some(items))
            }
            n => bail!("bad array length {n} in reply"),
        },
        other => bail!("unknown reply type {:?}", other as char),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Arbitrary bytes never panic the parser. (That it reads back
        /// what the server's encoder writes, for every reply shape, is
        /// `tests/resp_reply_fuzz_smoke.rs`.)
        #[test]
        fn arbitrary_bytes_are_an_error_or_a_reply(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = read_reply(&mut &bytes[..], 0);
        }
    }

    #[test]
    fn requests_are_arrays_of_bulk_strings() {
        let mut out = Vec::new();
        encode(&mut out, &[b"SET", b"k", b"a\r\nb"]);
        assert_eq!(out, b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$4\r\na\r\nb\r\n");
        let limits = tembo_server::resp::ParseLimits::default();
        let (args, used) = tembo_server::resp::parse(&out, &limits).unwrap().unwrap();
        assert_eq!(used, out.len());
        assert_eq!(args, vec![b"SET".to_vec(), b"k".to_vec(), b"a\r\nb".to_vec()]);
    }

    #[test]
    fn malformed_replies_are_named() {
        let e = read_reply(&mut &b"?x\r\n"[..], 0).unwrap_err().to_string();
        assert!(e.contains("unknown reply type"), "{e}");
        let e = read_reply(&mut &b"$3\r\nabcd\r\n"[..], 0).unwrap_err().to_string();
        assert!(e.contains("not ended by CRLF"), "{e}");
        let e = read_reply(&mut &b":12x\r\n"[..], 0).unwrap_err().to_string();
        assert!(e.contains("bad number"), "{e}");
        let e = read_reply(&mut &b""[..], 0).unwrap_err().to_string();
        assert!(e.contains("closed"), "{e}");
        let deep = b"*1\r\n".repeat(MAX_DEPTH + 2);
        assert!(read_reply(&mut &deep[..], 0).is_err());
        let e = read_reply(&mut &b"\r\n"[..], 0).unwrap_err().to_string();
        assert!(e.contains("empty reply line"), "{e}");
        // Lengths past the limits are refused from the header, before any
        // allocation; a long header line is refused at the limit.
        let e = read_reply(&mut &b"$4294967294\r\n"[..], 0).unwrap_err().to_string();
        assert!(e.contains("bad bulk length"), "{e}");
        let e = read_reply(&mut &b"*4294967294\r\n"[..], 0).unwrap_err().to_string();
        assert!(e.contains("bad array length"), "{e}");
        let long = [b"+".as_slice(), &vec![b'a'; MAX_LINE as usize + 10], b"\r\n"].concat();
        let e = read_reply(&mut &long[..], 0).unwrap_err().to_string();
        assert!(e.contains("not ended by CRLF"), "{e}");
        let e = read_reply(&mut &b"$10\r\nabc"[..], 0).unwrap_err().to_string();
        assert!(e.contains("cut short"), "{e}");
    }
}
