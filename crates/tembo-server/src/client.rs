//! One connection's server-side state.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::Notify;

use crate::blocking::{BlockReq, Blocked};

/// What the executor and a connection task share about the connection.
#[derive(Debug, Default)]
pub struct ConnShared {
    /// Bytes handed to the connection and not yet written to its socket.
    pub pending: AtomicUsize,
    /// The client waits in a blocking command: the connection keeps
    /// reading, only to notice a disconnect.
    pub blocked: AtomicBool,
    /// Closes the connection at once, dropping what it has not written
    /// (output buffer limits).
    pub kill: Notify,
    /// Room left in the connection's read buffer (CLIENT LIST qbuf-free).
    pub qbuf_free: AtomicUsize,
    /// The client has yet to authenticate: its requests are held to
    /// `resp::ParseLimits::unauthenticated` (set by the executor).
    pub auth_required: AtomicBool,
}

impl ConnShared {
    /// Bytes not yet written.
    pub fn pending(&self) -> usize {
        self.pending.load(Ordering::Relaxed)
    }
}

/// What the executor sends a connection.
#[derive(Debug)]
pub enum Out {
    /// The replies to one batch of requests, in order; `close` ends the connection after writing them.
    Replies {
        /// Encoded replies.
        bytes: Vec<u8>,
        /// Big values that belong in `bytes`, handed over uncopied.
        spliced: crate::resp::Spliced,
        /// Close after writing.
        close: bool,
    },
    /// Bytes that answer nothing the client is waiting for (MONITOR lines).
    Push(Vec<u8>),
}

impl Out {
    /// Replies that close the connection after them (none: it just closes).
    pub fn closing() -> Out {
        Out::Replies { bytes: Vec::new(), spliced: Vec::new(), close: true }
    }

    /// The bytes this sends.
    pub(crate) fn len(&self) -> usize {
        match self {
            Out::Replies { bytes, spliced, .. } => bytes.len() + spliced.iter().map(|(_, v)| v.len()).sum::<usize>(),
            Out::Push(bytes) => bytes.len(),
        }
    }
}

/// Server-side state of a client.
#[derive(Clone, Debug)]
pub struct Client {
    /// CLIENT ID.
    pub id: u64,
    /// Peer address, `ip:port`.
    pub addr: String,
    /// Local address, `ip:port`.
    pub laddr: String,
    /// The connection's socket descriptor (CLIENT LIST `fd`); -1 for the
    /// clients with no socket (scripts, in-process sessions), as in Redis.
    pub fd: i32,
    /// Connected through the Unix domain socket (CLIENT LIST's flag `U`).
    pub unix: bool,
    /// CLIENT SETNAME.
    pub name: Option<String>,
    /// CLIENT SETINFO LIB-NAME / LIB-VER.
    pub lib: (Option<String>, Option<String>),
    /// SELECTed database.
    pub db: u8,
    /// RESP version (2 or 3).
    pub proto: u8,
    /// Whether the client's command is being run by a script (redis.call).
    pub in_script: bool,
    /// Whether AUTH succeeded (or no password is set).
    pub authed: bool,
    /// The ACL user the client runs as (`default` until AUTH names another).
    pub user: Arc<str>,
    /// Commands queued after MULTI.
    pub multi: Option<Vec<Vec<Vec<u8>>>>,
    /// A command failed to queue: EXEC must abort.
    pub multi_error: bool,
    /// WATCHed keys.
    pub watching: Vec<(u8, Vec<u8>)>,
    /// The watched keys that had expired, not yet removed, when watched:
    /// their expiry does not fail EXEC.
    pub watch_stale: Vec<(u8, Vec<u8>)>,
    /// A watched key changed: EXEC must fail.
    pub watch_dirty: bool,
    /// Whether the client is in MONITOR mode.
    pub monitor: bool,
    /// Connection time.
    pub since: Instant,
    /// Name of the last command run.
    pub last_cmd: &'static str,
    /// Where replies go.
    pub out: UnboundedSender<Out>,
    /// Close the connection once this batch's replies are written.
    pub close: bool,
    /// Shared with the connection task.
    pub conn: Arc<ConnShared>,
    /// SUBSCRIBEd channels.
    pub channels: HashSet<Vec<u8>>,
    /// PSUBSCRIBEd patterns.
    pub patterns: HashSet<Vec<u8>>,
    /// Shard channels subscribed (SSUBSCRIBE).
    pub shard_channels: HashSet<Vec<u8>>,
    /// Pub/sub messages for this client produced while it runs a command
    /// (it published to itself); they go out before that command's reply.
    pub pushbuf: Vec<u8>,
    /// MONITOR lines of this monitor's own commands; they go out after
    /// the command's reply.
    pub monitor_echo: Vec<u8>,
    /// Since when the output buffer has been over the pub/sub soft limit.
    pub soft_limit_since: Option<Instant>,
    /// Blocking commands may not block (inside EXEC, in-process sessions):
    /// they answer as if their timeout had passed.
    pub no_block: bool,
    /// CLIENT REPLY OFF: replies are dropped (pushes still go out).
    pub reply_off: bool,
    /// CLIENT REPLY SKIP: drop the next command's reply; `reply_skip` is
    /// set for the command being run.
    pub reply_skip_next: bool,
    pub reply_skip: bool,
    /// Set by a blocking command that found nothing: the executor blocks the client.
    pub block_req: Option<BlockReq>,
    /// The blocking command this client waits in, if any.
    pub blocked: Option<Box<Blocked>>,
    /// Set by `cmd::dispatch` when CLIENT PAUSE holds the command: the
    /// executor then holds the client (see `pause`).
    pub postpone_now: bool,
    /// While its requests run: the bytes they came in (CLIENT LIST qbuf,
    /// which in Redis still holds the whole read being processed).
    pub qbuf: usize,
    /// While a command runs: its arguments' bytes (CLIENT LIST argv-mem).
    pub argv_mem: usize,
    /// When the client last sent a command (CLIENT LIST idle).
    pub last_active: Instant,
    /// Held by CLIENT PAUSE: (order held, the held request and those after it).
    pub postponed: Option<(u64, Vec<Vec<Vec<u8>>>)>,
    /// CLIENT TRACKING settings.
    pub tracking: crate::tracking::ClientTracking,
    /// What REPLCONF said (`crate::cmd::replication`).
    pub replconf: crate::rdb_sync::ReplConf,
    /// SYNC asked for a snapshot transfer: the connection will carry the
    /// RDB and then close; requests after SYNC are dropped.
    pub syncing: bool,
    /// The transfer has started: nothing else is sent to the connection
    /// (a tracking redirect's invalidations, say, would corrupt the file).
    pub streaming: bool,
}

impl Client {
    /// A new client.
    pub fn new(id: u64, addr: String, laddr: String, authed: bool, out: UnboundedSender<Out>) -> Client {
        Client {
            id,
            addr,
            laddr,
            fd: -1,
            unix: false,
            name: None,
            lib: (None, None),
            db: 0,
            proto: 2,
            authed,
            in_script: false,
            user: "default".into(),
            multi: None,
            multi_error: false,
            watching: Vec::new(),
            watch_stale: Vec::new(),
            watch_dirty: false,
            monitor: false,
            since: Instant::now(),
            last_cmd: "NULL",
            out,
            close: false,
            conn: Arc::new(ConnShared::default()),
            channels: HashSet::new(),
            patterns: HashSet::new(),
            shard_channels: HashSet::new(),
            pushbuf: Vec::new(),
            monitor_echo: Vec::new(),
            soft_limit_since: None,
            no_block: false,
            reply_off: false,
            reply_skip_next: false,
            reply_skip: false,
            block_req: None,
            blocked: None,
            postpone_now: false,
            qbuf: 0,
            argv_mem: 0,
            last_active: Instant::now(),
            postponed: None,
            tracking: Default::default(),
            replconf: Default::default(),
            syncing: false,
            streaming: false,
        }
    }

    /// Whether the client is in pub/sub mode: subscribed to a channel, a
    /// pattern or a shard channel.
    pub fn subscribed(&self) -> bool {
        self.subscriptions() > 0 || !self.shard_channels.is_empty()
    }

    /// Channels plus patterns subscribed (what (P)SUBSCRIBE replies count).
    pub fn subscriptions(&self) -> usize {
        self.channels.len() + self.patterns.len()
    }

    /// The line CLIENT LIST and CLIENT INFO print.
    pub fn info_line(&self) -> String {
        let mut flags = String::new();
        if self.multi.is_some() {
            flags.push('x');
        }
        if self.monitor {
            flags.push('O');
        }
        if self.blocked.is_some() || self.postponed.is_some() {
            flags.push('b');
        }
        if self.subscribed() {
            flags.push('P');
        }
        if self.tracking.on {
            flags.push('t');
            if self.tracking.bcast {
                flags.push('B');
            }
            if self.tracking.broken_redirect {
                flags.push('R');
            }
        }
        if self.unix {
            flags.push('U');
        }
        if flags.is_empty() {
            flags.push('N');
        }
        let age = self.since.elapsed().as_secs();
        let idle = self.last_active.elapsed().as_secs();
        let qbuf_free = self.conn.qbuf_free.load(Ordering::Relaxed);
        let multi_mem: usize = self.multi.iter().flatten().flatten().map(Vec::len).sum();
        let omem = self.conn.pending();
        let tot_mem = self.qbuf + qbuf_free + self.argv_mem + multi_mem + omem;
        format!(
            "id={} addr={} laddr={} fd={} name={} age={age} idle={idle} flags={flags} db={} sub={} psub={} ssub={} multi={} qbuf={} qbuf-free={qbuf_free} argv-mem={} multi-mem={multi_mem} rbs=0 rbp=0 obl=0 oll=0 omem={omem} tot-mem={tot_mem} events=r cmd={} user={} redir={} resp={} lib-name={} lib-ver={}",
            self.id,
            self.addr,
            self.laddr,
            self.fd,
            self.name.as_deref().unwrap_or(""),
            self.db,
            self.channels.len(),
            self.patterns.len(),
            self.shard_channels.len(),
            self.multi.as_ref().map_or(-1, |q| q.len() as i64),
            self.qbuf,
            self.argv_mem,
            self.last_cmd,
            self.user,
            if self.tracking.on { self.tracking.redirect as i64 } else { -1 },
            self.proto,
            self.lib.0.as_deref().unwrap_or(""),
            self.lib.1.as_deref().unwrap_or(""),
        )
    }
}
