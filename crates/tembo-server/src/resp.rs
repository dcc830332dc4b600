//! The Redis wire protocol: request parsing (multibulk and inline) and
//! reply encoding for RESP2 and RESP3.
//!
//! The parser is incremental and allocation-bounded: it never reads past a
//! declared length before the bytes are there, it refuses counts and
//! lengths over the configured limits as soon as their header arrives, and
//! it reports malformed input with Redis's own words ("Protocol error: …")
//! so that the connection can answer and close. [`parse`] has no state of
//! its own: a caller keeps unparsed bytes and calls again when more arrive.
//! A connection uses [`parse_stream`] instead, which keeps the arguments of
//! a request that has arrived in part ([`Partial`]), so that each read
//! parses only the new bytes: re-parsing a big request from its start at
//! every read cost a client that sends a million arguments slowly time
//! quadratic in their number, on the thread that serves every connection.
//! An argument of [`BIG_ARG`] bytes or more that has not arrived whole gets
//! a buffer of its own, of its declared size, at its header (Redis's
//! `PROTO_MBULK_BIG_ARG`): the connection reads the rest straight into it
//! ([`Partial::big_arg`]), so a 100 MB value is neither grown nor copied
//! on its way to the command.

/// Redis refuses a header line (`*N` / `$N`) or an inline command longer than this.
pub const MAX_INLINE: usize = 64 * 1024;
/// Redis refuses a multibulk count over this many arguments.
pub const MAX_MULTIBULK: i64 = 1024 * 1024;
/// An argument at least this long that arrives in parts is read into a
/// buffer of its own rather than through the connection's query buffer.
pub const BIG_ARG: usize = 32 * 1024;

/// What a request may declare before the parser refuses it.
#[derive(Clone, Copy, Debug)]
pub struct ParseLimits {
    /// Largest bulk argument (`proto-max-bulk-len`, default 512 MiB).
    pub max_bulk: usize,
    /// The client must still authenticate: as Redis, at most
    /// [`UNAUTH_MAX_ARGS`] arguments of at most [`UNAUTH_MAX_BULK`] bytes,
    /// so that nobody without the password can make the server buffer
    /// a large request.
    pub unauthenticated: bool,
}

/// Most arguments a request may have before its client authenticates.
pub const UNAUTH_MAX_ARGS: i64 = 10;
/// Largest argument before the client authenticates.
pub const UNAUTH_MAX_BULK: i64 = 16384;

impl Default for ParseLimits {
    fn default() -> Self {
        ParseLimits { max_bulk: 512 * 1024 * 1024, unauthenticated: false }
    }
}

/// A malformed or oversized request; the text follows "-ERR ".
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("Protocol error: {0}")]
pub struct ProtocolError(pub String);

/// Bulk strings at least this long are handed to the connection as they
/// are rather than copied into its reply buffer ([`Reply::encode_spliced`]).
pub const SPLICE_MIN: usize = 16 * 1024;

/// Values left out of a reply buffer, each with the offset in the buffer
/// where its bytes go, in increasing order of offset.
pub type Spliced = Vec<(usize, Vec<u8>)>;

/// Puts spliced values back into `out` (copying them): for a path that
/// needs the replies as one buffer.
pub fn unsplice(out: &mut Vec<u8>, spliced: Spliced) {
    if spliced.is_empty() {
        return;
    }
    let total = out.len() + spliced.iter().map(|(_, v)| v.len()).sum::<usize>();
    let mut whole = Vec::with_capacity(total);
    let mut from = 0;
    for (at, v) in spliced {
        whole.extend_from_slice(&out[from..at]);
        whole.extend_from_slice(&v);
        from = at;
    }
    whole.extend_from_slice(&out[from..]);
    *out = whole;
}

/// One parsed request: its arguments and how many bytes it used.
pub type Frame = (Vec<Vec<u8>>, usize);

/// Parses one request from the front of `buf`.
///
/// `Ok(None)`: more bytes are needed. `Ok(Some((args, used)))`: a request of
/// `used` bytes; `args` is empty for the empty requests Redis skips (`*0`,
/// a blank inline line). Errors are fatal for the connection.
pub fn parse(buf: &[u8], limits: &ParseLimits) -> Result<Option<Frame>, ProtocolError> {
    // No partial state survives this call, so nothing is set aside for a big argument.
    match parse_front(buf, limits, &mut None, false)? {
        Step::Request(args, used) => Ok(Some((args, used))),
        Step::More(_) => Ok(None),
    }
}

/// The arguments of a multibulk request that has arrived in part, kept
/// between reads by [`parse_stream`].
#[derive(Debug, Default)]
pub struct Partial {
    args: Vec<Vec<u8>>,
    /// Arguments still to come.
    left: usize,
    /// Bytes of the request consumed so far, besides those of `big` (they
    /// are no longer in the caller's buffer but still count against its
    /// query-buffer limit).
    bytes: usize,
    /// An argument of at least [`BIG_ARG`] bytes still arriving: the bytes
    /// so far (its CRLF included, once there) and how many it will have
    /// with its CRLF. Allocated at its header, as Redis does: a client
    /// that declares more than it sends holds address space, not memory.
    big: Option<(Vec<u8>, usize)>,
}

impl Partial {
    /// Bytes of the request consumed into this partial state.
    pub fn bytes(&self) -> usize {
        self.bytes + self.big.as_ref().map_or(0, |(b, _)| b.len())
    }

    /// The buffer of a big argument still arriving, and how many more bytes
    /// it takes: a connection with nothing else buffered reads up to that
    /// many straight into it (the next [`parse_stream`] call sees them).
    pub fn big_arg(&mut self) -> Option<(&mut Vec<u8>, usize)> {
        let (b, need) = self.big.as_mut()?;
        let left = *need - b.len();
        (left > 0).then_some((b, left))
    }
}

/// What one call of [`parse_stream`] found at the front of the buffer.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// A whole request, and how many bytes of the buffer this call used.
    Request(Vec<Vec<u8>>, usize),
    /// No whole request yet; this many bytes of the buffer were consumed
    /// into the partial state (the caller drops them).
    More(usize),
}

/// Parses the front of a connection's byte stream, resuming `partial` (the
/// request whose arguments came in part) and leaving one there when the
/// next request is incomplete. Fed the same stream in any pieces, it gives
/// the same requests as [`parse`] given it whole.
pub fn parse_stream(buf: &[u8], limits: &ParseLimits, partial: &mut Option<Partial>) -> Result<Step, ProtocolError> {
    parse_front(buf, limits, partial, true)
}

/// [`parse_stream`]; `big_ok`: a big argument may be set aside in `partial`.
fn parse_front(
    buf: &[u8],
    limits: &ParseLimits,
    partial: &mut Option<Partial>,
    big_ok: bool,
) -> Result<Step, ProtocolError> {
    let mut at = 0;
    if partial.is_none() {
        match buf.first() {
            None => return Ok(Step::More(0)),
            Some(b'*') => {}
            Some(_) => {
                return Ok(match parse_inline(buf)? {
                    Some((args, used)) => Step::Request(args, used),
                    None => Step::More(0),
                })
            }
        }
        let Some((count, start)) = header(buf, 0, "mbulk")? else { return Ok(Step::More(0)) };
        if count > MAX_MULTIBULK {
            return Err(ProtocolError("invalid multibulk length".into()));
        }
        if limits.unauthenticated && count > UNAUTH_MAX_ARGS {
            return Err(ProtocolError("unauthenticated multibulk length".into()));
        }
        if count <= 0 {
            return Ok(Step::Request(Vec::new(), start));
        }
        // Checked before allocating anything the request declares.
        let args = Vec::with_capacity((count as usize).min(1024));
        *partial = Some(Partial { args, left: count as usize, bytes: start, big: None });
        at = start;
    }
    let Some(p) = partial.as_mut() else { return Ok(Step::More(at)) };
    while p.left > 0 {
        if let Some((mut big, need)) = p.big.take() {
            let take = (need - big.len()).min(buf.len() - at);
            big.extend_from_slice(&buf[at..at + take]);
            at += take;
            if big.len() < need {
                p.big = Some((big, need));
                return Ok(Step::More(at));
            }
            if !big.ends_with(b"\r\n") {
                return Err(ProtocolError("expected CRLF after bulk data".into()));
            }
            big.truncate(need - 2);
            p.args.push(big);
            p.bytes += need;
            p.left -= 1;
            continue;
        }
        match buf.get(at) {
            None => return Ok(Step::More(at)),
            Some(b'$') => {}
            Some(&c) => return Err(ProtocolError(format!("expected '$', got '{}'", c as char))),
        }
        let Some((len, start)) = header(buf, at, "bulk")? else { return Ok(Step::More(at)) };
        if len < 0 || len as u64 > limits.max_bulk as u64 {
            return Err(ProtocolError("invalid bulk length".into()));
        }
        if limits.unauthenticated && len > UNAUTH_MAX_BULK {
            return Err(ProtocolError("unauthenticated bulk length".into()));
        }
        let end = start + len as usize;
        if buf.len() < end + 2 {
            let need = len as usize + 2;
            let mut big = Vec::new();
            // Without the room (a strict overcommit policy), the argument
            // comes through the query buffer as a small one does.
            if big_ok && len as usize >= BIG_ARG && big.try_reserve_exact(need).is_ok() {
                p.big = Some((big, need));
                p.bytes += start - at;
                at = start;
                continue;
            }
            // The argument's header stays in the buffer until its bytes are there.
            return Ok(Step::More(at));
        }
        if &buf[end..end + 2] != b"\r\n" {
            return Err(ProtocolError("expected CRLF after bulk data".into()));
        }
        p.args.push(buf[start..end].to_vec());
        p.bytes += end + 2 - at;
        p.left -= 1;
        at = end + 2;
    }
    let done = partial.take().map(|p| p.args).unwrap_or_default();
    Ok(Step::Request(done, at))
}

fn find_crlf(buf: &[u8], from: usize) -> Option<usize> {
    let hay = buf.get(from..)?;
    let mut at = 0;
    while let Some(i) = hay[at..].iter().position(|&b| b == b'\r') {
        let pos = at + i;
        match hay.get(pos + 1) {
            Some(b'\n') => return Some(from + pos),
            Some(_) => at = pos + 1,
            None => return None,
        }
    }
    None
}

/// Parses the decimal in a header line the way Redis's `string2ll` does.
fn parse_count(line: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(line).ok()?;
    if s.is_empty() || s.starts_with('+') || (s.len() > 1 && s.starts_with('0')) {
        return None;
    }
    s.parse().ok()
}

fn header(buf: &[u8], at: usize, what: &str) -> Result<Option<(i64, usize)>, ProtocolError> {
    match find_crlf(buf, at) {
        None if buf.len() - at > MAX_INLINE => Err(ProtocolError(format!("too big {what} count string"))),
        None => Ok(None),
        Some(end) => {
            let n = parse_count(&buf[at + 1..end]);
            match n {
                Some(n) => Ok(Some((n, end + 2))),
                None if what == "mbulk" => Err(ProtocolError("invalid multibulk length".into())),
                None => Err(ProtocolError("invalid bulk length".into())),
            }
        }
    }
}

fn parse_inline(buf: &[u8]) -> Result<Option<Frame>, ProtocolError> {
    let Some(nl) = buf.iter().position(|&b| b == b'\n') else {
        if buf.len() > MAX_INLINE {
            return Err(ProtocolError("too big inline request".into()));
        }
        return Ok(None);
    };
    let line = buf[..nl].strip_suffix(b"\r").unwrap_or(&buf[..nl]);
    let args = split_args(line).ok_or_else(|| ProtocolError("unbalanced quotes in request".into()))?;
    Ok(Some((args, nl + 1)))
}

/// Splits an inline command like Redis's `sdssplitargs`, corner for
/// corner: blanks separate arguments; "double quotes" take \n \r \t \b
/// \a \\ \" and \xHH escapes, 'single quotes' take \' only, and either
/// may open in the middle of an argument (`a"b c"` is `ab c`); a closing
/// quote must be followed by a blank. The line is a C string: it ends at
/// its first zero byte. `None` for unbalanced quotes.
pub fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let line = &line[..line.iter().position(|&b| b == 0).unwrap_or(line.len())];
    // Past the end, C reads the terminating zero.
    let at = |i: usize| line.get(i).copied().unwrap_or(0);
    // C's isspace: \v and \f too (they skip between arguments, but only
    // space, \t, \r and \n end one).
    let is_space = |c: u8| matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r');
    let mut args = Vec::new();
    let mut p = 0;
    loop {
        while p < line.len() && is_space(line[p]) {
            p += 1;
        }
        if p >= line.len() {
            return Some(args);
        }
        let (mut in_double, mut in_single, mut done) = (false, false, false);
        let mut cur = Vec::new();
        while !done {
            let c = at(p);
            if in_double || in_single {
                let quote = if in_double { b'"' } else { b'\'' };
                if in_double && c == b'\\' && at(p + 1) == b'x' && hex(at(p + 2)).is_some() && hex(at(p + 3)).is_some()
                {
                    cur.push(hex(at(p + 2))? * 16 + hex(at(p + 3))?);
                    p += 3;
                } else if in_double && c == b'\\' && at(p + 1) != 0 {
                    p += 1;
                    cur.push(match at(p) {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 8,
                        b'a' => 7,
                        other => other,
                    });
                } else if in_single && c == b'\\' && at(p + 1) == b'\'' {
                    p += 1;
                    cur.push(b'\'');
                } else if c == quote {
                    // A closing quote ends the argument: a blank must follow.
                    if at(p + 1) != 0 && !is_space(at(p + 1)) {
                        return None;
                    }
                    done = true;
                } else if c == 0 {
                    // The line ended inside the quotes.
                    return None;
                } else {
                    cur.push(c);
                }
            } else {
                match c {
                    b' ' | b'\n' | b'\r' | b'\t' | 0 => done = true,
                    b'"' => in_double = true,
                    b'\'' => in_single = true,
                    other => cur.push(other),
                }
            }
            if at(p) != 0 {
                p += 1;
            }
        }
        args.push(cur);
    }
}

fn hex(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

/// A reply, encoded for the protocol version the client speaks.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    /// `+text`
    Simple(String),
    /// `-CODE text` (the text includes the code, e.g. "ERR syntax error").
    Error(String),
    /// `:n`
    Int(i64),
    /// `$len` bytes
    Bulk(Vec<u8>),
    /// RESP2 `$-1`, RESP3 `_`.
    Nil,
    /// RESP2 `*-1`, RESP3 `_`.
    NilArray,
    /// `*n`
    Array(Vec<Reply>),
    /// RESP3 `%n`; RESP2 a flat array of 2n.
    Map(Vec<(Reply, Reply)>),
    /// RESP3 `~n`; RESP2 an array.
    Set(Vec<Reply>),
    /// RESP3 `,d`; RESP2 a bulk string.
    Double(f64),
    /// RESP3 `#t`/`#f`; RESP2 `:1`/`:0`.
    Bool(bool),
    /// A double as Redis's `addReplyHumanLongDouble` writes it (GEOPOS,
    /// WITHCOORD): `"%.17Lf"` without trailing zeros, a RESP3 double or a
    /// RESP2 bulk string.
    Human(f64),
    /// RESP3 `=len\r\ntxt:…`; RESP2 a bulk string.
    Verbatim(String),
    /// A verbatim string with its own 3-byte format (a script's
    /// `{verbatim_string = …}`): RESP3 `=len\r\nfmt:…`; RESP2 a bulk string.
    VerbatimAs([u8; 3], Vec<u8>),
    /// RESP3 `(digits` (a script's `{big_number = …}`); RESP2 a bulk string.
    BigNumber(Vec<u8>),
    /// RESP3 `>n` (out-of-band data: pub/sub messages); RESP2 an array.
    Push(Vec<Reply>),
    /// Several replies back to back for one command (SUBSCRIBE a b answers
    /// once per channel).
    Many(Vec<Reply>),
    /// RESP3 `|n` attributes: pairs that come before the reply they
    /// describe (DEBUG PROTOCOL ATTRIB); nothing in RESP2, which has none.
    Attribute(Vec<(Reply, Reply)>),
}

impl Reply {
    /// `+OK`.
    pub fn ok() -> Reply {
        Reply::Simple("OK".into())
    }

    /// A bulk string from anything byte-like.
    pub fn bulk(b: impl AsRef<[u8]>) -> Reply {
        Reply::Bulk(b.as_ref().to_vec())
    }

    /// An array of bulk strings.
    pub fn bulks<I, B>(items: I) -> Reply
    where
        I: IntoIterator<Item = B>,
        B: AsRef<[u8]>,
    {
        Reply::Array(items.into_iter().map(Reply::bulk).collect())
    }

    /// Whether this is an error reply.
    pub fn is_error(&self) -> bool {
        matches!(self, Reply::Error(_))
    }

    /// [`Reply::encode`], handing big bulk strings over instead of copying
    /// them: a bulk of [`SPLICE_MIN`] bytes or more, alone or in an array,
    /// set or map, leaves its header and CRLF in `out` and goes into `spliced` with the
    /// offset in `out` where its bytes belong ([`Spliced`]).
    pub fn encode_spliced(self, proto: u8, out: &mut Vec<u8>, spliced: &mut Spliced) {
        match self {
            Reply::Bulk(v) if v.len() >= SPLICE_MIN => {
                agg(out, b'$', v.len());
                spliced.push((out.len(), v));
                out.extend_from_slice(b"\r\n");
            }
            Reply::Array(items) => {
                agg(out, b'*', items.len());
                items.into_iter().for_each(|r| r.encode_spliced(proto, out, spliced));
            }
            Reply::Set(items) => {
                agg(out, if proto >= 3 { b'~' } else { b'*' }, items.len());
                items.into_iter().for_each(|r| r.encode_spliced(proto, out, spliced));
            }
            Reply::Map(pairs) => {
                if proto >= 3 {
                    agg(out, b'%', pairs.len());
                } else {
                    agg(out, b'*', pairs.len() * 2);
                }
                for (k, v) in pairs {
                    k.encode_spliced(proto, out, spliced);
                    v.encode_spliced(proto, out, spliced);
                }
            }
            other => other.encode(proto, out),
        }
    }

    /// Appends the encoding for protocol `proto` (2 or 3) to `out`.
    pub fn encode(&self, proto: u8, out: &mut Vec<u8>) {
        let resp3 = proto >= 3;
        match self {
            Reply::Simple(s) => line(out, b'+', s),
            Reply::Error(s) => line(out, b'-', s),
            Reply::Int(n) => {
                out.push(b':');
                out.extend_from_slice(itoa::Buffer::new().format(*n).as_bytes());
                out.extend_from_slice(b"\r\n");
            }
            Reply::Bulk(b) => bulk(out, b'$', b),
            Reply::Nil if resp3 => out.extend_from_slice(b"_\r\n"),
            Reply::Nil => out.extend_from_slice(b"$-1\r\n"),
            Reply::NilArray if resp3 => out.extend_from_slice(b"_\r\n"),
            Reply::NilArray => out.extend_from_slice(b"*-1\r\n"),
            Reply::Array(items) => {
                agg(out, b'*', items.len());
                items.iter().for_each(|r| r.encode(proto, out));
            }
            Reply::Set(items) => {
                agg(out, if resp3 { b'~' } else { b'*' }, items.len());
                items.iter().for_each(|r| r.encode(proto, out));
            }
            Reply::Map(pairs) => {
                if resp3 {
                    agg(out, b'%', pairs.len());
                } else {
                    agg(out, b'*', pairs.len() * 2);
                }
                for (k, v) in pairs {
                    k.encode(proto, out);
                    v.encode(proto, out);
                }
            }
            Reply::Double(d) if resp3 => {
                out.push(b',');
                out.extend_from_slice(format_double(*d).as_bytes());
                out.extend_from_slice(b"\r\n");
            }
            Reply::Double(d) => bulk(out, b'$', format_double(*d).as_bytes()),
            Reply::Human(d) if resp3 => {
                out.push(b',');
                out.extend_from_slice(format_human(*d).as_bytes());
                out.extend_from_slice(b"\r\n");
            }
            Reply::Human(d) => bulk(out, b'$', format_human(*d).as_bytes()),
            Reply::Bool(b) if resp3 => out.extend_from_slice(if *b { b"#t\r\n" } else { b"#f\r\n" }),
            Reply::Bool(b) => out.extend_from_slice(if *b { b":1\r\n" } else { b":0\r\n" }),
            Reply::Verbatim(s) if resp3 => verbatim(out, b"txt", s.as_bytes()),
            Reply::Verbatim(s) => bulk(out, b'$', s.as_bytes()),
            Reply::VerbatimAs(format, s) if resp3 => verbatim(out, format, s),
            Reply::VerbatimAs(_, s) => bulk(out, b'$', s),
            // A line, like a simple string: a line break in it cannot
            // break the protocol (Redis does not check; it is the script's).
            Reply::BigNumber(n) if resp3 => line(out, b'(', &String::from_utf8_lossy(n)),
            Reply::BigNumber(n) => bulk(out, b'$', n),
            Reply::Push(items) => {
                agg(out, if resp3 { b'>' } else { b'*' }, items.len());
                items.iter().for_each(|r| r.encode(proto, out));
            }
            Reply::Many(replies) => replies.iter().for_each(|r| r.encode(proto, out)),
            Reply::Attribute(pairs) if resp3 => {
                agg(out, b'|', pairs.len());
                for (k, v) in pairs {
                    k.encode(proto, out);
                    v.encode(proto, out);
                }
            }
            Reply::Attribute(_) => {}
        }
    }
}

fn line(out: &mut Vec<u8>, tag: u8, s: &str) {
    out.push(tag);
    // A simple string or error cannot carry a line break; Redis replaces them too.
    out.extend(s.bytes().map(|b| if b == b'\r' || b == b'\n' { b' ' } else { b }));
    out.extend_from_slice(b"\r\n");
}

fn agg(out: &mut Vec<u8>, tag: u8, n: usize) {
    out.push(tag);
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// A RESP3 verbatim string: `=len\r\nfmt:…\r\n`.
fn verbatim(out: &mut Vec<u8>, format: &[u8; 3], s: &[u8]) {
    agg(out, b'=', format.len() + 1 + s.len());
    out.extend_from_slice(format);
    out.push(b':');
    out.extend_from_slice(s);
    out.extend_from_slice(b"\r\n");
}

fn bulk(out: &mut Vec<u8>, tag: u8, b: &[u8]) {
    // One allocation for a big value, not a doubling per step.
    out.reserve(b.len() + 24);
    agg(out, tag, b.len());
    out.extend_from_slice(b);
    out.extend_from_slice(b"\r\n");
}

/// Formats a double the way Redis 7.0 replies with one (ZSCORE, WITHSCORES,
/// RESP3 doubles): C's `%.17g` — 17 significant digits, trailing zeros
/// dropped, `inf`/`-inf`, C-style exponents (`1e+300`) outside 1e-4..1e17.
pub fn format_double(d: f64) -> String {
    format_g(d, 17)
}

/// `"%.17Lf"` of a double (exact: a double widens to `long double` without
/// rounding) with the trailing zeros and a bare '.' removed, "-0" as "0":
/// Redis's `ld2string(..., LD_STR_HUMAN)`.
pub fn format_human(d: f64) -> String {
    if d.is_infinite() {
        return if d > 0.0 { "inf".into() } else { "-inf".into() };
    }
    let s = format!("{d:.17}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.to_string()
    }
}

/// C's `%.{precision}g` for `precision` in 1..=17.
pub fn format_g(d: f64, precision: usize) -> String {
    let p = precision.clamp(1, 17);
    if d.is_nan() {
        return "nan".into();
    }
    if d.is_infinite() {
        return if d > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if d == 0.0 {
        return if d.is_sign_negative() { "-0".into() } else { "0".into() };
    }
    let sci = format!("{d:.*e}", p - 1);
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let trim = |s: &str| {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s.to_string()
        }
    };
    if (-4..p as i32).contains(&exp) {
        trim(&format!("{:.*}", (p as i32 - 1 - exp) as usize, d))
    } else {
        format!("{}e{}{:02}", trim(mant), if exp < 0 { '-' } else { '+' }, exp.abs())
    }
}

/// Redis 7.0's `d2string`, the text of a score inside a small (listpack)
/// sorted set, which ZSCAN returns as is: an integral value within
/// ±(2^63-1)/2 as an integer ("100000000000000000" for 1e17), anything else
/// as [`format_double`].
pub fn format_d2string(d: f64) -> String {
    let lim = (i64::MAX / 2) as f64;
    if d != 0.0 && (-lim..=lim).contains(&d) && d.trunc() == d {
        return (d as i64).to_string();
    }
    format_double(d)
}

/// The shortest text that reads back to the same double, with C-style
/// exponents for very large or small values (Redis 7.2's double format).
pub fn format_shortest(d: f64) -> String {
    if d.is_nan() {
        return "nan".into();
    }
    if d.is_infinite() {
        return if d > 0.0 { "inf".into() } else { "-inf".into() };
    }
    let a = d.abs();
    if a != 0.0 && !(1e-5..1e17).contains(&a) {
        let s = format!("{d:e}");
        let (mant, exp) = s.split_once('e').unwrap_or((&s, "0"));
        let (sign, digits) = match exp.strip_prefix('-') {
            Some(rest) => ('-', rest),
            None => ('+', exp),
        };
        return format!("{mant}e{sign}{digits:0>2}");
    }
    if d == 0.0 {
        return "0".into();
    }
    format!("{d}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(b: &[u8]) -> Result<Option<Frame>, ProtocolError> {
        parse(b, &ParseLimits::default())
    }

    /// Requests of up to 300 arguments (some of 100 KiB), multibulk and
    /// inline, fed to `parse_stream` in random pieces as a connection
    /// reads them, come out as they went in; and the partial state holds
    /// what was consumed.
    #[test]
    fn a_stream_in_random_pieces_parses_as_sent() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(37);
        for _ in 0..200 {
            let mut sent = Vec::new();
            let mut stream = Vec::new();
            for _ in 0..rng.gen_range(1..6) {
                let inline = rng.gen_bool(0.2);
                let n = if inline { rng.gen_range(1..5) } else { rng.gen_range(1..300) };
                let args: Vec<Vec<u8>> = (0..n)
                    .map(|_| {
                        let len = if !inline && rng.gen_bool(0.01) { 100 << 10 } else { rng.gen_range(1..20) };
                        (0..len).map(|_| if inline { rng.gen_range(b'a'..=b'z') } else { rng.gen() }).collect()
                    })
                    .collect();
                if inline {
                    stream.extend_from_slice(&args.join(&b' '));
                    stream.extend_from_slice(b"\r\n");
                } else {
                    Reply::Array(args.iter().map(|a| Reply::Bulk(a.clone())).collect()).encode(2, &mut stream);
                }
                sent.push(args);
            }
            let mut got = Vec::new();
            let (mut buf, mut partial, mut fed) = (Vec::new(), None, 0);
            while got.len() < sent.len() {
                match parse_stream(&buf, &ParseLimits::default(), &mut partial).unwrap() {
                    Step::Request(args, used) => {
                        buf.drain(..used);
                        got.push(args);
                    }
                    Step::More(used) => {
                        buf.drain(..used);
                        assert!(fed < stream.len(), "stream ended inside a request");
                        let next = (fed + rng.gen_range(1..5000)).min(stream.len());
                        buf.extend_from_slice(&stream[fed..next]);
                        fed = next;
                    }
                }
                if let Some(p) = &partial {
                    let held: usize = p.args.iter().map(|a| a.len()).sum();
                    assert!(p.bytes() > held, "partial bytes {} for {held} argument bytes", p.bytes());
                }
            }
            assert_eq!(got, sent);
            assert!(buf.is_empty() && partial.is_none());
        }
    }

    /// A big argument read straight into its own buffer (as a connection
    /// does when nothing else is buffered) comes out whole, with the
    /// requests behind it; the partial state counts its bytes; and a bad
    /// CRLF after it is the error a small argument's is.
    #[test]
    fn a_big_argument_is_read_into_its_own_buffer() {
        let val: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        let mut stream = Vec::new();
        Reply::Array(vec![Reply::bulk("SET"), Reply::bulk("k"), Reply::Bulk(val.clone())]).encode(2, &mut stream);
        stream.extend_from_slice(b"*1\r\n$4\r\nPING\r\n");
        let limits = ParseLimits::default();
        let mut partial = None;
        // The header and 1,000 bytes of the value come through the buffer.
        let first = stream.len() - val.len() - 2 - 14 + 1_000;
        assert_eq!(parse_stream(&stream[..first], &limits, &mut partial).unwrap(), Step::More(first));
        let p = partial.as_mut().unwrap();
        assert_eq!(p.bytes(), first);
        let mut fed = first;
        while let Some((big, left)) = p.big_arg() {
            let n = left.min(7_777);
            big.extend_from_slice(&stream[fed..fed + n]);
            fed += n;
        }
        assert_eq!(fed, stream.len() - 14, "the reads stop at the argument's CRLF");
        let rest = &stream[fed..];
        let Step::Request(args, used) = parse_stream(rest, &limits, &mut partial).unwrap() else {
            panic!("incomplete")
        };
        assert_eq!(args, vec![b"SET".to_vec(), b"k".to_vec(), val.clone()]);
        assert_eq!(used, 0);
        assert_eq!(parse_stream(rest, &limits, &mut partial).unwrap(), Step::Request(vec![b"PING".to_vec()], 14));
        // A bulk not followed by CRLF.
        let mut bad = stream[..first].to_vec();
        bad.extend_from_slice(&val[1_000..]);
        bad.extend_from_slice(b"XY");
        let mut partial = None;
        assert_eq!(parse_stream(&bad[..first], &limits, &mut partial).unwrap(), Step::More(first));
        let e = parse_stream(&bad[first..], &limits, &mut partial).unwrap_err();
        assert_eq!(e.0, "expected CRLF after bulk data");
        // The stateless parser never sets one aside.
        assert_eq!(parse(&stream[..first], &limits).unwrap(), None);
    }

    /// Replies encoded with their big values handed over, then put back,
    /// are the bytes `encode` writes; and only values of SPLICE_MIN bytes
    /// or more are handed over, at offsets in order.
    #[test]
    fn spliced_replies_are_the_encoded_bytes() {
        let big = |n: usize| Reply::Bulk((0..n).map(|i| i as u8).collect());
        let replies = [
            big(SPLICE_MIN),
            big(SPLICE_MIN - 1),
            Reply::Array(vec![Reply::Int(1), big(100_000), Reply::Nil, big(SPLICE_MIN), Reply::bulk("x")]),
            Reply::Map(vec![(Reply::bulk("k"), big(70_000)), (Reply::Int(2), Reply::Nil)]),
            Reply::Set(vec![Reply::bulk("m"), Reply::Double(1.5)]),
            Reply::Array(vec![Reply::Array(vec![big(20_000)]), Reply::Error("ERR e".into())]),
        ];
        for proto in [2, 3] {
            let mut want = Vec::new();
            replies.iter().for_each(|r| r.encode(proto, &mut want));
            let (mut out, mut spliced) = (Vec::new(), Vec::new());
            replies.iter().cloned().for_each(|r| r.encode_spliced(proto, &mut out, &mut spliced));
            assert_eq!(spliced.len(), 5, "SPLICE_MIN and up, in arrays and maps too");
            assert!(spliced.windows(2).all(|w| w[0].0 <= w[1].0));
            assert!(spliced.iter().all(|(_, v)| v.len() >= SPLICE_MIN));
            unsplice(&mut out, spliced);
            assert_eq!(out, want, "proto {proto}");
        }
    }

    fn encoded(r: &Reply, proto: u8) -> String {
        let mut out = Vec::new();
        r.encode(proto, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn integers_and_lengths_are_written_in_decimal() {
        assert_eq!(encoded(&Reply::Int(0), 2), ":0\r\n");
        assert_eq!(encoded(&Reply::Int(-1), 2), ":-1\r\n");
        assert_eq!(encoded(&Reply::Int(i64::MIN), 3), ":-9223372036854775808\r\n");
        assert_eq!(encoded(&Reply::Int(i64::MAX), 2), ":9223372036854775807\r\n");
        assert_eq!(encoded(&Reply::bulk(vec![b'x'; 1234]), 2), format!("$1234\r\n{}\r\n", "x".repeat(1234)));
        assert_eq!(encoded(&Reply::bulk(b""), 2), "$0\r\n\r\n");
        let pairs = vec![(Reply::bulk(b"f"), Reply::Int(12))];
        assert_eq!(encoded(&Reply::Map(pairs.clone()), 2), "*2\r\n$1\r\nf\r\n:12\r\n");
        assert_eq!(encoded(&Reply::Map(pairs), 3), "%1\r\n$1\r\nf\r\n:12\r\n");
        let ten = Reply::Array((0..10).map(Reply::Int).collect());
        assert!(encoded(&ten, 2).starts_with("*10\r\n:0\r\n:1\r\n"));
        assert_eq!(encoded(&Reply::Verbatim("hi".into()), 3), "=6\r\ntxt:hi\r\n");
        assert_eq!(encoded(&Reply::Verbatim("hi".into()), 2), "$2\r\nhi\r\n");
        assert_eq!(encoded(&Reply::VerbatimAs(*b"mkd", b"# x".to_vec()), 3), "=7\r\nmkd:# x\r\n");
    }

    #[test]
    fn multibulk_and_partial() {
        let req = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n";
        assert_eq!(p(req).unwrap(), Some((vec![b"GET".to_vec(), b"k".to_vec()], req.len())));
        for cut in 0..req.len() {
            assert_eq!(p(&req[..cut]).unwrap(), None, "prefix of {cut} bytes");
        }
    }

    #[test]
    fn inline_with_quotes() {
        let (args, used) = p(b"SET \"a b\" 'c\\'d' \"\\x41\\n\"\r\nrest").unwrap().unwrap();
        assert_eq!(args, vec![b"SET".to_vec(), b"a b".to_vec(), b"c'd".to_vec(), b"A\n".to_vec()]);
        assert_eq!(used, 27);
        assert!(p(b"SET \"abc\r\n").is_err());
        assert_eq!(p(b"\r\n").unwrap(), Some((vec![], 2)));
    }

    /// Corners where `sdssplitargs` answers as it does (checked against
    /// redis-server 7.0.15's inline commands: 1,500 random lines alike).
    #[test]
    fn inline_splits_as_redis_does() {
        let split = |l: &[u8]| {
            split_args(l).map(|v| v.iter().map(|a| String::from_utf8_lossy(a).into_owned()).collect::<Vec<_>>())
        };
        // Quotes open in the middle of an argument and end it.
        assert_eq!(split(b"a\"b c\""), Some(vec!["ab c".to_string()]));
        assert_eq!(split(b"a'b c' d"), Some(vec!["ab c".to_string(), "d".to_string()]));
        assert_eq!(split(b"\"a\"b"), None);
        // \v and \f separate nothing, but are skipped between arguments.
        assert_eq!(split(b"\x0bx\x0c y"), Some(vec!["x\x0c".to_string(), "y".to_string()]));
        // An incomplete \x escape is the letter x.
        assert_eq!(split(b"\"\\x4\""), Some(vec!["x4".to_string()]));
        assert_eq!(split(b"'\\''"), Some(vec!["'".to_string()]));
        assert_eq!(split(b"\"a\\"), None);
        // A C string: a zero byte ends the line.
        assert_eq!(split(b"a\0b c"), Some(vec!["a".to_string()]));
    }

    #[test]
    fn limits_and_errors() {
        let small = ParseLimits { max_bulk: 10, unauthenticated: false };
        assert_eq!(parse(b"*1\r\n$11\r\n", &small).unwrap_err().0, "invalid bulk length");
        assert_eq!(p(b"*1\r\n$abc\r\n").unwrap_err().0, "invalid bulk length");
        assert_eq!(p(b"*x\r\n").unwrap_err().0, "invalid multibulk length");
        assert_eq!(p(b"*2000000\r\n").unwrap_err().0, "invalid multibulk length");
        assert_eq!(p(b"*1\r\n:1\r\n").unwrap_err().0, "expected '$', got ':'");
        assert!(p(&vec![b'a'; MAX_INLINE + 1]).is_err());
        assert!(p(b"*1\r\n$1\r\nab\r\n").is_err());
    }

    #[test]
    fn encodings() {
        let enc = |r: &Reply, v| {
            let mut o = Vec::new();
            r.encode(v, &mut o);
            String::from_utf8(o).unwrap()
        };
        let m = Reply::Map(vec![(Reply::bulk("a"), Reply::Int(1))]);
        assert_eq!(enc(&m, 2), "*2\r\n$1\r\na\r\n:1\r\n");
        assert_eq!(enc(&m, 3), "%1\r\n$1\r\na\r\n:1\r\n");
        assert_eq!(enc(&Reply::Nil, 2), "$-1\r\n");
        assert_eq!(enc(&Reply::Nil, 3), "_\r\n");
        assert_eq!(enc(&Reply::Double(1.5), 3), ",1.5\r\n");
        assert_eq!(enc(&Reply::Error("ERR a\r\nb".into()), 2), "-ERR a  b\r\n");
        assert_eq!(format_double(3.0), "3");
        assert_eq!(format_double(1.5), "1.5");
        assert_eq!(format_double(0.1), "0.10000000000000001");
        assert_eq!(format_double(1e300), "1.0000000000000001e+300");
        assert_eq!(format_double(-5.94971599e8), "-594971599");
        assert_eq!(format_double(1.5e-7), "1.4999999999999999e-07");
        assert_eq!(format_double(f64::NEG_INFINITY), "-inf");
        assert_eq!(format_shortest(0.1), "0.1");
        assert_eq!(format_shortest(1e300), "1e+300");
        assert_eq!(format_shortest(1.5e-7), "1.5e-07");
    }
}
