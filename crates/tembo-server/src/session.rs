//! An in-process session: run commands against a database without a
//! socket, exactly as a connected client would (same dispatch, same group
//! commit, one command per group). Tests use it to check every type against
//! a model; embedders can use it to speak Redis commands to a `Db`.

use std::sync::Arc;

use tembo_store::Db;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};

use crate::client::{Client, Out};
use crate::cmd;
use crate::exec::State;
use crate::resp::{split_args, Reply};
use crate::Config;

/// One client's session on a database.
#[derive(Debug)]
pub struct Session {
    st: State,
    client: Client,
    _out: UnboundedReceiver<Out>,
}

impl Session {
    /// A session on `db` with default settings.
    pub fn new(db: Arc<Db>) -> Result<Session, crate::exec::OpenError> {
        Session::with_config(db, Config::default())
    }

    /// A session on `db` with `cfg`'s settings (its `databases`, limits…).
    pub fn with_config(db: Arc<Db>, cfg: Config) -> Result<Session, crate::exec::OpenError> {
        let shared = Arc::new(crate::net::Shared::new(&cfg));
        let st = State::new(db, cfg, shared)?;
        let (tx, rx) = unbounded_channel();
        let mut client = Client::new(1, "127.0.0.1:1".into(), "127.0.0.1:0".into(), true, tx);
        // Nothing else runs in a session to wake a blocked client: blocking
        // commands answer at once, as inside MULTI.
        client.no_block = true;
        Ok(Session { st, client, _out: rx })
    }

    /// Runs one command and commits its writes before returning its reply.
    pub fn call<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Reply {
        if args.is_empty() {
            return Reply::Error("ERR empty command".into());
        }
        let args: Vec<Vec<u8>> = args.iter().map(|a| a.as_ref().to_vec()).collect();
        // Each call is its own group: no rerun gives back the cursors it takes.
        self.st.cursors.mark();
        let mut reply = cmd::dispatch(&mut self.st, &mut self.client, &args);
        while std::mem::take(&mut self.client.postpone_now) {
            // Held by CLIENT PAUSE: nothing else runs here, so wait it out.
            if let Some(p) = self.st.pause {
                std::thread::sleep(p.until.saturating_duration_since(std::time::Instant::now()));
            }
            self.st.pause_now();
            reply = cmd::dispatch(&mut self.st, &mut self.client, &args);
        }
        if std::mem::take(&mut self.st.torn) {
            // The command stopped midway; its error reply says so.
            self.st.discard();
            return reply;
        }
        self.st.commit_or_discard().map_or_else(|failed| failed, |()| reply)
    }

    /// Runs a command written as redis-cli would take it (`SET k "a b"`).
    pub fn call_line(&mut self, line: &str) -> Reply {
        match split_args(line.as_bytes()) {
            Some(args) => self.call(&args),
            None => Reply::Error("ERR Protocol error: unbalanced quotes in request".into()),
        }
    }

    /// Runs the background work (expiry, reclaiming deleted collections) once.
    pub fn background(&mut self) {
        self.st.cron();
    }

    /// The database.
    pub fn db(&self) -> &Arc<Db> {
        self.st.store.db()
    }
}
