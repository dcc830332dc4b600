//! A script past `busy-reply-threshold`: the other clients are answered
//! while it runs, as Redis answers them (`processEventsWhileBlocked`).
//!
//! What Redis 7.0 does, done here the same way: once a script (EVAL or
//! FCALL) has run longer than the threshold it is *busy*. It runs on, for
//! as long as it takes; other clients may then run only the commands
//! flagged `allow-busy` (AUTH, HELLO, MULTI, DISCARD, WATCH, UNWATCH,
//! RESET, QUIT, SCRIPT KILL, FUNCTION KILL, FUNCTION STATS, SHUTDOWN), and
//! anything else gets Redis's BUSY error (and fails the transaction it was
//! to be queued in, as any refused command does). `SCRIPT KILL` (for an
//! EVAL) or `FUNCTION KILL` (for an FCALL) stops a script that has not run
//! a write command; `SHUTDOWN NOSAVE` stops any script and the server. A
//! stopped script's writes are never applied: they wait in the executor's
//! pending batch, which commits after the script, and a shutdown discards
//! it. Nothing acknowledged is lost: the group's replies wait for its
//! commit.
//!
//! How the sockets keep going while the executor is inside the script:
//! the executor is the thread that drives the runtime the connection tasks
//! run on (`State::run`), and it does not while it runs a group. On
//! entering busy mode a [`Helper`] thread drives the runtime instead, so
//! the connections read and write while the script keeps the executor's
//! thread; the script's instruction hook calls [`serve`], which takes what
//! they queued. When the script ends the helper stops and hands the
//! runtime back.
//!
//! Who is answered during busy mode: clients that ran nothing in the
//! current commit group. The script's own client, and any client with
//! replies waiting for the group's commit, are answered after the script
//! in arrival order (their replies must not overtake what they wait for,
//! and a failed commit reruns their requests), as are disconnects. A
//! SIGTERM or SIGINT stops the script as SHUTDOWN NOSAVE does (Redis waits
//! for the script to end, which may be never). While a failed group is run
//! again one command per commit (`State::rerunning`), a busy script
//! answers no one: the clients later in the rerun still wait for replies
//! that must come first. While another client's request runs, no blocked
//! client is served: what the script pushed is its own until it ends.
//!
//! A loop inside a Lua coroutine is watched too: the hook moves to the
//! coroutine while it runs (see the prelude in `crate::script`).
//!
//! Left as in Redis's own model or not handled: SCRIPT KILL from a client
//! whose earlier request is in the script's group waits with it.

use std::sync::Arc;
use std::time::Instant;

use tokio::runtime::Runtime;

use crate::cmd::CmdError;
use crate::exec::{Msg, State, MAX_GROUP};

/// Redis's error for a command refused during a busy EVAL.
pub const BUSY_EVAL: &str = "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";
/// Redis's error for a command refused during a busy FCALL.
pub const BUSY_FUNCTION: &str =
    "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.";
/// What a killed script raises (the reply then names the script and line).
pub const KILLED: &str = "Script killed by user with SCRIPT KILL...";

/// Why a busy script is to stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kill {
    /// SCRIPT KILL or FUNCTION KILL (the script has not written).
    User,
    /// SHUTDOWN NOSAVE: the script's writes are discarded and the server stops.
    Shutdown,
}

/// The script (EVAL or FCALL) that is running, as FUNCTION STATS and the
/// kill commands see it.
#[derive(Debug)]
pub struct ScriptRun {
    /// The client that called it.
    pub client: u64,
    /// The command that called it (FUNCTION STATS `command`).
    pub command: Vec<Vec<u8>>,
    /// An EVAL (SCRIPT KILL stops it) rather than an FCALL (FUNCTION KILL).
    pub eval: bool,
    /// The script's SHA-1 or the function's name.
    pub name: String,
    /// When it started.
    pub started: Instant,
    /// It has run a write command: no user kill may stop it.
    pub wrote: bool,
    /// It is past the threshold: other clients are answered meanwhile.
    pub busy: bool,
    /// A kill asked for, taken by the script's hook.
    pub kill: Option<Kill>,
    /// (libraries, functions) loaded, for FUNCTION STATS while it runs.
    pub libraries: (usize, usize),
    /// The script's command is the first its client runs in the group
    /// (`State::commit_before_busy`).
    pub first_of_client: bool,
    /// The thread that drives the runtime while the script is busy.
    helper: Option<Helper>,
}

impl ScriptRun {
    /// A run about to start for `client`'s `command`.
    pub fn new(client: u64, command: &[Vec<u8>], first_of_client: bool) -> ScriptRun {
        ScriptRun {
            client,
            command: command.to_vec(),
            eval: true,
            name: String::new(),
            started: Instant::now(),
            wrote: false,
            busy: false,
            kill: None,
            libraries: (0, 0),
            first_of_client,
            helper: None,
        }
    }

    /// The BUSY error for this run's kind.
    pub fn busy_error(&self) -> &'static str {
        if self.eval {
            BUSY_EVAL
        } else {
            BUSY_FUNCTION
        }
    }
}

/// The BUSY error a command gets now, if a busy script runs.
pub fn refusal(st: &State) -> Option<&'static str> {
    st.script_run.as_ref().filter(|r| r.busy).map(ScriptRun::busy_error)
}

/// SCRIPT KILL (`eval`) or FUNCTION KILL: Redis's checks, in its order.
pub fn kill(st: &mut State, eval: bool) -> Result<(), CmdError> {
    let Some(run) = st.script_run.as_mut().filter(|r| r.busy) else {
        return Err(CmdError("NOTBUSY No scripts in execution right now.".into()));
    };
    if run.wrote {
        return Err(CmdError(
            "UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait \
             the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command."
                .into(),
        ));
    }
    if eval != run.eval {
        // SCRIPT KILL does not stop a function, nor FUNCTION KILL a script.
        return Err(CmdError(run.busy_error().into()));
    }
    run.kill.get_or_insert(Kill::User);
    Ok(())
}

/// Called by the busy script's instruction hook: enters busy mode the
/// first time, then runs what the connections queued. Returns the kill
/// asked for, if any.
pub fn serve(st: &mut State) -> Option<Kill> {
    let run = st.script_run.as_mut()?;
    let script_client = run.client;
    if !run.busy {
        run.busy = true;
        log::warn!(
            "Slow script detected: still in execution after {} milliseconds. You can try killing the script using \
             the {} command. Script name is: {}.",
            run.started.elapsed().as_millis(),
            if run.eval { "SCRIPT KILL" } else { "FUNCTION KILL" },
            run.name
        );
        let first = run.first_of_client && !run.wrote;
        run.helper = st.runtime.clone().and_then(Helper::start);
        if first {
            st.commit_before_busy(script_client);
        }
    }
    // First the requests that wait behind the script in its group, then
    // what the connections queued since; what must wait stays in place or
    // joins the group after the script. Once a kill is taken nothing more
    // is: the script stops at this hook, and what arrives from then on
    // (a client that has read the kill's OK and sends on) runs after it,
    // not refused with BUSY.
    let killing = |st: &State| st.script_run.as_ref().is_some_and(|r| r.kill.is_some());
    for at in st.group_at + 1..st.group.len() {
        if killing(st) {
            break;
        }
        let msg = std::mem::replace(&mut st.group[at], Msg::Served);
        if let Some(waits) = serve_one(st, script_client, msg) {
            st.group[at] = waits;
        }
    }
    for _ in 0..MAX_GROUP {
        if killing(st) {
            break;
        }
        let Some(msg) = st.inbox.as_mut().and_then(|i| i.try_recv().ok()) else { break };
        if let Some(waits) = serve_one(st, script_client, msg) {
            st.after_busy.push_back(waits);
        }
    }
    st.script_run.as_ref().and_then(|r| r.kill)
}

/// Handles one message while the script is busy; gives it back if it must
/// wait for the script (the script's own client, clients in its group, a
/// rerun, disconnects). SIGTERM or SIGINT stops the script as SHUTDOWN
/// NOSAVE does (Redis would wait for it, however long it runs).
fn serve_one(st: &mut State, script_client: u64, msg: Msg) -> Option<Msg> {
    match msg {
        Msg::Connect(c) => st.connect(*c),
        Msg::Requests { id, reqs, bytes } if id != script_client && !st.in_group(id) && !st.rerunning => {
            st.serve_now(id, &reqs, bytes);
        }
        Msg::Shutdown => {
            if let Some(run) = st.script_run.as_mut() {
                run.kill = Some(Kill::Shutdown);
            }
            st.shutdown = true;
        }
        Msg::Served => {}
        waits => return Some(waits),
    }
    None
}

/// A thread that drives the connections' runtime while a script is busy;
/// stops (and gives the runtime back) when dropped, with the script's run.
#[derive(Debug)]
struct Helper {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Helper {
    fn start(rt: Arc<Runtime>) -> Option<Helper> {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("tembo-busy".into())
            .spawn(move || {
                let _ = rt.block_on(stopped);
            })
            .map_err(|e| log::warn!("busy script: no thread to serve the other clients meanwhile ({e})"))
            .ok()?;
        Some(Helper { stop: Some(stop), thread: Some(thread) })
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
