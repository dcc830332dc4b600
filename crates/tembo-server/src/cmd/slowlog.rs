//! SLOWLOG (GET LEN RESET HELP): the commands that ran longer than
//! `slowlog-log-slower-than` microseconds (0: every command; negative:
//! none), the newest `slowlog-max-len` of them, as Redis keeps them.
//! Only commands clients send are timed — not those inside MULTI/EXEC or
//! a script, whose time counts in EXEC's or EVAL's own entry.

use std::collections::VecDeque;

use super::args::int;
use super::{CmdError, CmdResult, Spec};
use crate::client::Client;
use crate::exec::Ctx;
use crate::resp::Reply;

pub const COMMANDS: &[Spec] = &[Spec {
    name: "slowlog",
    arity: -2,
    flags: &["admin", "random", "loading", "stale"],
    keys: (0, 0, 0),
    group: "server",
    summary: "SLOWLOG GET [count] | LEN | RESET | HELP: the slow commands log.",
    run: slowlog,
}];

/// Most arguments and bytes per argument an entry keeps (Redis's limits).
const MAX_ARGS: usize = 32;
const MAX_ARG_BYTES: usize = 128;

#[derive(Clone, Debug)]
struct Entry {
    id: i64,
    unix_secs: i64,
    micros: i64,
    args: Vec<Vec<u8>>,
    addr: String,
    name: String,
}

/// The log and its two settings.
#[derive(Debug)]
pub struct SlowLog {
    entries: VecDeque<Entry>,
    next_id: i64,
    /// `slowlog-log-slower-than`, microseconds.
    pub threshold_us: i64,
    /// `slowlog-max-len`.
    pub max_len: usize,
}

impl Default for SlowLog {
    fn default() -> Self {
        SlowLog { entries: VecDeque::new(), next_id: 0, threshold_us: 10_000, max_len: 128 }
    }
}

impl SlowLog {
    /// Logs `args` if it took at least the threshold.
    pub fn record(&mut self, client: &Client, args: &[Vec<u8>], micros: i64) {
        if self.threshold_us < 0 || micros < self.threshold_us || self.max_len == 0 {
            return;
        }
        let name = &args[0];
        if name.eq_ignore_ascii_case(b"auth") || name.eq_ignore_ascii_case(b"hello") {
            return; // they carry passwords
        }
        let secret = super::secret_args(args);
        let mut kept: Vec<Vec<u8>> = Vec::with_capacity(args.len().min(MAX_ARGS));
        for (i, a) in args.iter().enumerate() {
            if secret.contains(&i) {
                kept.push(b"(redacted)".to_vec());
                continue;
            }
            if i == MAX_ARGS - 1 && args.len() > MAX_ARGS {
                kept.push(format!("... ({} more arguments)", args.len() - i).into_bytes());
                break;
            }
            if a.len() > MAX_ARG_BYTES {
                let mut b = a[..MAX_ARG_BYTES].to_vec();
                b.extend_from_slice(format!("... ({} more bytes)", a.len() - MAX_ARG_BYTES).as_bytes());
                kept.push(b);
            } else {
                kept.push(a.clone());
            }
        }
        let unix_secs = crate::exec::now_ms() as i64 / 1000;
        self.entries.push_front(Entry {
            id: self.next_id,
            unix_secs,
            micros,
            args: kept,
            addr: client.addr.clone(),
            name: client.name.clone().unwrap_or_default(),
        });
        self.next_id += 1;
        self.entries.truncate(self.max_len);
    }

    /// Where the entries logged from now on begin (see [`SlowLog::forget_from`]).
    pub fn mark(&self) -> i64 {
        self.next_id
    }

    /// Drops the entries logged since `mark`: their commit group was
    /// rolled back, and its rerun logs its slow commands again.
    pub fn forget_from(&mut self, mark: i64) {
        self.entries.retain(|e| e.id < mark);
        self.next_id = self.next_id.min(mark);
    }

    /// Applies a new `slowlog-max-len`.
    pub fn set_max_len(&mut self, n: usize) {
        self.max_len = n;
        self.entries.truncate(n);
    }
}

fn slowlog(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let sub = String::from_utf8_lossy(&a[1]).to_ascii_lowercase();
    let log = &mut cx.st.slowlog;
    match (sub.as_str(), a.len()) {
        ("get", 2 | 3) => {
            let count = match a.get(2) {
                None => 10,
                Some(c) => {
                    let n = int(c)?;
                    if n < -1 {
                        return Err(CmdError::err("count should be greater than or equal to -1"));
                    }
                    if n == -1 {
                        usize::MAX
                    } else {
                        n as usize
                    }
                }
            };
            Ok(Reply::Array(
                log.entries
                    .iter()
                    .take(count)
                    .map(|e| {
                        Reply::Array(vec![
                            Reply::Int(e.id),
                            Reply::Int(e.unix_secs),
                            Reply::Int(e.micros),
                            Reply::Array(e.args.iter().map(Reply::bulk).collect()),
                            Reply::bulk(&e.addr),
                            Reply::bulk(&e.name),
                        ])
                    })
                    .collect(),
            ))
        }
        ("len", 2) => Ok(Reply::Int(log.entries.len() as i64)),
        ("reset", 2) => {
            log.entries.clear();
            Ok(Reply::ok())
        }
        ("help", 2) => Ok(super::help(&[
            "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "GET [<count>]",
            "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
            "LEN",
            "    Return the length of the slowlog.",
            "RESET",
            "    Reset the slowlog.",
        ])),
        _ => Err(super::subcommand_error(a, "SLOWLOG")),
    }
}
