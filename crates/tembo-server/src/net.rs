//! Sockets: the accept loops (TCP, and the Unix domain socket when
//! `unixsocket` names one) and one task per connection, the same for both.
//!
//! A connection task only moves bytes: it parses every complete request in
//! what it has read, sends them to the executor as one message, writes the
//! replies when they come back, and does not read more while it waits, so a
//! client's unanswered input is bounded by what one read brought plus the
//! query-buffer limit. A malformed request gets Redis's protocol error and
//! closes that connection only.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::mpsc::{unbounded_channel, UnboundedSender as Sender};

use crate::client::{Client, ConnShared, Out};
use crate::exec::Msg;
use crate::querybuf::QueryBuf;
use crate::resp::{self, ParseLimits, Reply, Step};

/// Limits the network side enforces, changeable by CONFIG SET.
#[derive(Debug)]
pub struct Shared {
    maxclients: AtomicUsize,
    max_bulk: AtomicUsize,
    query_limit: AtomicUsize,
    connected: AtomicUsize,
    next_id: AtomicU64,
    /// Traffic counters for INFO stats: bytes read, bytes written, reads,
    /// writes, connections refused at maxclients.
    net: [AtomicU64; 5],
    /// New clients must authenticate (the default user needs a password
    /// or is off): their first requests are parsed with the limits for
    /// unauthenticated clients even before the executor has seen them.
    default_auth_required: AtomicBool,
}

/// Which traffic counter (INFO stats).
#[derive(Clone, Copy, Debug)]
pub enum Net {
    /// Bytes read from clients.
    InBytes = 0,
    /// Bytes written to clients.
    OutBytes = 1,
    /// Reads that returned data.
    Reads = 2,
    /// Replies written.
    Writes = 3,
    /// Connections refused at maxclients.
    Rejected = 4,
}

impl Shared {
    /// From the config.
    pub fn new(cfg: &crate::Config) -> Shared {
        Shared {
            maxclients: AtomicUsize::new(cfg.maxclients),
            max_bulk: AtomicUsize::new(cfg.proto_max_bulk_len),
            query_limit: AtomicUsize::new(cfg.client_query_buffer_limit),
            connected: AtomicUsize::new(0),
            next_id: AtomicU64::new(1),
            net: Default::default(),
            default_auth_required: AtomicBool::new(!cfg.requirepass.is_empty()),
        }
    }
    /// maxclients.
    pub fn maxclients(&self) -> usize {
        self.maxclients.load(Ordering::Relaxed)
    }
    /// Sets maxclients.
    pub fn set_maxclients(&self, n: usize) {
        self.maxclients.store(n, Ordering::Relaxed)
    }
    /// proto-max-bulk-len.
    pub fn max_bulk(&self) -> usize {
        self.max_bulk.load(Ordering::Relaxed)
    }
    /// Sets proto-max-bulk-len.
    pub fn set_max_bulk(&self, n: usize) {
        self.max_bulk.store(n, Ordering::Relaxed)
    }
    /// client-query-buffer-limit.
    pub fn query_limit(&self) -> usize {
        self.query_limit.load(Ordering::Relaxed)
    }
    /// Sets client-query-buffer-limit.
    pub fn set_query_limit(&self, n: usize) {
        self.query_limit.store(n, Ordering::Relaxed)
    }
    /// Sets whether new clients must authenticate.
    pub fn set_default_auth_required(&self, yes: bool) {
        self.default_auth_required.store(yes, Ordering::Relaxed)
    }
    /// A traffic counter.
    pub fn net(&self, which: Net) -> u64 {
        self.net[which as usize].load(Ordering::Relaxed)
    }
    /// CONFIG RESETSTAT: the traffic counters start again from zero.
    pub fn reset_net(&self) {
        for c in &self.net {
            c.store(0, Ordering::Relaxed);
        }
    }
    fn count(&self, which: Net, n: u64) {
        self.net[which as usize].fetch_add(n, Ordering::Relaxed);
    }
    /// Connections open now.
    pub fn connected(&self) -> usize {
        self.connected.load(Ordering::Relaxed)
    }
}

/// A socket clients connect to: TCP (`bind`:`port`), or a Unix domain
/// socket at a path (`unixsocket`), whose clients Redis names `path:0`.
pub enum Listener {
    /// The TCP listener.
    Tcp(TcpListener),
    /// The Unix domain socket listener and its path.
    Unix(UnixListener, String),
}

/// A connection just accepted: its halves, descriptor, and the addresses
/// CLIENT LIST shows.
struct Accepted<R, W> {
    rd: R,
    wr: W,
    fd: std::os::fd::RawFd,
    peer: String,
    local: String,
    unix: bool,
}

/// Accepts connections until the task is dropped.
pub async fn accept_loop(listener: Listener, inbox: Sender<Msg>, shared: Arc<Shared>) {
    loop {
        match &listener {
            Listener::Tcp(l) => {
                let Some((sock, peer)) = accepted(l.accept().await).await else { continue };
                let _ = sock.set_nodelay(true);
                let local = sock.local_addr().map(|a| a.to_string()).unwrap_or_default();
                let fd = std::os::fd::AsRawFd::as_raw_fd(&sock);
                let (rd, wr) = sock.into_split();
                let conn = Accepted { rd, wr, fd, peer: peer.to_string(), local, unix: false };
                spawn_connection(conn, &inbox, &shared).await;
            }
            Listener::Unix(l, path) => {
                let Some((sock, _)) = accepted(l.accept().await).await else { continue };
                let fd = std::os::fd::AsRawFd::as_raw_fd(&sock);
                let (rd, wr) = sock.into_split();
                let name = format!("{path}:0");
                let conn = Accepted { rd, wr, fd, peer: name.clone(), local: name, unix: true };
                spawn_connection(conn, &inbox, &shared).await;
            }
        }
    }
}

/// What `accept` gave, or `None` after a failure (out of file descriptors
/// and the like), having waited instead of spinning.
async fn accepted<T>(r: std::io::Result<T>) -> Option<T> {
    match r {
        Ok(x) => Some(x),
        Err(e) => {
            log::warn!("accept failed: {e}");
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            None
        }
    }
}

/// Serves a connection on its own task, or refuses it past `maxclients`.
async fn spawn_connection<R, W>(mut c: Accepted<R, W>, inbox: &Sender<Msg>, shared: &Arc<Shared>)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: WriteHalf + Send + 'static,
{
    if shared.connected() >= shared.maxclients() {
        let _ = c.wr.write_all(b"-ERR max number of clients reached\r\n").await;
        shared.count(Net::Rejected, 1);
        return;
    }
    shared.connected.fetch_add(1, Ordering::Relaxed);
    let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
    let (inbox, shared) = (inbox.clone(), shared.clone());
    tokio::spawn(async move {
        connection(c, id, &inbox, &shared).await;
        let _ = inbox.send(Msg::Disconnect(id));
        shared.connected.fetch_sub(1, Ordering::Relaxed);
    });
}

/// The writing half of a client's socket, TCP or Unix.
trait WriteHalf: AsyncWrite + Unpin {
    /// Writes what the socket takes now, without waiting.
    fn try_write_now(&self, bytes: &[u8]) -> std::io::Result<usize>;
}

impl WriteHalf for tokio::net::tcp::OwnedWriteHalf {
    fn try_write_now(&self, bytes: &[u8]) -> std::io::Result<usize> {
        self.try_write(bytes)
    }
}

impl WriteHalf for tokio::net::unix::OwnedWriteHalf {
    fn try_write_now(&self, bytes: &[u8]) -> std::io::Result<usize> {
        self.try_write(bytes)
    }
}

fn protocol_error(e: &dyn std::fmt::Display) -> Vec<u8> {
    let mut out = Vec::new();
    Reply::Error(format!("ERR {e}")).encode(2, &mut out);
    out
}

/// What one parse of a connection's buffer gave: the requests, the bytes
/// they took, and a protocol error to answer with after them.
type Parsed = (Vec<Vec<Vec<u8>>>, usize, Option<Vec<u8>>);

/// Parses every complete request in `buf` (removing them); a malformed or
/// oversized one ends the list and gives the error to answer with.
fn parse_requests(qb: &mut QueryBuf, shared: &Shared, id: u64, peer: &str, conn: &ConnShared) -> Parsed {
    let unauthenticated = conn.auth_required.load(Ordering::Relaxed);
    let limits = ParseLimits { max_bulk: shared.max_bulk(), unauthenticated };
    let mut reqs = Vec::new();
    let mut fatal = None;
    let mut used = 0;
    let buf = &mut qb.buf;
    loop {
        match resp::parse_stream(&buf[used..], &limits, &mut qb.partial) {
            Ok(Step::Request(args, n)) => {
                used += n;
                // What follows AUTH or HELLO is read once they have run:
                // they may lift the limits on unauthenticated requests.
                let logs_in = unauthenticated
                    && args
                        .first()
                        .is_some_and(|c| c.eq_ignore_ascii_case(b"auth") || c.eq_ignore_ascii_case(b"hello"));
                if !args.is_empty() {
                    reqs.push(args);
                }
                if logs_in {
                    break;
                }
            }
            Ok(Step::More(n)) => {
                used += n;
                break;
            }
            Err(e) => {
                fatal = Some(protocol_error(&e));
                break;
            }
        }
    }
    buf.drain(..used);
    qb.parsed();
    if fatal.is_none() && qb.held() > shared.query_limit() {
        log::warn!("closing client {id} ({peer}): query buffer over client-query-buffer-limit");
        fatal = Some(protocol_error(&"Protocol error: client query buffer limit exceeded"));
    }
    // A big request's room is given back by the connection's periodic
    // check (`querybuf`), as Redis does, not here.
    let buf = &mut qb.buf;
    if buf.capacity() - buf.len() < 4096 {
        buf.reserve(buf.len().clamp(crate::querybuf::IO_BYTES, 1 << 20));
    }
    (reqs, used, fatal)
}

/// What became of a connection's buffered input.
enum Forwarded {
    /// Requests went to the executor: wait for their replies.
    Sent,
    /// No complete request yet.
    Idle,
    /// Nothing to run and a protocol error to answer with before closing.
    Close(Vec<u8>),
    /// The executor is gone.
    Gone,
}

/// Parses the complete requests in `buf` and hands them to the executor.
/// A protocol error after some requests stays in `fatal`, to be answered
/// once their replies are out.
fn forward(
    qb: &mut QueryBuf,
    shared: &Shared,
    id: u64,
    peer: &str,
    inbox: &Sender<Msg>,
    fatal: &mut Option<Vec<u8>>,
    conn: &ConnShared,
) -> Forwarded {
    let (reqs, used, err) = parse_requests(qb, shared, id, peer, conn);
    conn.qbuf_free.store(qb.free(), Ordering::Relaxed);
    *fatal = err;
    if !reqs.is_empty() {
        // Bytes not yet parsed (or parsed into a partial request) count too.
        let bytes = used + qb.held();
        if inbox.send(Msg::Requests { id, reqs, bytes }).is_err() {
            return Forwarded::Gone;
        }
        return Forwarded::Sent;
    }
    match fatal.take() {
        Some(err) => Forwarded::Close(err),
        None => Forwarded::Idle,
    }
}

/// The most reply bytes a client that has not logged in may leave unread:
/// past it the connection closes, unanswered, so that nobody without the
/// password can make the server hold output (Redis as Debian ships it,
/// its fix for CVE-2025-21605). Replies that wait for a write are unread.
pub const UNAUTHENTICATED_OUTPUT_LIMIT: usize = 1024;

/// Writes replies for a client not logged in, if they are within the
/// limit and the socket takes them at once (what it cannot take now would
/// wait for a client that may never read); false if the connection must
/// close instead.
fn write_unauthenticated(
    wr: &impl WriteHalf,
    bytes: &[u8],
    spliced: &crate::resp::Spliced,
    conn: &ConnShared,
    shared: &Shared,
) -> bool {
    if !spliced.is_empty() || bytes.len() > UNAUTHENTICATED_OUTPUT_LIMIT {
        return false;
    }
    counted(bytes.len(), shared);
    let ok = bytes.is_empty() || matches!(wr.try_write_now(bytes), Ok(n) if n == bytes.len());
    sent(bytes.len(), conn);
    ok
}

/// Counts `n` bytes about to be written (INFO's network totals).
fn counted(n: usize, shared: &Shared) {
    if n > 0 {
        shared.count(Net::OutBytes, n as u64);
        shared.count(Net::Writes, 1);
    }
}

/// `n` reply bytes no longer pending (CLIENT LIST's omem).
fn sent(n: usize, conn: &ConnShared) {
    let _ = conn.pending.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |p| Some(p.saturating_sub(n)));
}

/// Writes `bytes` unless the executor kills the connection meanwhile; false if the connection is done.
async fn write_out(wr: &mut impl WriteHalf, bytes: &[u8], conn: &ConnShared, shared: &Shared) -> bool {
    counted(bytes.len(), shared);
    let ok = tokio::select! {
        r = wr.write_all(bytes) => r.is_ok(),
        _ = conn.kill.notified() => false,
    };
    sent(bytes.len(), conn);
    ok
}

/// Writes `bytes` with the `spliced` values in their places (`resp::Spliced`),
/// gathered into as few writes as the socket takes (a big value does not
/// go out in a packet of its own after its header's); false if the
/// connection is done.
async fn write_spliced(
    wr: &mut impl WriteHalf,
    bytes: &[u8],
    spliced: &crate::resp::Spliced,
    conn: &ConnShared,
    shared: &Shared,
) -> bool {
    if spliced.is_empty() {
        return write_out(wr, bytes, conn, shared).await;
    }
    let mut parts: Vec<&[u8]> = Vec::with_capacity(2 * spliced.len() + 1);
    let mut from = 0;
    for (at, value) in spliced {
        parts.extend([&bytes[from..*at], value.as_slice()]);
        from = *at;
    }
    parts.push(&bytes[from..]);
    let total: usize = parts.iter().map(|p| p.len()).sum();
    counted(total, shared);
    let ok = tokio::select! {
        r = write_all_gathered(wr, &mut parts) => r.is_ok(),
        _ = conn.kill.notified() => false,
    };
    sent(total, conn);
    ok
}

/// What [`write_reading`] reads into while it writes.
struct ReadWhileWriting<'a, R> {
    rd: &'a mut R,
    qb: &'a mut QueryBuf,
    fatal: &'a mut Option<Vec<u8>>,
    id: u64,
    peer: &'a str,
}

/// [`write_spliced`], reading the client's input meanwhile into its query
/// buffer (up to `client-query-buffer-limit`, past which the connection
/// is closed with Redis's error once the replies are out). A client that
/// sends a long pipeline before it reads any reply (hiredis's throughput
/// test over a Unix socket, whose buffers are small) would otherwise wait
/// on a full socket while this task waits on the client's: Redis reads
/// on, and so does Tembo. The input read is parsed once the replies are
/// written. False if the connection is done.
async fn write_reading<R: AsyncRead + Unpin>(
    wr: &mut impl WriteHalf,
    r: ReadWhileWriting<'_, R>,
    bytes: &[u8],
    spliced: &crate::resp::Spliced,
    conn: &ConnShared,
    shared: &Shared,
) -> bool {
    let ReadWhileWriting { rd, qb, fatal, id, peer } = r;
    let write = write_spliced(wr, bytes, spliced, conn, shared);
    tokio::pin!(write);
    // Off after the client's end of input (it may still read its replies)
    // or past the limit.
    let mut reading = fatal.is_none();
    loop {
        let mut into = qb.read_into();
        tokio::select! {
            ok = &mut write => return ok,
            r = rd.read_buf(&mut into), if reading => {
                match r {
                    Ok(0) | Err(_) => reading = false,
                    Ok(n) => {
                        shared.count(Net::InBytes, n as u64);
                        shared.count(Net::Reads, 1);
                        qb.read(Instant::now());
                        if qb.held() > shared.query_limit() {
                            log::warn!("closing client {id} ({peer}): query buffer over client-query-buffer-limit");
                            *fatal = Some(protocol_error(&"Protocol error: client query buffer limit exceeded"));
                            reading = false;
                        }
                    }
                }
            }
        }
    }
}

/// `write_all` of the concatenation of `parts` with vectored writes.
async fn write_all_gathered(wr: &mut impl WriteHalf, parts: &mut [&[u8]]) -> std::io::Result<()> {
    let mut first = 0;
    while first < parts.len() {
        if parts[first].is_empty() {
            first += 1;
            continue;
        }
        let slices: Vec<std::io::IoSlice> = parts[first..].iter().take(64).map(|p| std::io::IoSlice::new(p)).collect();
        let mut n = wr.write_vectored(&slices).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        // The socket took at most what it was given: `first` stays in bounds.
        while n > 0 && first < parts.len() {
            let take = n.min(parts[first].len());
            parts[first] = &parts[first][take..];
            n -= take;
            if parts[first].is_empty() {
                first += 1;
            }
        }
    }
    Ok(())
}

async fn connection<R: AsyncRead + Unpin, W: WriteHalf>(
    c: Accepted<R, W>,
    id: u64,
    inbox: &Sender<Msg>,
    shared: &Shared,
) {
    let Accepted { mut rd, mut wr, fd, peer, local, unix } = c;
    let peer = peer.as_str();
    let (tx, mut rx) = unbounded_channel();
    let mut client = Client::new(id, peer.to_string(), local, false, tx);
    client.fd = fd;
    client.unix = unix;
    let conn = client.conn.clone();
    conn.auth_required.store(shared.default_auth_required.load(Ordering::Relaxed), Ordering::Relaxed);
    if inbox.send(Msg::Connect(Box::new(client))).is_err() {
        return;
    }
    let mut qb = QueryBuf::new(Instant::now());
    let mut waiting = false;
    let mut fatal: Option<Vec<u8>> = None;
    loop {
        // While its replies are pending a client is not read, so that its
        // unanswered input stays bounded; a client blocked in BLPOP & co. is,
        // to notice at once that it went away.
        let reading = fatal.is_none() && (!waiting || conn.blocked.load(Ordering::Relaxed));
        let check_due = qb.check_due();
        let check_at = check_due.unwrap_or_else(Instant::now);
        let mut into = qb.read_into();
        tokio::select! {
            _ = tokio::time::sleep_until(check_at.into()), if check_due.is_some() => {
                qb.check(Instant::now());
                conn.qbuf_free.store(qb.free(), Ordering::Relaxed);
            }
            r = rd.read_buf(&mut into), if reading => {
                match r {
                    Ok(0) | Err(_) => return,
                    Ok(n) => {
                        shared.count(Net::InBytes, n as u64);
                        shared.count(Net::Reads, 1);
                    }
                }
                qb.read(Instant::now());
                if waiting {
                    // Kept for when the blocking command is answered.
                    if qb.held() > shared.query_limit() {
                        log::warn!("closing client {id} ({peer}): query buffer over client-query-buffer-limit");
                        fatal = Some(protocol_error(&"Protocol error: client query buffer limit exceeded"));
                    }
                    continue;
                }
                match forward(&mut qb, shared, id, peer, inbox, &mut fatal, &conn) {
                    Forwarded::Sent => waiting = true,
                    Forwarded::Idle => {}
                    Forwarded::Close(err) => {
                        let _ = write_out(&mut wr, &err, &conn, shared).await;
                        return;
                    }
                    Forwarded::Gone => return,
                }
            }
            out = rx.recv() => {
                match out {
                    None => return,
                    Some(Out::Push(bytes)) => {
                        if !write_out(&mut wr, &bytes, &conn, shared).await {
                            return;
                        }
                    }
                    Some(Out::Replies { bytes, spliced, close }) => {
                        let written = if conn.auth_required.load(Ordering::Relaxed) {
                            if !write_unauthenticated(&wr, &bytes, &spliced, &conn, shared) {
                                log::info!(
                                    "closing client {id} ({peer}): not logged in, and its replies ({} bytes) over the {UNAUTHENTICATED_OUTPUT_LIMIT} it may leave unread",
                                    bytes.len() + spliced.iter().map(|(_, v)| v.len()).sum::<usize>()
                                );
                                return;
                            }
                            true
                        } else {
                            let reading = ReadWhileWriting { rd: &mut rd, qb: &mut qb, fatal: &mut fatal, id, peer };
                            write_reading(&mut wr, reading, &bytes, &spliced, &conn, shared).await
                        };
                        if !written || close {
                            return;
                        }
                        qb.wrote(Instant::now());
                        waiting = false;
                        if let Some(err) = fatal.take() {
                            let _ = write_out(&mut wr, &err, &conn, shared).await;
                            return;
                        }
                        if !qb.buf.is_empty() {
                            // Input that came while the client was blocked.
                            match forward(&mut qb, shared, id, peer, inbox, &mut fatal, &conn) {
                                Forwarded::Sent => waiting = true,
                                Forwarded::Idle => {}
                                Forwarded::Close(err) => {
                                    let _ = write_out(&mut wr, &err, &conn, shared).await;
                                    return;
                                }
                                Forwarded::Gone => return,
                            }
                        }
                    }
                }
            }
            _ = conn.kill.notified() => return,
        }
    }
}
