//! The executor: runs every command, in arrival order, and commits in
//! groups. It runs on the server's single thread, which it shares with the
//! connection tasks (the shape of Redis's event loop): it drives their
//! current-thread runtime while it waits for requests and hands replies
//! over (`State::run`), so that costs no thread wake-up, and runs each group
//! outside it. A script past busy-reply-threshold has a helper thread drive
//! the runtime meanwhile (`crate::busy`). Why not the executor as a task
//! of the runtime: a task cannot let go of the thread in the middle of a
//! script, and a multi-thread runtime with one worker (whose worker a task
//! can hand over) cost 5-7% of redis-benchmark's throughput.
//!
//! Like Redis, commands run one at a time, so each is atomic and sees every
//! earlier one. Unlike Redis, no reply leaves before its writes are durable:
//! the executor takes every request waiting in its inbox (up to
//! [`MAX_GROUP`] messages), runs them against the [`Store`]'s overlay,
//! commits the overlay with one `WriteBatch`, and only then hands the
//! replies to the connections (group commit). A commit that fails (the pool
//! is full) loses nothing acknowledged: the group is rolled back and its
//! requests run again one command per commit, so that only the commands
//! whose own writes cannot be stored get an error.

use std::collections::{HashMap, VecDeque};

use rustc_hash::FxHashMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tembo_store::{Db, DbError};
use tokio::sync::mpsc::UnboundedReceiver;

use crate::client::{Client, Out};
use crate::cmd::{self, CmdError};
use crate::config::Config;
use crate::encoding::{self, Meta};
use crate::resp::Reply;
use crate::stats::Stats;
use crate::store::Store;

/// Most inbox messages one commit group takes.
pub const MAX_GROUP: usize = 512;
/// How often the expire cycle and the reclaimer run.
const CRON_EVERY: Duration = Duration::from_millis(100);
/// Time a busy executor gives the active expire cycle in each cron window:
/// a quarter of its time, as Redis's slow cycle. An idle one expires
/// continuously.
const EXPIRE_BUDGET: Duration = Duration::from_millis(25);
/// Keys expired per step (and commit) of the server's loop.
const EXPIRE_STEP: usize = 64;
/// Keys one `State::cron` expires at most.
const CRON_EXPIRE_LIMIT: usize = 1000;
/// Time a busy executor gives reclaiming dropped collections in each cron
/// window: a tenth of its time. An idle one reclaims continuously.
const RECLAIM_BUDGET: Duration = Duration::from_millis(10);
/// Elements (or flushed keys) deleted per reclaim step and commit when
/// reclaiming in one go (`State::cron`, which in-process sessions use).
const RECLAIM_STEP: usize = 500;
/// How long the executor must have had nothing to run before it reclaims
/// beyond the cron's budget: a client in a request-reply loop is never
/// delayed by it, only gaps in the traffic are used.
const IDLE_AFTER: Duration = Duration::from_millis(1);
/// Elements per step of the server's loop: a request waits behind at most
/// one such step (under 0.1 ms on the 2-core VM).
const RECLAIM_STEP_SMALL: usize = 32;
/// Number of databases SELECT accepts (`databases`).
pub const MAX_DATABASES: usize = 256;

/// What connections send the executor.
#[derive(Debug)]
pub enum Msg {
    /// A client connected.
    Connect(Box<Client>),
    /// Requests parsed from one read, to run in order.
    Requests {
        /// Client id.
        id: u64,
        /// The requests.
        reqs: Vec<Vec<Vec<u8>>>,
        /// The bytes they came in.
        bytes: usize,
    },
    /// A client went away.
    Disconnect(u64),
    /// SIGTERM or SIGINT: shut down cleanly.
    Shutdown,
    /// The place of a message of the current group that a busy script's
    /// hook took and handled (`crate::busy`).
    Served,
}

/// Requests of one client, each a list of arguments.
type Requests = Vec<Vec<Vec<u8>>>;

/// Everything the executor owns.
#[derive(Debug)]
pub struct State {
    /// The database and the pending writes.
    pub store: Store,
    /// Settings (CONFIG SET changes some).
    pub cfg: Config,
    /// Connected clients other than the one running a command.
    pub clients: FxHashMap<u64, Client>,
    /// Keys per database, committed.
    pub keys: Vec<i64>,
    /// Keys with an expiry per database, committed.
    pub expires: Vec<i64>,
    /// Changes to `keys` and `expires` made by the pending writes.
    pub pending_counts: Vec<(i64, i64)>,
    /// Flush generation per database, committed (see `encoding::meta_key`).
    pub gens: Vec<u16>,
    /// Generations started by the pending writes (FLUSHDB/FLUSHALL).
    pub pending_gens: Vec<Option<u16>>,
    /// Committed map from the database a client selects (logical) to the
    /// one its keys are stored under (physical); SWAPDB swaps two entries.
    /// Storage uses physical numbers; what clients see (WATCH, blocking,
    /// notifications, INFO keyspace) uses logical ones.
    db_map: Vec<u8>,
    /// The map as the pending writes leave it (SWAPDB in this group).
    pending_db_map: Option<Vec<u8>>,
    /// Databases whose older generations may still hold keys for the sweep.
    pub sweeping: Vec<bool>,
    /// WATCHed keys and who watches them.
    pub watchers: HashMap<(u8, Vec<u8>), Vec<u64>>,
    /// Counters INFO reports.
    pub stats: Stats,
    /// SCAN-family cursors: cursor number -> where to resume.
    pub cursors: crate::cursor::Cursors,
    /// Limits shared with the network side.
    pub shared: Arc<crate::net::Shared>,
    /// Compatibility settings CONFIG accepts and shows (see `cmd::server::INERT`).
    pub inert: Vec<(String, String)>,
    /// INFO run_id.
    pub run_id: String,
    /// INFO master_replid (a replication id, as a master without replicas has one).
    pub replid: String,
    /// INFO config_file.
    pub config_file: String,
    /// Clients in MONITOR mode.
    pub monitors: Vec<u64>,
    /// BGSAVE's backup thread and how the last backup ended.
    pub bgsave: crate::bgsave::Bgsave,
    /// RDB snapshots being sent to clients (SYNC after REPLCONF rdb-only).
    pub syncs: crate::rdb_sync::Syncs,
    /// Set by SHUTDOWN or a signal.
    pub shutdown: bool,
    /// Whether the cron's active expire cycle runs (DEBUG SET-ACTIVE-EXPIRE).
    pub active_expire: bool,
    /// DEBUG PAUSE-CRON: the cron's work (active expiry, statistics, BGSAVE
    /// checks) waits; reclaiming dropped collections, Redis's lazy-free
    /// thread's work, goes on.
    pub cron_paused: bool,
    /// Whether RESTORE takes a payload whose checksum is wrong
    /// (DEBUG SET-SKIP-CHECKSUM-VALIDATION; its contents are still checked
    /// whole).
    pub skip_checksum: bool,
    /// Whether scripts may call the commands scripts are denied
    /// (DEBUG SET-DISABLE-DENY-SCRIPTS, a testing aid).
    pub scripts_allow_denied: bool,
    /// While a script runs: the time its commands see (the script's start,
    /// as in Redis, where time stands still for a script).
    pub frozen_now: Option<u64>,
    /// A command stopped midway since the last commit (it panicked, a
    /// busy script was stopped by SHUTDOWN NOSAVE, or the engine's limits refused
    /// a key or value it wrote): its writes may be partial, so the group's
    /// writes must not be committed (see [`cmd::run`]).
    pub torn: bool,
    /// SLOWLOG's entries and settings.
    pub slowlog: crate::cmd::slowlog::SlowLog,
    /// The slow log's [`mark`](crate::cmd::slowlog::SlowLog::mark) when the group began.
    slowlog_mark: i64,
    /// `notify-keyspace-events` as flags (`crate::notify`); 0 = off.
    pub notify_flags: u32,
    /// Writes of the running command change only a value's encoding (as
    /// PFDEBUG TODENSE does): like Redis, they break no WATCH, send no
    /// event and invalidate no client's cache.
    pub encoding_only: bool,
    /// Keys the running command touched, for its notifications.
    pub notes: Vec<crate::notify::Note>,
    /// The Lua interpreter, script cache and function libraries, made on
    /// first use.
    pub scripts: Option<crate::script::Engine>,
    /// CLIENT TRACKING's table of read keys and BCAST prefixes.
    pub tracking: crate::tracking::Table,
    /// The keys a running EVAL or FCALL declared: what a read-only command
    /// inside it makes a tracking client track.
    pub script_keys: Option<Vec<Vec<u8>>>,
    /// A library was loaded, replaced or deleted since the last commit: if
    /// the group is discarded, the interpreter reloads the stored ones.
    pub functions_changed: bool,
    /// Unix seconds of the last commit (LASTSAVE).
    pub last_commit: u64,
    /// Pub/sub subscriptions by channel and pattern.
    pub pubsub: crate::pubsub::Index,
    /// Clients blocked in BLPOP and friends.
    pub blocking: crate::blocking::Registry,
    /// What goes to the clients once the current group commits, in the
    /// order it was produced (replies and pub/sub messages).
    pub outbox: Vec<(u64, Out)>,
    /// Clients the group unblocked: (id, encoded reply of the blocking
    /// command, requests they pipelined after it, still to run).
    resume: VecDeque<(u64, Vec<u8>, Requests)>,
    /// Clients as they were before the current group changed them, restored
    /// if its commit fails.
    saved: FxHashMap<u64, Client>,
    /// Users and their permissions (ACL).
    pub acl: crate::acl::Acl,
    /// Unix time from the command timer's instants (resynced each cron tick).
    pub wall: crate::clock::WallClock,
    /// Latency events (LATENCY LATEST, HISTORY…).
    pub latency: crate::latency::Monitor,
    /// The ACL state before the current group first changed it, put back
    /// if the group's commit fails (the group then runs again).
    acl_before: Option<crate::acl::Acl>,
    /// `client-output-buffer-limit` (its pub/sub class is enforced).
    pub output_limits: crate::cmd::OutputLimits,
    /// Dropped collections whose elements the reclaimer has yet to delete
    /// (committed `R` records; INFO lazyfree_pending_objects).
    pub lazyfree_pending: u64,
    /// Reclaiming may have work left: the last step stopped at its limit, a
    /// commit dropped a collection or flushed a database, or a new cron
    /// window began. The server's loop then takes small steps between
    /// groups (`run`); a step that finds nothing clears it.
    reclaim_left: bool,
    /// The active expire cycle may have keys due: the last step reached its
    /// limit, or a new cron window began (`run`).
    expire_left: bool,
    /// How long the last command `cmd::run` ran took (SLOWLOG reads it).
    pub last_call: Duration,
    /// When each key was last used (OBJECT IDLETIME) and how often (OBJECT FREQ).
    pub access: crate::access::AccessClock,
    /// `maxmemory` and its policy, and the eviction's state.
    pub maxmemory: crate::maxmemory::MaxMemory,
    /// The pool was over `maxmemory` when the running EVAL, FCALL or EXEC
    /// started (Redis's `pre_command_oom_state`): a script's first write
    /// of a `denyoom` command is then refused.
    pub oom_at_start: bool,
    /// The running script declared `allow-oom` (or `no-writes`).
    pub script_allow_oom: bool,
    /// CLIENT PAUSE in force (see `pause`).
    pub pause: Option<crate::pause::Pause>,
    /// Order in which paused clients were held.
    pub pause_seq: u64,
    /// The pause as it was when the current group started (put back if
    /// its commit fails).
    pause_before: Option<crate::pause::Pause>,
    /// The EVAL or FCALL running now, if any (`crate::busy`).
    pub script_run: Option<crate::busy::ScriptRun>,
    /// The executor's inbox while a group runs: a busy script takes from it.
    pub inbox: Option<UnboundedReceiver<Msg>>,
    /// What a busy script left to run after it (its own client's requests,
    /// those of clients in the group, disconnects): joins the group.
    pub after_busy: VecDeque<Msg>,
    /// The group being run; messages after `group_at` are still to run.
    pub group: Vec<Msg>,
    /// The message of `group` running now.
    pub group_at: usize,
    /// The command running now is the first its client runs in the group.
    pub first_of_client: bool,
    /// A failed group's requests are being run again, one per commit.
    pub rerunning: bool,
    /// A busy script's hook is running another client's requests.
    serving_busy: bool,
    /// SHUTDOWN NOSAVE (or a signal) stopped a busy script: the group is
    /// not rerun.
    pub script_stopped_by_shutdown: bool,
    /// The runtime the connections run on (a busy script has it driven by
    /// a helper thread), when the executor serves sockets.
    pub runtime: Option<Arc<tokio::runtime::Runtime>>,
}

/// One command's view: the state and the client running it.
#[derive(Debug)]
pub struct Ctx<'a> {
    /// Executor state.
    pub st: &'a mut State,
    /// The client.
    pub client: &'a mut Client,
    /// Wall-clock time of the command, Unix ms (one value for a whole command, as in Redis).
    pub now: u64,
}

/// 40 random hex digits (run and replication ids).
fn random_hex40() -> String {
    (0..40).map(|_| char::from(b"0123456789abcdef"[rand::random::<usize>() % 16])).collect()
}

/// Unix time in milliseconds.
pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// Why the executor cannot start on a database.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The database failed.
    #[error(transparent)]
    Db(#[from] DbError),
    /// The pool's server data is in a key layout this build does not read.
    #[error("{0}")]
    Layout(String),
    /// The `user` lines of the config or the `aclfile` cannot be loaded.
    #[error("ACL: {0}")]
    Acl(String),
}

impl State {
    /// Opens the executor on a database, counting its keys.
    pub fn new(db: Arc<Db>, cfg: Config, shared: Arc<crate::net::Shared>) -> Result<State, OpenError> {
        let store = Store::new(db)?;
        let n = cfg.databases;
        let mut st = State {
            store,
            cfg,
            clients: FxHashMap::default(),
            keys: vec![0; n],
            expires: vec![0; n],
            pending_counts: vec![(0, 0); n],
            gens: vec![0; n],
            pending_gens: vec![None; n],
            db_map: (0..MAX_DATABASES).map(|d| d as u8).collect(),
            pending_db_map: None,
            sweeping: vec![false; n],
            // Work left by an earlier run is found in the first idle moment.
            reclaim_left: true,
            expire_left: true,
            watchers: HashMap::new(),
            stats: Stats::new(),
            cursors: crate::cursor::Cursors::default(),
            shutdown: false,
            bgsave: crate::bgsave::Bgsave::new(),
            syncs: crate::rdb_sync::Syncs::default(),
            active_expire: true,
            cron_paused: false,
            skip_checksum: false,
            scripts_allow_denied: false,
            frozen_now: None,
            torn: false,
            scripts: None,
            functions_changed: false,
            tracking: Default::default(),
            script_keys: None,
            notify_flags: 0,
            encoding_only: false,
            slowlog: Default::default(),
            slowlog_mark: 0,
            notes: Vec::new(),
            monitors: Vec::new(),
            shared,
            inert: crate::cmd::INERT.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            run_id: random_hex40(),
            replid: random_hex40(),
            config_file: String::new(),
            last_commit: now_ms() / 1000,
            pubsub: Default::default(),
            blocking: Default::default(),
            outbox: Vec::new(),
            resume: VecDeque::new(),
            saved: FxHashMap::default(),
            acl: crate::acl::Acl::new(""),
            wall: crate::clock::WallClock::new(),
            acl_before: None,
            latency: Default::default(),
            output_limits: Default::default(),
            lazyfree_pending: 0,
            last_call: Duration::ZERO,
            access: Default::default(),
            maxmemory: Default::default(),
            oom_at_start: false,
            script_allow_oom: false,
            pause: None,
            pause_seq: 0,
            pause_before: None,
            script_run: None,
            inbox: None,
            after_busy: VecDeque::new(),
            group: Vec::new(),
            group_at: 0,
            first_of_client: false,
            rerunning: false,
            serving_busy: false,
            script_stopped_by_shutdown: false,
            runtime: None,
        };
        st.maxmemory.limit = st.cfg.maxmemory;
        // Config::validate has checked the name.
        st.set_maxmemory_policy(
            crate::maxmemory::Policy::parse(&st.cfg.maxmemory_policy).unwrap_or(crate::maxmemory::Policy::NoEviction),
        );
        st.acl = crate::acl::Acl::from_config(&st.cfg).map_err(OpenError::Acl)?;
        st.shared.set_default_auth_required(!st.acl.default_authenticates());
        st.check_layout()?;
        st.load_db_map()?;
        st.load_gens()?;
        st.count_keys()?;
        st.lazyfree_pending = st.store.scan_prefix(&[encoding::GARBAGE], false).count() as u64;
        Ok(st)
    }

    /// Refuses a pool whose keys are in a layout this build does not read;
    /// records the layout in a pool without keys.
    fn check_layout(&mut self) -> Result<(), OpenError> {
        let recorded = self.store.get(&encoding::layout_key())?;
        match recorded.as_deref().map(|b| <[u8; 4]>::try_from(b).map(u32::from_be_bytes)) {
            Some(Ok(encoding::LAYOUT)) => Ok(()),
            // Layout 3 only adds chunked strings: nothing of 2 reads differently.
            Some(Ok(2)) => {
                self.store
                    .put(encoding::layout_key(), encoding::LAYOUT.to_be_bytes().to_vec())
                    .map_err(|e| OpenError::Layout(format!("recording the key layout: {e}")))?;
                Ok(self.store.commit()?)
            }
            Some(other) => Err(OpenError::Layout(format!(
                "this pool holds server data in key layout {} but this tembo reads layout {}; \
                 serve it with the tembo that wrote it, or start with a new pool (--pool)",
                other.map_or_else(|_| "unknown".into(), |v| v.to_string()),
                encoding::LAYOUT
            ))),
            None => {
                if self.store.scan_prefix(&[encoding::META], false).next().is_some() {
                    return Err(OpenError::Layout(
                        "this pool holds server data in key layout 1 (written before flush generations) \
                         but this tembo reads layouts 2 and 3; serve it with the tembo that wrote it, or \
                         start with a new pool (--pool)"
                            .into(),
                    ));
                }
                self.store
                    .put(encoding::layout_key(), encoding::LAYOUT.to_be_bytes().to_vec())
                    .map_err(|e| OpenError::Layout(format!("recording the key layout: {e}")))?;
                Ok(self.store.commit()?)
            }
        }
    }

    /// Reads the logical-to-physical database map SWAPDB keeps.
    fn load_db_map(&mut self) -> Result<(), OpenError> {
        if let Some(map) = self.store.get(&encoding::db_map_key())? {
            let mut seen = [false; MAX_DATABASES];
            let valid =
                map.len() == MAX_DATABASES && map.iter().all(|&p| !std::mem::replace(&mut seen[p as usize], true));
            if !valid {
                return Err(OpenError::Layout(
                    "the pool's database map (SWAPDB) is damaged: it does not name each database once".into(),
                ));
            }
            let n = self.cfg.databases;
            if let Some((l, p)) = map.iter().enumerate().take(n).find(|(_, &p)| p as usize >= n) {
                return Err(OpenError::Layout(format!(
                    "SWAPDB left database {l}'s keys in database {p}, past `databases` {n}: \
                     start with `databases` {} or more",
                    p + 1
                )));
            }
            self.db_map = map;
        }
        Ok(())
    }

    /// The physical database (where keys are stored) of logical database `db`.
    #[inline]
    pub fn phys(&self, db: u8) -> u8 {
        self.pending_db_map.as_deref().unwrap_or(&self.db_map)[db as usize]
    }

    /// The logical database (what clients select) stored as physical `db`.
    pub fn logical(&self, db: u8) -> u8 {
        let map = self.pending_db_map.as_deref().unwrap_or(&self.db_map);
        map.iter().position(|&p| p == db).map_or(db, |l| l as u8)
    }

    /// SWAPDB: logical databases `a` and `b` exchange their keys (staged
    /// with the pending writes, durable with their commit).
    pub fn swap_dbs(&mut self, a: u8, b: u8) -> Result<(), crate::store::StoreError> {
        let mut map = self.pending_db_map.clone().unwrap_or_else(|| self.db_map.clone());
        map.swap(a as usize, b as usize);
        self.store.put(encoding::db_map_key(), map.clone())?;
        self.pending_db_map = Some(map);
        Ok(())
    }

    /// Reads each database's flush generation; a database with one may
    /// still have keys of older generations for the sweep.
    fn load_gens(&mut self) -> Result<(), OpenError> {
        for db in 0..self.gens.len() {
            if let Some(raw) = self.store.get(&encoding::flush_gen_key(db as u8))? {
                let gen = <[u8; 2]>::try_from(raw.as_slice())
                    .map(u16::from_be_bytes)
                    .map_err(|_| OpenError::Layout(format!("the flush generation of db {db} is not 2 bytes")))?;
                self.gens[db] = gen;
                self.sweeping[db] = gen > 0;
            }
        }
        Ok(())
    }

    /// The flush generation `db`'s keys live in now (pending FLUSHDB included).
    pub fn gen(&self, db: u8) -> u16 {
        let i = db as usize;
        self.pending_gens.get(i).copied().flatten().unwrap_or_else(|| self.gens.get(i).copied().unwrap_or(0))
    }

    fn count_keys(&mut self) -> Result<(), DbError> {
        let mut it = self.store.scan_prefix(&[encoding::META], false);
        let mut counts = vec![(0i64, 0i64); MAX_DATABASES];
        for kv in &mut it {
            let (k, v) = kv?;
            let db = k.get(1).copied().unwrap_or(0) as usize;
            // Keys of an older generation are flushed, waiting for the sweep.
            let gen = k.get(2..4).and_then(|g| <[u8; 2]>::try_from(g).ok()).map(u16::from_be_bytes);
            // Nor is a record too short to name a key (damage that key
            // walks pass over).
            if gen != Some(self.gens.get(db).copied().unwrap_or(0)) || encoding::meta_user_key(&k).is_none() {
                continue;
            }
            counts[db].0 += 1;
            if Meta::decode(&v).is_some_and(|m| m.expire_at != 0) {
                counts[db].1 += 1;
            }
        }
        drop(it);
        for (i, (k, e)) in counts.into_iter().enumerate().take(self.keys.len()) {
            self.keys[i] = k;
            self.expires[i] = e;
        }
        Ok(())
    }

    /// Runs the executor until shutdown; returns the database to close.
    ///
    /// The executor is not a task of the runtime but the thread that drives
    /// it: it waits for requests, and hands replies over, inside
    /// `rt.block_on` (where the connection tasks run, on this same thread),
    /// and runs each group outside it. So while a group runs nothing else
    /// does, as in Redis — except while a script is busy, when a helper
    /// thread drives the runtime and the sockets are served (`crate::busy`).
    pub fn run(mut self, rt: &Arc<tokio::runtime::Runtime>, mut inbox: UnboundedReceiver<Msg>) -> Arc<Db> {
        self.runtime = Some(rt.clone());
        let mut next_cron = Instant::now() + CRON_EVERY;
        let mut last_group = Instant::now();
        let mut expire_spent = Duration::ZERO;
        let mut reclaim_spent = Duration::ZERO;
        loop {
            // Wake for the cron, or for the first blocked client's timeout.
            let mut wake = self.blocking.next_deadline().map_or(next_cron, |d| d.min(next_cron));
            if let Some(p) = self.pause {
                wake = wake.min(p.until);
            }
            // Expiring and reclaiming go a small step at a time between
            // groups: within their budgets for the cron's window while there
            // is traffic (so no request waits behind more than one step), and
            // without limit once the executor has been idle for IDLE_AFTER.
            let idle_at =
                ((self.expire_left && !self.cron_paused) || self.reclaim_left).then_some(last_group + IDLE_AFTER);
            let idle = idle_at.is_some_and(|t| t <= Instant::now());
            let expire_now = self.expire_left && !self.cron_paused && (idle || expire_spent < EXPIRE_BUDGET);
            let reclaim_now = self.reclaim_left && (idle || reclaim_spent < RECLAIM_BUDGET);
            // Evicting over maxmemory goes on a step (at most the time the
            // tenacity allows) between groups until the pool fits.
            let evict_now = self.maxmemory.left;
            let first = if expire_now || reclaim_now || evict_now {
                // Let the connections write their replies and read first.
                rt.block_on(async {
                    self.flush_outbox();
                    tokio::task::yield_now().await
                });
                let first = match inbox.try_recv() {
                    Ok(m) => Some(m),
                    Err(tokio::sync::mpsc::error::TryRecvError::Empty) => None,
                    Err(tokio::sync::mpsc::error::TryRecvError::Disconnected) => break,
                };
                if evict_now {
                    self.evict_step();
                } else if first.is_none() || !idle {
                    let began = Instant::now();
                    let spent = if expire_now {
                        self.expire_due(EXPIRE_STEP);
                        &mut expire_spent
                    } else {
                        self.reclaim(began, RECLAIM_STEP_SMALL);
                        &mut reclaim_spent
                    };
                    if !idle {
                        *spent += began.elapsed();
                    }
                }
                first
            } else {
                let wake = idle_at.map_or(wake, |t| t.min(wake));
                let got = rt.block_on(async {
                    self.flush_outbox();
                    tokio::select! {
                        m = inbox.recv() => Some(m),
                        _ = tokio::time::sleep_until(tokio::time::Instant::from_std(wake)) => None,
                    }
                });
                match got {
                    Some(Some(m)) => Some(m),
                    Some(None) => break,
                    None => None,
                }
            };
            if let Some(first) = first {
                // Let every connection whose input is ready parse it and queue
                // its requests first: they join this commit group. With one
                // client there is no one else to wait for (its connection
                // parsed all it had before it sent), and the yield's poll of
                // the sockets is a system call per request.
                if self.clients.len() > 1 {
                    rt.block_on(tokio::task::yield_now());
                }
                let mut group = vec![first];
                while group.len() < MAX_GROUP {
                    match inbox.try_recv() {
                        Ok(m) => group.push(m),
                        Err(_) => break,
                    }
                }
                inbox = self.run_group_with(group, inbox);
                last_group = Instant::now();
            } else if self.blocking.next_deadline().is_some_and(|d| d <= Instant::now())
                || self.pause.is_some_and(|p| p.until <= Instant::now())
            {
                inbox = self.run_group_with(Vec::new(), inbox);
            }
            if Instant::now() >= next_cron {
                if !self.cron_paused {
                    if self.expire_left {
                        // The window's budget ended with keys still due.
                        self.stats.expire_cap_reached += 1;
                    }
                    self.cron_tasks();
                    if self.maxmemory.limit != 0 {
                        // Over the limit with no command to make room first.
                        self.evict_step();
                    }
                    // A new window: fresh budgets, and a look for work that no
                    // commit announced (keys whose time has come since, a
                    // collection dropped by a failed group's rerun).
                    expire_spent = Duration::ZERO;
                    reclaim_spent = Duration::ZERO;
                    self.expire_left = true;
                    self.reclaim_left = true;
                }
                next_cron = Instant::now() + CRON_EVERY;
            }
            if self.shutdown {
                break;
            }
        }
        rt.block_on(async { self.flush_outbox() });
        if std::mem::take(&mut self.torn) {
            // A busy script stopped by SHUTDOWN NOSAVE: none of its writes.
            self.discard();
        } else if let Err(e) = self.commit() {
            log::error!("final commit failed: {e}");
        }
        // The backup and transfer threads hold the database: they must let
        // go before the close.
        self.bgsave.cancel_and_wait();
        self.syncs.cancel_and_wait();
        for c in self.clients.values() {
            let _ = c.out.send(Out::closing());
        }
        self.store.db().clone()
    }

    /// Runs a group with the inbox at hand for a busy script to take from
    /// (`crate::busy::serve`); gives the inbox back.
    fn run_group_with(&mut self, group: Vec<Msg>, inbox: UnboundedReceiver<Msg>) -> UnboundedReceiver<Msg> {
        self.inbox = Some(inbox);
        self.run_group(group);
        self.inbox.take().expect("the inbox stays in place while a group runs")
    }

    /// A client connected.
    pub fn connect(&mut self, mut c: Client) {
        self.stats.connections += 1;
        c.authed = self.acl.default_authenticates();
        c.conn.auth_required.store(!c.authed, std::sync::atomic::Ordering::Relaxed);
        self.clients.insert(c.id, c);
    }

    /// Whether client `id` ran something in the current group (its state
    /// and replies then go with the group's commit).
    pub fn in_group(&self, id: u64) -> bool {
        self.saved.contains_key(&id)
    }

    /// Runs client `id`'s requests while a script is busy and sends their
    /// replies at once: the client ran nothing else in this group, and
    /// what it may run now (`allow-busy` commands, BUSY errors) reads and
    /// writes no data, so nothing waits for the group's commit and a
    /// failed commit has nothing of it to undo.
    pub fn serve_now(&mut self, id: u64, reqs: &[Vec<Vec<u8>>], bytes: usize) {
        if let Some(c) = self.clients.get_mut(&id) {
            c.qbuf = bytes;
        }
        let mark = self.outbox.len();
        self.serving_busy = true;
        self.process(id, reqs, Vec::new(), false);
        self.serving_busy = false;
        self.saved.remove(&id);
        let mut i = mark;
        while i < self.outbox.len() {
            if self.outbox[i].0 == id {
                let (_, out) = self.outbox.remove(i);
                self.send_out(id, out, Instant::now());
            } else {
                i += 1;
            }
        }
    }

    /// A script became busy before it wrote anything: commits what the
    /// group ran before it and sends those replies, so that their clients
    /// are not held for as long as the script runs. Only where nothing of
    /// it could run twice: the script's command is its client's first in
    /// the group (the caller's check) and not inside a transaction, and no
    /// client waits to be resumed. Otherwise (or if the commit fails) the group's end commits
    /// as usual.
    pub fn commit_before_busy(&mut self, script_client: u64) {
        // Not in a rerun or among resumed clients (no group prefix to
        // commit), nor with client tracking in use (the script's client is
        // out of the client table and would miss its invalidations).
        if self.torn
            || self.rerunning
            || self.group_at >= self.group.len()
            || self.store.nested_now()
            || !self.resume.is_empty()
            || !self.tracking.is_idle()
        {
            return;
        }
        if let Err(e) = self.commit() {
            log::debug!("busy script: the group before it stays pending ({e})");
            return;
        }
        for m in &mut self.group[..self.group_at] {
            if let Msg::Requests { id, .. } = m {
                if *id != script_client {
                    self.saved.remove(id);
                    *m = Msg::Served;
                }
            }
        }
        // What a failed commit would put back is the state from here on.
        self.acl_before = None;
        self.pause_before = self.pause;
        self.count_from_here();
        self.flush_outbox();
    }

    /// Runs the group's messages from `group_at` on; stops at a shutdown
    /// (what is left is never run, and never answered).
    fn run_rest_of_group(&mut self, requests: &mut usize, prefetched: &mut usize) {
        // A torn first run is dropped and rerun: running on would only
        // do work the rerun does again (and a busy script in it would
        // answer other clients, for nothing).
        while self.group_at < self.group.len() && !self.shutdown && !self.torn {
            let i = self.group_at;
            if i >= *prefetched {
                *prefetched = self.prefetch_ahead(&self.group, i);
            }
            let msg = std::mem::replace(&mut self.group[i], Msg::Served);
            match &msg {
                Msg::Connect(c) => self.connect((**c).clone()),
                Msg::Disconnect(id) => self.disconnect(*id),
                Msg::Shutdown => self.shutdown = true,
                Msg::Requests { id, reqs, bytes } => {
                    *requests += 1;
                    if let Some(c) = self.clients.get_mut(id) {
                        c.qbuf = *bytes;
                    }
                    self.process(*id, reqs, Vec::new(), false);
                }
                Msg::Served => {}
            }
            self.group[i] = msg;
            // What arrived while a script was busy and could not run then
            // runs now, as part of this group (and of its rerun).
            self.group.extend(self.after_busy.drain(..));
            self.group_at += 1;
        }
    }

    fn run_group(&mut self, group: Vec<Msg>) {
        // Filled as clients are first changed (`process`, `unblock`, `serve_ready`).
        self.saved.clear();
        self.cursors.mark();
        self.acl_before = None;
        self.pause_before = self.pause;
        self.count_from_here();
        self.expire_blocked();
        // Ends a pause whose time has passed: its clients run in this group.
        self.pause_now();
        let mut requests = 0;
        let mut prefetched = 0;
        // In the state, so that a busy script can answer the clients whose
        // requests wait behind it (`crate::busy::serve`).
        self.group = group;
        self.group_at = 0;
        loop {
            self.run_rest_of_group(&mut requests, &mut prefetched);
            if !self.shutdown && !self.torn {
                self.drain_resume(false);
            }
            // A script that went busy while resumed clients ran may have left
            // requests for after it: they join the group too.
            if self.after_busy.is_empty() || self.shutdown {
                break;
            }
            self.group.extend(self.after_busy.drain(..));
        }
        let group = std::mem::take(&mut self.group);
        // Messages from here on were not run (a torn first run stops).
        let reached = self.group_at;
        self.group_at = 0;
        let torn = std::mem::take(&mut self.torn);
        let committed =
            if torn { Err("a command stopped midway".to_string()) } else { self.commit().map_err(|e| e.to_string()) };
        if let Err(e) = committed {
            if torn {
                // Said already where it stopped (a panic, a script's time
                // limit), or a client's error (a key over the limits).
                log::debug!("group of {requests} requests not committed ({e}); running them one command per commit");
            } else {
                log::warn!("group commit of {requests} requests failed ({e}); running them one command per commit");
            }
            self.rollback();
            self.expire_blocked();
            // The rollback put back a pause that may have ended: its held
            // clients are released again, to run one command per commit.
            self.pause_now();
            // A script busy in the rerun answers no one meanwhile (the
            // clients later in the rerun have yet to get their replies).
            self.rerunning = true;
            // SHUTDOWN NOSAVE stopped a busy script: nothing more is run.
            // Any other SHUTDOWN, or a signal, in the group stops the rerun
            // where it stopped the first run.
            if !std::mem::take(&mut self.script_stopped_by_shutdown) {
                self.shutdown = false;
            }
            let mut rerun: VecDeque<Msg> = group.into();
            let mut at = 0;
            loop {
                while let Some(msg) = rerun.pop_front().filter(|_| !self.shutdown) {
                    match &msg {
                        Msg::Requests { id, reqs, .. } => self.process(*id, reqs, Vec::new(), true),
                        Msg::Shutdown => self.shutdown = true,
                        // Connections the first run opened or closed stay so;
                        // those it did not reach open and close now.
                        Msg::Connect(c) if at >= reached => self.connect((**c).clone()),
                        Msg::Disconnect(id) if at >= reached => self.disconnect(*id),
                        Msg::Connect(_) | Msg::Disconnect(_) | Msg::Served => {}
                    }
                    at += 1;
                    rerun.extend(self.after_busy.drain(..));
                }
                if !self.shutdown {
                    self.drain_resume(true);
                }
                if self.after_busy.is_empty() || self.shutdown {
                    break;
                }
                rerun.extend(self.after_busy.drain(..));
            }
            self.rerunning = false;
            // Left only by a shutdown: never run, never answered.
            self.after_busy.clear();
        } else {
            self.stats.end_group();
        }
        // The outbox goes out when the executor next waits, from inside the
        // runtime (`run`): waking a connection task from outside it would
        // cost a system call each.
        // ACL and CONFIG changes decide whether the next clients must log in.
        self.shared.set_default_auth_required(!self.acl.default_authenticates());
    }

    /// What the statistics and the slow log take in from here on is what
    /// a rollback of the group takes away (`rollback`).
    fn count_from_here(&mut self) {
        self.stats.begin_group();
        self.slowlog_mark = self.slowlog.mark();
    }

    /// Undoes what the current group did to the clients and the executor's
    /// state, after its commit failed.
    fn rollback(&mut self) {
        self.discard();
        // The rerun counts and logs the group's commands (this run's are taken away).
        self.stats.roll_back_group();
        self.slowlog.forget_from(self.slowlog_mark);
        self.cursors.restore();
        if let Some(acl) = self.acl_before.take() {
            self.acl = acl;
        }
        self.pause = self.pause_before;
        self.tracking.discard_pending();
        for (id, c) in std::mem::take(&mut self.saved) {
            if let Some(slot) = self.clients.get_mut(&id) {
                *slot = c;
            }
        }
        self.outbox.clear();
        self.resume.clear();
        // A SYNC of the group runs again, or not, with the rerun.
        self.syncs.requests.clear();
        for c in self.clients.values_mut() {
            c.pushbuf.clear();
            c.monitor_echo.clear();
            c.block_req = None;
            c.postpone_now = false;
            c.conn.blocked.store(c.blocked.is_some() || c.postponed.is_some(), std::sync::atomic::Ordering::Relaxed);
        }
        self.pubsub.rebuild(self.clients.values());
        self.blocking.rebuild(self.clients.iter().filter_map(|(id, c)| c.blocked.as_deref().map(|b| (*id, b))));
    }

    /// Sends what the group produced, in order, now that it is committed;
    /// disconnects subscribers past the pub/sub output-buffer limits.
    fn flush_outbox(&mut self) {
        crate::tracking::before_send(self);
        let now = Instant::now();
        for (id, out) in std::mem::take(&mut self.outbox) {
            self.send_out(id, out, now);
        }
        // After the replies that came before each SYNC, on the same channel.
        for req in std::mem::take(&mut self.syncs.requests) {
            let Some(c) = self.clients.get_mut(&req.client) else { continue };
            c.streaming = true;
            if self.shutdown {
                // It would be stopped at once: the client sees the close.
                let _ = c.out.send(Out::closing());
                continue;
            }
            let (out, conn) = (c.out.clone(), c.conn.clone());
            self.syncs.start(req, self.store.db().clone(), self.cfg.databases, out, conn);
        }
    }

    /// Hands `out` to client `id`'s connection; disconnects a subscriber
    /// past the pub/sub output-buffer limits.
    ///
    /// Output that would take a client past its class's output-buffer
    /// limit (`client-output-buffer-limit`: `pubsub` for a subscriber,
    /// `normal` for the rest) is not sent: the client is closed, as Redis
    /// closes it before writing what went over.
    fn send_out(&mut self, id: u64, out: Out, now: Instant) {
        let Some(c) = self.clients.get_mut(&id).filter(|c| !c.streaming) else { return };
        let len = out.len();
        let pending = c.conn.pending.load(std::sync::atomic::Ordering::Relaxed) + len;
        let (class, limit) = output_class(c, &self.output_limits);
        if crate::pubsub::over_limit(c, pending, now, limit) {
            self.close_over_limit(id, class, pending);
            return;
        }
        c.conn.pending.fetch_add(len, std::sync::atomic::Ordering::Relaxed);
        let _ = c.out.send(out);
    }

    /// Closes client `id` for output it leaves unread past its limit.
    fn close_over_limit(&mut self, id: u64, class: &str, pending: usize) {
        let Some(c) = self.clients.get(&id) else { return };
        log::warn!(
            "Client id={} addr={} closed for overcoming of output buffer limits ({class}: {pending} bytes not read)",
            c.id,
            c.addr
        );
        c.conn.kill.notify_one();
        self.disconnect(id);
    }

    /// Closes the clients whose unread output has stayed over their soft
    /// limit for its time, though nothing more was sent to them (Redis's
    /// clients cron checks the same).
    fn enforce_soft_output_limits(&mut self) {
        let now = Instant::now();
        let mut over = Vec::new();
        for c in self.clients.values_mut().filter(|c| c.soft_limit_since.is_some() && !c.streaming) {
            let pending = c.conn.pending.load(std::sync::atomic::Ordering::Relaxed);
            let (class, limit) = output_class(c, &self.output_limits);
            if crate::pubsub::over_limit(c, pending, now, limit) {
                over.push((c.id, class, pending));
            }
        }
        for (id, class, pending) in over {
            self.close_over_limit(id, class, pending);
        }
    }

    /// Runs the pipelined requests of the clients served out of a blocking command.
    fn drain_resume(&mut self, commit_each: bool) {
        while let Some((id, out, rest)) = self.resume.pop_front() {
            self.process(id, &rest, out, commit_each);
        }
    }

    /// Answers the blocked clients whose timeout has passed.
    fn expire_blocked(&mut self) {
        if self.blocking.is_empty() {
            return;
        }
        for id in self.blocking.expired(Instant::now()) {
            self.unblock(id, Reply::NilArray);
        }
    }

    /// Ends client `id`'s wait with `reply` (a timeout, CLIENT UNBLOCK);
    /// false if it is not blocked.
    pub fn unblock(&mut self, id: u64, reply: Reply) -> bool {
        let Some(c) = self.clients.get_mut(&id) else { return false };
        let Some(b) = c.blocked.take() else { return false };
        release_block(&mut self.saved, &mut self.blocking, id, c, &b);
        let mut out = Vec::new();
        reply.encode(c.proto, &mut out);
        self.resume.push_back((id, out, b.rest));
        if let Reply::Error(msg) = &reply {
            let cmd = c.last_cmd;
            self.count_blocked_error(cmd, msg);
        }
        true
    }

    /// An error that ends a wait (a destroyed group, a deleted stream,
    /// CLIENT UNBLOCK … ERROR) is the blocked command's failed call.
    fn count_blocked_error(&mut self, cmd: &'static str, msg: &str) {
        self.stats.count_failed(cmd);
        self.stats.error_reply(msg);
    }

    /// Serves the clients blocked on the keys the last command made ready:
    /// per key, first blocked first served, while the key has elements.
    fn serve_ready(&mut self, commit_each: bool) {
        while let Some((db, key)) = self.blocking.take_ready() {
            for id in self.blocking.waiting(db, &key) {
                let Some(mut c) = self.clients.remove(&id) else { continue };
                let Some(b) = c.blocked.take() else {
                    self.clients.insert(id, c);
                    continue;
                };
                // Served outside `cmd::run`, so guarded as it guards a
                // command: a move refused by the engine's limits (BLMOVE to
                // a key too long) must not leave the pop without the push.
                let sp = self.store.begin_command();
                let served = cmd::blpop::serve(self, &mut c, &key, &b.op);
                // Or damage met after staging (see `cmd::run`).
                let damaged =
                    matches!(&served, Some(Reply::Error(e)) if cmd::is_damage_text(e)) && self.store.staged_since(&sp);
                let refused = self.store.refused() || damaged;
                self.store.end_command(sp);
                if refused {
                    self.torn = true;
                }
                let Some(mut reply) = served else {
                    // Nothing (more) to pop, or the key is not of the type
                    // this client waits for: it waits on; the next may be
                    // served (a BZPOPMIN after a BLPOP on a key now a zset).
                    c.blocked = Some(b);
                    self.clients.insert(id, c);
                    continue;
                };
                release_block(&mut self.saved, &mut self.blocking, id, &c, &b);
                if commit_each {
                    if std::mem::take(&mut self.torn) {
                        // The reply is the refusal; nothing of the move is applied.
                        self.discard();
                    } else if let Err(failed) = self.commit_or_discard() {
                        reply = failed;
                    }
                }
                if let Reply::Error(msg) = &reply {
                    self.count_blocked_error(c.last_cmd, msg);
                }
                let mut out = Vec::new();
                reply.encode(c.proto, &mut out);
                self.clients.insert(id, c);
                self.resume.push_back((id, out, b.rest));
            }
        }
    }

    /// Lets client `id`, held by CLIENT PAUSE, run its requests again
    /// (after the current command).
    pub fn release_postponed(&mut self, id: u64) {
        let Some(c) = self.clients.get_mut(&id) else { return };
        let Some(before) = c.postponed.as_ref().map(|_| c.clone()) else { return };
        self.saved.entry(id).or_insert(before);
        let (_, rest) = c.postponed.take().expect("checked above");
        c.conn.blocked.store(c.blocked.is_some(), std::sync::atomic::Ordering::Relaxed);
        self.resume.push_back((id, Vec::new(), rest));
    }

    /// Keeps the ACL state as it was before the current group changed it
    /// (users, the log), to put back if the group's commit fails.
    pub fn snapshot_acl(&mut self) {
        if self.acl_before.is_none() {
            self.acl_before = Some(self.acl.clone());
        }
    }

    /// Forgets a client: its watches, subscriptions, tracking and wait.
    pub fn disconnect(&mut self, id: u64) {
        if let Some(mut c) = self.clients.remove(&id) {
            self.unwatch(&mut c);
            self.pubsub.remove_client(&c);
            self.tracking.forget_prefixes(&c.tracking, id);
            if let Some(b) = c.blocked.take() {
                self.blocking.remove(id, &b);
            }
        }
        self.monitors.retain(|&m| m != id);
    }

    /// Removes `c` from every watcher list.
    pub fn unwatch(&mut self, c: &mut Client) {
        for key in c.watching.drain(..) {
            if let Some(list) = self.watchers.get_mut(&key) {
                list.retain(|&w| w != c.id);
                if list.is_empty() {
                    self.watchers.remove(&key);
                }
            }
        }
        c.watch_stale.clear();
        c.watch_dirty = false;
    }

    /// Runs one client's requests after `out` (replies already encoded) and
    /// queues the replies in the outbox; if a request blocks, the client
    /// waits with the rest of them.
    fn process(&mut self, id: u64, reqs: &[Vec<Vec<u8>>], mut out: Vec<u8>, commit_each: bool) {
        let Some(mut client) = self.clients.remove(&id) else { return };
        if client.syncing {
            // The connection carries an RDB now: nothing else is answered.
            self.clients.insert(id, client);
            return;
        }
        let fresh = out.is_empty() && !self.saved.contains_key(&id);
        // Also covers a client that connected within this group.
        self.saved.entry(id).or_insert_with(|| client.clone());
        if let Some(b) = client.blocked.as_mut() {
            // A blocked client's connection sends nothing until it is
            // served; should requests come anyway, they wait their turn.
            b.rest.extend(reqs.iter().cloned());
            self.clients.insert(id, client);
            return;
        }
        if let Some((_, rest)) = client.postponed.as_mut() {
            rest.extend(reqs.iter().cloned());
            self.clients.insert(id, client);
            return;
        }
        client.last_active = Instant::now();
        // Big values of the replies, handed to the connection uncopied.
        let mut spliced = Vec::new();
        for (i, args) in reqs.iter().enumerate() {
            if args.is_empty() {
                continue;
            }
            // (Only for a logged-in client: another would make every group
            // it lands in run twice, for an error.)
            if !commit_each && !self.serving_busy && client.authed && cmd::runs_alone(&client, args) {
                // It must run in a commit of its own: this run of the
                // group is dropped and the group rerun one command per
                // commit, this client's earlier requests included.
                self.torn = true;
                break;
            }
            client.reply_skip = std::mem::take(&mut client.reply_skip_next);
            client.argv_mem = args.iter().map(Vec::len).sum();
            self.first_of_client = fresh && i == 0;
            let mut reply = cmd::dispatch(self, &mut client, args);
            client.argv_mem = 0;
            if std::mem::take(&mut client.postpone_now) {
                // CLIENT PAUSE holds this command and what came after it.
                client.reply_skip_next = client.reply_skip;
                self.postpone(&mut client, reqs[i..].to_vec());
                crate::resp::unsplice(&mut out, spliced);
                out.append(&mut client.pushbuf);
                self.outbox.push((id, Out::Push(out)));
                self.clients.insert(id, client);
                return;
            }
            if self.shutdown {
                // SHUTDOWN answers by closing the connection, as Redis does.
                client.close = true;
                break;
            }
            if let Some(req) = client.block_req.take() {
                let b = self.blocking.block(id, client.db, req, reqs[i + 1..].to_vec(), Instant::now());
                client.blocked = Some(Box::new(b));
                client.conn.blocked.store(true, std::sync::atomic::Ordering::Relaxed);
                crate::resp::unsplice(&mut out, spliced);
                out.append(&mut client.pushbuf);
                // The replies before the blocking command go now (after the
                // commit); even none wakes the connection, which then reads
                // on to notice a disconnect.
                self.outbox.push((id, Out::Push(out)));
                self.clients.insert(id, client);
                return;
            }
            if commit_each {
                if std::mem::take(&mut self.torn) {
                    // The command's error reply says it was not applied.
                    self.discard();
                } else if let Err(failed) = self.commit_or_discard() {
                    reply = failed;
                }
            }
            out.append(&mut client.pushbuf);
            if !(client.reply_off || client.reply_skip) || matches!(reply, Reply::Many(_) | Reply::Push(_)) {
                // Pub/sub confirmations are pushes: CLIENT REPLY leaves them be.
                reply.encode_spliced(client.proto, &mut out, &mut spliced);
            }
            if client.close {
                // Redis adds nothing to the replies of a closing client.
                client.monitor_echo.clear();
            }
            out.append(&mut client.monitor_echo);
            if client.close || client.syncing || self.shutdown {
                break;
            }
            if self.blocking.has_ready() && !self.serving_busy {
                // Serve the clients this command unblocked before anything else runs.
                // (Not while a busy script runs: what it pushed is its own
                // until it ends.)
                self.clients.insert(id, client);
                self.serve_ready(commit_each);
                match self.clients.remove(&id) {
                    Some(c) => client = c,
                    None => return,
                }
            }
        }
        let close = client.close;
        // The read is done with: its bytes left the query buffer.
        client.qbuf = 0;
        // Read before the connection parses more (the replies go after this).
        client.conn.auth_required.store(!client.authed, std::sync::atomic::Ordering::Relaxed);
        self.clients.insert(id, client);
        self.outbox.push((id, Out::Replies { bytes: out, spliced, close }));
    }

    /// Commits the pending writes and the key counts that go with them.
    pub fn commit(&mut self) -> Result<(), DbError> {
        if !self.store.is_dirty() {
            return Ok(());
        }
        let n = self.store.pending();
        let (dropped, freed) = self.store.pending_delta(&[encoding::GARBAGE])?;
        self.store.commit()?;
        self.lazyfree_pending = (self.lazyfree_pending + dropped).saturating_sub(freed);
        self.stats.lazyfreed += freed;
        // Reclaiming starts in the executor's next idle moment.
        self.reclaim_left |= dropped > 0;
        for (i, (dk, de)) in self.pending_counts.iter_mut().enumerate() {
            self.keys[i] += *dk;
            self.expires[i] += *de;
            *dk = 0;
            *de = 0;
        }
        for (i, g) in self.pending_gens.iter_mut().enumerate() {
            if let Some(g) = g.take() {
                self.gens[i] = g;
                self.sweeping[i] = true;
                self.reclaim_left = true;
            }
        }
        if let Some(map) = self.pending_db_map.take() {
            self.db_map = map;
        }
        if std::mem::take(&mut self.maxmemory.wake_gc) {
            // Evictions make room only once the GC has freed what they deleted.
            self.store.db().wake_gc();
        }
        self.stats.commits += 1;
        self.stats.committed_writes += n as u64;
        self.functions_changed = false;
        self.last_commit = now_ms() / 1000;
        Ok(())
    }

    /// Forgets the pending writes and the count changes that go with them.
    pub fn discard(&mut self) {
        self.store.discard();
        self.pending_counts.iter_mut().for_each(|c| *c = (0, 0));
        self.pending_gens.iter_mut().for_each(|g| *g = None);
        self.pending_db_map = None;
        if std::mem::take(&mut self.functions_changed) {
            crate::cmd::functions::reload_after_discard(self);
        }
    }

    /// Sets `maxmemory-policy` (LFU policies count keys' uses).
    pub fn set_maxmemory_policy(&mut self, policy: crate::maxmemory::Policy) {
        if policy != self.maxmemory.policy {
            self.maxmemory.reset();
        }
        self.maxmemory.policy = policy;
        self.access.lfu_on = policy.lfu();
    }

    /// Stages the deletion of `key` of physical database `db` (metadata
    /// `old`): its metadata, its expiry-index entry and its counts; a
    /// collection's elements are left to the background reclaimer (O(1)
    /// whatever its size). Watchers, events and blocked clients are the
    /// caller's.
    pub fn drop_key(&mut self, db: u8, key: &[u8], old: &Meta) {
        self.store.delete(encoding::meta_key(db, self.gen(db), key));
        if old.expire_at != 0 {
            self.store.delete(encoding::expire_key(old.expire_at, db, key));
            self.pending_counts[db as usize].1 -= 1;
        }
        self.pending_counts[db as usize].0 -= 1;
        if old.kind == encoding::Kind::ZSet {
            self.store.forget_ranks(&encoding::sub_prefix(encoding::ZIDX, db, key, old.version));
        }
        if old.version != 0 {
            // Cannot fail: the record is no longer than the collection's element keys.
            let _ = self.store.put(encoding::sub_prefix(encoding::GARBAGE, db, key, old.version), Vec::new());
        }
    }

    /// Drops `key` of `db` whose metadata record (`head`: its first bytes)
    /// does not decode: the record goes, and so do its expiry entry and
    /// its elements where the words that would say where they are still
    /// read as such ([`salvaged_version`](Self::salvaged_version)). Key
    /// counts as [`count_keys`](Self::count_keys) made them: every record
    /// is a key, a record that does not decode has no expiry.
    pub fn drop_damaged(&mut self, db: u8, key: &[u8], head: &[u8]) -> Result<(), DbError> {
        let mk = encoding::meta_key(db, self.gen(db), key);
        let version = self.salvaged_version(db, key, &mk, head)?;
        self.store.delete(mk);
        self.pending_counts[db as usize].0 -= 1;
        let expire_at = head.get(1..9).map_or(0, encoding::be64);
        if expire_at != 0 {
            let ek = encoding::expire_key(expire_at, db, key);
            if self.store.get(&ek)?.is_some() {
                self.store.delete(ek);
            }
        }
        if let Some(version) = version {
            // Cannot fail: the record is no longer than the collection's element keys.
            let _ = self.store.put(encoding::sub_prefix(encoding::GARBAGE, db, key, version), Vec::new());
        }
        log::warn!(
            "deleted key {:?} of database {db}, whose metadata did not decode{}",
            String::from_utf8_lossy(key),
            if version.is_some() { "" } else { " (its elements, if any, stay as leaked space)" }
        );
        Ok(())
    }

    /// The version word of `key`'s metadata record `head` (stored under
    /// `mk`), which does not decode, where reclaiming the elements it
    /// names is safe: a version already handed out, and not that of the
    /// key's live record if `mk` is an older generation's. Element keys
    /// carry the user key and a key has one live record, so such a version
    /// names no live key's elements — at worst none at all. `None`: the
    /// elements, if any, stay as leaked space.
    pub fn salvaged_version(&self, db: u8, key: &[u8], mk: &[u8], head: &[u8]) -> Result<Option<u64>, DbError> {
        let version = head.get(9..17).map_or(0, encoding::be64);
        if version == 0 || !self.store.handed_out(version) {
            return Ok(None);
        }
        let live = encoding::meta_key(db, self.gen(db), key);
        if live != mk {
            let live_version = self.store.get_range(&live, 0, 17)?.and_then(|(h, _)| h.get(9..17).map(encoding::be64));
            if live_version == Some(version) {
                return Ok(None);
            }
        }
        Ok(Some(version))
    }

    /// Committed plus pending key count of `db`.
    pub fn key_count(&self, db: usize) -> i64 {
        self.keys[db] + self.pending_counts[db].0
    }

    /// Committed plus pending count of keys with an expiry in `db`.
    pub fn expire_count(&self, db: usize) -> i64 {
        self.expires[db] + self.pending_counts[db].1
    }

    /// Marks every client watching `key` of `db`; `current` is the client
    /// running a command (not in `clients` meanwhile), if any.
    pub fn touch(&mut self, db: u8, key: &[u8], current: Option<&mut Client>) {
        if self.encoding_only {
            return;
        }
        if self.notify_flags != 0 {
            crate::notify::note(self, db, key, false, false);
        }
        if !self.tracking.is_idle() {
            crate::tracking::modified(self, key, current.as_deref());
        }
        self.mark_watchers(db, key, current);
    }

    /// Breaks the WATCH of every client watching `key` of `db` (the
    /// database as clients number it); `current` is the client running a
    /// command, if any.
    ///
    /// As in Redis 7.0 (`touchWatchedKey`), a key that had expired when it
    /// was watched and is now removed has logically not changed: that
    /// watch stays whole (and the key counts as any other from then on).
    pub fn mark_watchers(&mut self, db: u8, key: &[u8], mut current: Option<&mut Client>) {
        if self.watchers.is_empty() {
            return;
        }
        let entry = (db, key.to_vec());
        let Some(list) = self.watchers.get(&entry) else { return };
        let stale = |c: &Client| c.watch_stale.contains(&entry);
        let any_stale = list.iter().any(|id| match current.as_deref() {
            Some(c) if c.id == *id => stale(c),
            _ => self.clients.get(id).is_some_and(stale),
        });
        let gone = any_stale && {
            let phys = self.phys(db);
            let mk = crate::encoding::meta_key(phys, self.gen(phys), key);
            matches!(self.store.get_range(&mk, 0, 1), Ok(None))
        };
        for id in list {
            let c = match current.as_deref_mut() {
                Some(c) if c.id == *id => c,
                _ => match self.clients.get_mut(id) {
                    Some(c) => c,
                    None => continue,
                },
            };
            if gone {
                if let Some(i) = c.watch_stale.iter().position(|e| *e == entry) {
                    c.watch_stale.remove(i);
                    continue;
                }
            }
            c.watch_dirty = true;
        }
    }

    /// Commits the pending writes; if that fails, forgets them and returns
    /// the error reply the commands they came from must get instead.
    pub fn commit_or_discard(&mut self) -> Result<(), Reply> {
        self.commit().map_err(|e| {
            self.discard();
            Reply::Error(CmdError::from_commit(&e).0)
        })
    }

    /// Commits what background work staged; on failure (a full pool) drops
    /// it, to be tried again next time.
    fn background_commit(&mut self) -> bool {
        match self.commit() {
            Ok(()) => true,
            Err(err) => {
                log::warn!("background commit failed: {err}");
                self.discard();
                self.outbox.clear();
                false
            }
        }
    }

    /// Deletes flushed keys and the elements of dropped collections, a
    /// step of `per_step` elements and a commit at a time, until nothing is left
    /// or `until` (at least one step); records in `reclaim_left` whether
    /// work is left.
    fn reclaim(&mut self, until: Instant, per_step: usize) {
        self.reclaim_left = false;
        loop {
            let step = crate::background::sweep_flushed(self, per_step).and_then(|swept| {
                let (elements, records) = crate::background::reclaim_step(self, per_step)?;
                Ok((swept + elements, records))
            });
            match step {
                Ok((n, records)) => {
                    if !self.background_commit() {
                        // The sweep's progress flags ran ahead of the
                        // discarded writes: sweep every database again.
                        self.sweeping.iter_mut().for_each(|s| *s = true);
                        return;
                    }
                    self.stats.reclaimed += n;
                    // Records alone are progress too (emptied collections
                    // leave a record and no element).
                    if n == 0 && records == 0 {
                        return;
                    }
                    if Instant::now() >= until {
                        self.reclaim_left = true;
                        return;
                    }
                }
                Err(err) => {
                    log::warn!("reclaiming dropped collections failed: {err}");
                    self.discard();
                    return;
                }
            }
        }
    }

    /// Background work: expire up to [`CRON_EXPIRE_LIMIT`] keys whose time
    /// has come (one commit), then reclaim the elements of deleted
    /// collections for up to [`RECLAIM_BUDGET`] at once. In-process
    /// sessions use it; the server's loop does the same work in small
    /// steps spread over each window instead (`run`).
    pub fn cron(&mut self) {
        self.cron_tasks();
        if self.maxmemory.limit != 0 {
            self.evict_step();
        }
        if self.expire_due(CRON_EXPIRE_LIMIT) {
            // More were due than one cycle takes (INFO expired_time_cap_reached_count).
            self.stats.expire_cap_reached += 1;
        }
        self.reclaim(Instant::now() + RECLAIM_BUDGET, RECLAIM_STEP);
    }

    /// The cron's work besides expiring and reclaiming: the clock, BGSAVE,
    /// memory and rate statistics, SCAN cursors past their time.
    fn cron_tasks(&mut self) {
        self.wall.resync();
        self.bgsave.poll(self.store.db());
        let used = self.store.db().pool().used_bytes();
        self.stats.peak_memory = self.stats.peak_memory.max(used);
        let totals = [
            self.stats.commands,
            self.shared.net(crate::net::Net::InBytes),
            self.shared.net(crate::net::Net::OutBytes),
        ];
        self.stats.rates.sample(Instant::now(), totals);
        self.cursors.expire_old();
        self.notes.clear();
        self.enforce_soft_output_limits();
    }

    /// A step of eviction while the pool stays over `maxmemory` after the
    /// last one ran out of time (Redis's eviction time proc); the evicted
    /// keys' events go out once the step is committed.
    fn evict_step(&mut self) {
        crate::maxmemory::perform(self, None, now_ms());
        if self.background_commit() {
            self.flush_outbox();
        } else {
            self.maxmemory.left = false;
        }
    }

    /// A step of the active expire cycle: deletes up to `limit` keys whose
    /// time has come, in one commit, then sends their `expired`
    /// notifications. Returns whether more may be due, and keeps it in
    /// `expire_left`.
    fn expire_due(&mut self, limit: usize) -> bool {
        self.expire_left = false;
        if !self.active_expire || self.expiry_paused() {
            return false;
        }
        let now = now_ms();
        let cycle = Instant::now();
        let expired = crate::background::expire_cycle(self, now, limit);
        self.latency.add("expire-cycle", cycle.elapsed().as_millis() as u64, now / 1000);
        self.stats.expire_cycle_us += cycle.elapsed().as_micros() as u64;
        let more = match expired {
            Ok((e, more)) => {
                self.stats.expired_keys += e;
                self.background_commit() && more
            }
            Err(err) => {
                log::warn!("background work failed: {err}");
                self.discard();
                self.outbox.clear();
                false
            }
        };
        // `expired` notifications, now that the deletions are committed.
        self.flush_outbox();
        self.expire_left = more;
        more
    }
}

/// The output-buffer class of `c` (Redis's `getClientType`: a monitor is
/// a normal client) and its limit.
fn output_class<'a>(
    c: &Client,
    limits: &'a crate::cmd::OutputLimits,
) -> (&'static str, &'a crate::cmd::config_compat::Limit) {
    if c.subscribed() {
        ("pubsub", &limits.pubsub)
    } else {
        ("normal", &limits.normal)
    }
}

/// Takes client `id` (whose wait `b` has just been taken from it) off the
/// blocked lists, remembering it as it was before in `saved` (the state a
/// rolled-back group restores).
fn release_block(
    saved: &mut FxHashMap<u64, Client>,
    blocking: &mut crate::blocking::Registry,
    id: u64,
    c: &Client,
    b: &crate::blocking::Blocked,
) {
    saved.entry(id).or_insert_with(|| {
        let mut before = c.clone();
        before.blocked = Some(Box::new(b.clone()));
        before
    });
    blocking.remove(id, b);
    c.conn.blocked.store(false, std::sync::atomic::Ordering::Relaxed);
}
