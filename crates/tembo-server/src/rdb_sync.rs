//! SYNC / PSYNC for a client that wants the snapshot only: `redis-cli
//! --rdb` and `--functions-rdb`, backup tools that speak the replication
//! handshake (`REPLCONF rdb-only 1`, then `SYNC`).
//!
//! The RDB is written by `crate::rdb_save` from one pinned version on a
//! thread of its own, so the executor serves every other client
//! meanwhile. The executor starts the thread once the SYNC's group is
//! committed and answered, and waits until the thread holds its snapshot:
//! the file holds exactly the writes committed up to and with that group
//! (what its client wrote before the SYNC included, nothing after). It is
//! sent to the connection as it is produced: after
//! `$EOF:<40 random characters>` when the client announced `capa eof`
//! (the mark follows the data, as in Redis's diskless replication), or,
//! for a client that did not, spooled to an anonymous temporary file first
//! so that the `$<length>` header can come before it. The thread waits
//! while more than [`IN_FLIGHT`] bytes are queued for the socket, so a slow
//! reader costs memory only to that bound; a reader that takes nothing for
//! [`STALL_TIMEOUT`] (Redis's `repl-timeout`) is given up on, so that its
//! pinned version does not hold back the reclaiming of space for ever.
//! Nothing else is sent to the connection meanwhile (`Client::streaming`).
//! When the file is out the
//! connection closes, as Redis closes an rdb-only replica's. If the save
//! fails midway the connection closes without the end mark (or short of
//! the announced length): the client sees an incomplete transfer, never a
//! complete-looking wrong one.
//!
//! What this is not: replication. Tembo streams no writes to replicas; a
//! SYNC or PSYNC without `rdb-only` is refused with an error that says so.

use std::io::{self, Seek, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tembo_store::{Db, Snapshot};
use tokio::sync::mpsc::UnboundedSender;

use crate::client::{ConnShared, Out};
use crate::rdb_save::{self, Filter, SaveError};

/// Bytes the thread lets wait for the socket before it pauses.
pub const IN_FLIGHT: usize = 8 << 20;
/// Bytes per message to the connection.
const CHUNK: usize = 256 << 10;
/// How long a reader may take nothing before the transfer stops.
pub const STALL_TIMEOUT: Duration = Duration::from_secs(60);

/// What a client asked for with REPLCONF before SYNC.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplConf {
    /// `REPLCONF capa eof`: it reads a transfer ended by a mark.
    pub capa_eof: bool,
    /// `REPLCONF rdb-only 1`: the snapshot alone, no write stream.
    pub rdb_only: bool,
    /// `REPLCONF rdb-filter-only`: what the snapshot holds.
    pub filter: Filter,
}

impl Default for ReplConf {
    fn default() -> Self {
        ReplConf { capa_eof: false, rdb_only: false, filter: Filter::ALL }
    }
}

/// A transfer asked for by a command, started once that command's group
/// has been answered (so that no earlier reply can land inside the RDB).
#[derive(Debug)]
pub struct Request {
    /// The client.
    pub client: u64,
    /// Its REPLCONF settings.
    pub conf: ReplConf,
    /// `+FULLRESYNC <replid> 0` goes first (PSYNC; SYNC has no such line).
    pub fullresync: Option<String>,
}

/// The transfers running now.
#[derive(Debug, Default)]
pub struct Syncs {
    /// Asked for, not yet started.
    pub requests: Vec<Request>,
    running: Vec<(Arc<AtomicBool>, JoinHandle<()>)>,
    /// Transfers started since the server started.
    pub started: u64,
}

impl Syncs {
    /// Starts `req`'s transfer to a connection.
    pub fn start(
        &mut self,
        req: Request,
        db: Arc<Db>,
        databases: usize,
        out: UnboundedSender<Out>,
        conn: Arc<ConnShared>,
    ) {
        self.running.retain(|(_, h)| !h.is_finished());
        let cancel = Arc::new(AtomicBool::new(false));
        let stop = cancel.clone();
        // The thread says when it holds its snapshot: until then the
        // executor runs nothing more, so the file holds exactly what was
        // committed before the SYNC.
        let (pinned_tx, pinned) = std::sync::mpsc::channel::<()>();
        let on_failure = out.clone();
        let spawned = std::thread::Builder::new().name("tembo-rdb-sync".into()).spawn(move || {
            let started = Instant::now();
            let sink = Sink { out, conn, stop, stall: STALL_TIMEOUT, buf: Vec::with_capacity(CHUNK) };
            match transfer(&db, databases, &req, sink, pinned_tx) {
                Ok(r) => log::info!(
                    "client {}: RDB snapshot sent ({} keys, {} libraries, {} bytes, version {}) in {:.2?}",
                    req.client,
                    r.keys,
                    r.functions,
                    r.bytes,
                    r.version,
                    started.elapsed()
                ),
                Err(e) => log::warn!("client {}: RDB snapshot transfer stopped: {e}", req.client),
            }
        });
        match spawned {
            Ok(h) => {
                // An error: the thread ended before pinning (it said why).
                let _ = pinned.recv();
                self.started += 1;
                self.running.push((cancel, h));
            }
            Err(e) => {
                log::error!("could not start the RDB snapshot thread: {e}");
                let _ = on_failure.send(Out::closing());
            }
        }
    }

    /// Stops every transfer and waits for the threads (they hold the database).
    pub fn cancel_and_wait(&mut self) {
        for (c, _) in &self.running {
            c.store(true, Ordering::Relaxed);
        }
        for (_, h) in self.running.drain(..) {
            let _ = h.join();
        }
    }

    /// Transfers running now.
    pub fn running(&self) -> usize {
        self.running.iter().filter(|(_, h)| !h.is_finished()).count()
    }
}

/// Sends the header, the file and the end; the connection closes after
/// (when `sink` drops, so on every path out, a panic's included).
fn transfer(
    db: &Db,
    databases: usize,
    req: &Request,
    mut sink: Sink,
    pinned: std::sync::mpsc::Sender<()>,
) -> Result<rdb_save::SaveReport, SaveError> {
    db.snapshot().map_err(SaveError::from).and_then(|snap| {
        let _ = pinned.send(());
        send_rdb(&snap, databases, req, &mut sink)
    })
}

fn send_rdb(
    snap: &Snapshot<'_>,
    databases: usize,
    req: &Request,
    sink: &mut Sink,
) -> Result<rdb_save::SaveReport, SaveError> {
    if let Some(replid) = &req.fullresync {
        sink.write_all(format!("+FULLRESYNC {replid} 0\r\n").as_bytes())?;
    }
    let now = crate::exec::now_ms();
    let stop = sink.stop.clone();
    let mut keep_going = move |_| !stop.load(Ordering::Relaxed);
    let report = if req.conf.capa_eof {
        let mark: String = (0..40).map(|_| char::from(b"0123456789abcdef"[rand::random::<usize>() % 16])).collect();
        sink.write_all(format!("$EOF:{mark}\r\n").as_bytes())?;
        let report = rdb_save::save_snapshot(snap, databases, req.conf.filter, now, &mut *sink, &mut keep_going)?;
        sink.write_all(mark.as_bytes())?;
        report
    } else {
        let mut spool = tempfile::tempfile()?;
        let report = rdb_save::save_snapshot(
            snap,
            databases,
            req.conf.filter,
            now,
            io::BufWriter::new(&mut spool),
            &mut keep_going,
        )?;
        sink.write_all(format!("${}\r\n", report.bytes).as_bytes())?;
        spool.rewind()?;
        io::copy(&mut spool, sink)?;
        report
    };
    sink.flush()?;
    Ok(report)
}

/// The connection, as a `Write`: chunks of [`CHUNK`] bytes, paced by what
/// the socket has not taken yet.
struct Sink {
    out: UnboundedSender<Out>,
    conn: Arc<ConnShared>,
    stop: Arc<AtomicBool>,
    /// [`STALL_TIMEOUT`] (shorter in tests).
    stall: Duration,
    buf: Vec<u8>,
}

impl Sink {
    fn send(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let (mut last, mut since) = (self.conn.pending(), Instant::now());
        while last > IN_FLIGHT {
            if self.stop.load(Ordering::Relaxed) || self.out.is_closed() {
                return Err(io::ErrorKind::BrokenPipe.into());
            }
            std::thread::sleep(Duration::from_millis(1));
            let now = self.conn.pending();
            if now < last {
                since = Instant::now();
            } else if since.elapsed() > self.stall {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("the client read nothing for {:.0?}", self.stall),
                ));
            }
            last = now;
        }
        let bytes = std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK));
        self.conn.pending.fetch_add(bytes.len(), Ordering::Relaxed);
        self.out.send(Out::Push(bytes)).map_err(|_| io::Error::from(io::ErrorKind::BrokenPipe))
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        let _ = self.out.send(Out::closing());
    }
}

impl Write for Sink {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        if self.stop.load(Ordering::Relaxed) {
            // Not `Interrupted`: `write_all` retries that kind forever.
            return Err(io::Error::other("server shutting down"));
        }
        let n = b.len().min(CHUNK - self.buf.len());
        self.buf.extend_from_slice(&b[..n]);
        if self.buf.len() >= CHUNK {
            self.send()?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.send()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stopped_sink_fails_writes_instead_of_retrying_them() {
        let (out, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let stop = Arc::new(AtomicBool::new(false));
        let mut sink = Sink {
            out,
            conn: Arc::new(ConnShared::default()),
            stop: stop.clone(),
            stall: STALL_TIMEOUT,
            buf: Vec::new(),
        };
        sink.write_all(&vec![7u8; CHUNK + 10]).unwrap();
        match rx.try_recv() {
            Ok(Out::Push(bytes)) => assert_eq!(bytes.len(), CHUNK),
            other => panic!("expected one full chunk, got {other:?}"),
        }
        stop.store(true, Ordering::Relaxed);
        // `write_all` loops on `Interrupted`: the stop must be another kind.
        let e = sink.write_all(b"more").unwrap_err();
        assert_ne!(e.kind(), io::ErrorKind::Interrupted);
    }

    #[test]
    fn a_sink_whose_connection_closed_fails() {
        let (out, rx) = tokio::sync::mpsc::unbounded_channel();
        drop(rx);
        let mut sink = Sink {
            out,
            conn: Arc::new(ConnShared::default()),
            stop: Arc::default(),
            stall: STALL_TIMEOUT,
            buf: Vec::new(),
        };
        assert_eq!(sink.write_all(&vec![1u8; CHUNK]).unwrap_err().kind(), io::ErrorKind::BrokenPipe);
    }

    #[test]
    fn a_reader_that_takes_nothing_is_given_up_on_and_its_connection_closed() {
        let (out, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let conn = Arc::new(ConnShared::default());
        let stall = Duration::from_millis(50);
        let mut sink = Sink { out, conn: conn.clone(), stop: Arc::default(), stall, buf: Vec::new() };
        // More than IN_FLIGHT queued and never written to the socket.
        let started = Instant::now();
        let e = sink.write_all(&vec![0u8; IN_FLIGHT + 2 * CHUNK]).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert!(started.elapsed() >= stall);
        drop(sink);
        let mut closed = false;
        while let Ok(m) = rx.try_recv() {
            closed = matches!(m, Out::Replies { close: true, .. });
        }
        assert!(closed, "the connection is told to close after the transfer ends");
    }
}
