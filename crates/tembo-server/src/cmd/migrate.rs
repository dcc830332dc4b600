//! MIGRATE: moves (or with COPY, copies) keys to another Redis-protocol
//! server as DUMP payloads restored there with RESTORE.
//!
//! As in Redis, the call blocks the server while it talks to the target,
//! bounded by its timeout (a target that is this very server can only time
//! out). Keys are deleted here, in the command's own commit, only once the
//! target has acknowledged their RESTORE; a key the target refused stays,
//! and the target's error is the reply. Unlike Redis, connections are not
//! cached between calls (each MIGRATE connects anew).
//!
//! The target is told before the command's commit here. Should that commit
//! fail (a full pool), the executor runs the group's requests again one
//! commit each, so MIGRATE talks to the target a second time: the keys are
//! there already, and without REPLACE the reply is the target's BUSYKEY
//! error while the keys stay here too — nothing is lost, a key may be left
//! on both servers.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use super::args::{int, is};
use super::{CmdError, CmdResult, Spec};
use crate::exec::Ctx;
use crate::resp::Reply;

pub const COMMANDS: &[Spec] = &[Spec {
    name: "migrate",
    arity: -6,
    flags: &["write", "movablekeys"],
    keys: (3, 3, 1),
    group: "keyspace",
    summary: "MIGRATE host port key|\"\" destination-db timeout [COPY] [REPLACE] [AUTH password | AUTH2 username password] [KEYS key ...]: moves keys to another server.",
    run: migrate,
}];

/// The keys a MIGRATE call names: its key argument, or with KEYS (the key
/// argument then empty) the arguments after it. `None`: a syntax error.
pub fn keys_of(a: &[Vec<u8>]) -> Option<Vec<&[u8]>> {
    let key = a.get(3)?;
    let opts = parse(a).ok()?;
    Some(if opts.keys_option { a[opts.first_key..].iter().map(Vec::as_slice).collect() } else { vec![&key[..]] })
}

/// The arguments MONITOR and SLOWLOG must not show: AUTH's password,
/// AUTH2's user name and password (Redis redacts the same).
pub fn secret_args(a: &[Vec<u8>]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut j = 6;
    while j < a.len() {
        let more = a.len() - j - 1;
        if is(&a[j], "auth") && more >= 1 {
            out.push(j + 1);
            j += 1;
        } else if is(&a[j], "auth2") && more >= 2 {
            out.extend([j + 1, j + 2]);
            j += 2;
        } else if !is(&a[j], "copy") && !is(&a[j], "replace") {
            break;
        }
        j += 1;
    }
    out
}

struct Options {
    copy: bool,
    replace: bool,
    auth: Vec<Vec<u8>>,
    /// Whether the keys follow KEYS (from `first_key`) rather than being
    /// the key argument alone.
    keys_option: bool,
    first_key: usize,
}

fn parse(a: &[Vec<u8>]) -> Result<Options, CmdError> {
    let mut o = Options { copy: false, replace: false, auth: Vec::new(), keys_option: false, first_key: 3 };
    let mut j = 6;
    while j < a.len() {
        let more = a.len() - j - 1;
        if is(&a[j], "copy") {
            o.copy = true;
        } else if is(&a[j], "replace") {
            o.replace = true;
        } else if is(&a[j], "auth") && more >= 1 {
            o.auth = vec![a[j + 1].clone()];
            j += 1;
        } else if is(&a[j], "auth2") && more >= 2 {
            o.auth = vec![a[j + 1].clone(), a[j + 2].clone()];
            j += 2;
        } else if is(&a[j], "keys") {
            if !a[3].is_empty() {
                return Err(CmdError::err(
                    "When using MIGRATE KEYS option, the key argument must be set to the empty string",
                ));
            }
            o.keys_option = true;
            o.first_key = j + 1;
            break;
        } else {
            return Err(CmdError::syntax());
        }
        j += 1;
    }
    Ok(o)
}

fn migrate(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let o = parse(a)?;
    let timeout = int(&a[5])?;
    let db = int(&a[4])?;
    let keys: Vec<Vec<u8>> = if o.keys_option { a[o.first_key..].to_vec() } else { vec![a[3].clone()] };
    // What exists here, with its payload and time to live (at least 1 ms).
    let mut found: Vec<(Vec<u8>, _, u64, Vec<u8>)> = Vec::new();
    for key in keys {
        // A key named twice moves once.
        if found.iter().any(|(k, ..)| *k == key) {
            continue;
        }
        let Some(m) = cx.lookup(&key)? else { continue };
        let ttl = if m.expire_at == 0 { 0 } else { m.expire_at.saturating_sub(cx.now).max(1) };
        let payload = super::dump::payload(cx, &key, &m)?;
        found.push((key, m, ttl, payload));
    }
    if found.is_empty() {
        return Ok(Reply::Simple("NOKEY".into()));
    }
    let timeout = Duration::from_millis(if timeout <= 0 { 1000 } else { timeout as u64 });
    let host = String::from_utf8_lossy(&a[1]).into_owned();
    let port = String::from_utf8_lossy(&a[2]).into_owned();
    let write_error = || CmdError("IOERR error or timeout writing to target instance".into());
    let mut conn = match Target::connect(&host, &port, timeout) {
        Ok(conn) => conn,
        // Redis connects without blocking and takes a refused connection
        // (writable at once) as made: the error it reports is the write's.
        Err(Unreached::Refused) => return Err(write_error()),
        Err(Unreached::Other) => return Err(CmdError("IOERR error or timeout connecting to the client".into())),
    };

    let mut request = Vec::new();
    let mut replies = 0;
    if !o.auth.is_empty() {
        let mut auth = vec![b"AUTH".to_vec()];
        auth.extend(o.auth.iter().cloned());
        encode(&mut request, &auth);
        replies += 1;
    }
    encode(&mut request, &[b"SELECT".to_vec(), db.to_string().into_bytes()]);
    replies += 1;
    for (key, _, ttl, payload) in &found {
        let mut restore = vec![b"RESTORE".to_vec(), key.clone(), ttl.to_string().into_bytes(), payload.clone()];
        if o.replace {
            restore.push(b"REPLACE".to_vec());
        }
        encode(&mut request, &restore);
    }
    conn.send(&request).map_err(|_| write_error())?;
    let io_read = || CmdError("IOERR error or timeout reading to target instance".into());
    // AUTH and SELECT first: an error there means no key moved.
    for _ in 0..replies {
        if let Err(e) = conn.reply().map_err(|_| io_read())? {
            return Err(CmdError(format!("ERR Target instance replied with error: {e}")));
        }
    }
    let mut error = None;
    for (key, m, _, _) in &found {
        match conn.reply().map_err(|_| io_read())? {
            Err(e) => {
                error.get_or_insert(e);
            }
            Ok(()) if !o.copy => cx.remove(key, m),
            Ok(()) => {}
        }
    }
    match error {
        Some(e) => Err(CmdError(format!("ERR Target instance replied with error: {e}"))),
        None => Ok(Reply::ok()),
    }
}

/// Appends a request as a RESP multibulk.
fn encode(out: &mut Vec<u8>, args: &[Vec<u8>]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for arg in args {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
}

/// Longest reply line read from the target (its replies are one status line).
const MAX_REPLY_LINE: u64 = 4096;

/// A blocking connection to the target, every step bounded by the timeout.
struct Target {
    reader: BufReader<TcpStream>,
}

/// Why no connection to the target was made.
enum Unreached {
    /// Every address refused it (nothing listens on the port).
    Refused,
    /// A bad port, a name that does not resolve, a time-out.
    Other,
}

impl Target {
    fn connect(host: &str, port: &str, timeout: Duration) -> Result<Target, Unreached> {
        let port: u16 = port.parse().map_err(|_| Unreached::Other)?;
        let addrs: Vec<_> = (host, port).to_socket_addrs().map_err(|_| Unreached::Other)?.collect();
        // One timeout for the connection, however many addresses the name has.
        let deadline = std::time::Instant::now() + timeout;
        let mut refused = !addrs.is_empty();
        let stream = addrs.into_iter().find_map(|addr| {
            let Some(left) = deadline.checked_duration_since(std::time::Instant::now()).filter(|d| !d.is_zero()) else {
                refused = false;
                return None;
            };
            TcpStream::connect_timeout(&addr, left)
                .map_err(|e| refused &= e.kind() == std::io::ErrorKind::ConnectionRefused)
                .ok()
        });
        let stream = stream.ok_or(if refused { Unreached::Refused } else { Unreached::Other })?;
        stream.set_read_timeout(Some(timeout)).map_err(|_| Unreached::Other)?;
        stream.set_write_timeout(Some(timeout)).map_err(|_| Unreached::Other)?;
        let _ = stream.set_nodelay(true);
        Ok(Target { reader: BufReader::new(stream) })
    }

    fn send(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.reader.get_mut().write_all(bytes)
    }

    /// One reply line: `Err` with the text of an error reply, `Ok` for
    /// anything else (as Redis reads it). An I/O failure, or a line longer
    /// than [`MAX_REPLY_LINE`] without its end, is the outer error.
    fn reply(&mut self) -> std::io::Result<Result<(), String>> {
        let mut line = Vec::new();
        (&mut self.reader).take(MAX_REPLY_LINE).read_until(b'\n', &mut line)?;
        let line = line.strip_suffix(b"\n").ok_or(std::io::ErrorKind::UnexpectedEof)?;
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        match line.first() {
            Some(b'-') => Ok(Err(String::from_utf8_lossy(&line[1..]).into_owned())),
            _ => Ok(Ok(())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(words: &[&str]) -> Vec<Vec<u8>> {
        words.iter().map(|w| w.as_bytes().to_vec()).collect()
    }

    #[test]
    fn keys_come_from_the_key_argument_or_after_keys() {
        let one = call(&["migrate", "h", "1", "k", "0", "10", "copy"]);
        assert_eq!(keys_of(&one).unwrap(), vec![&b"k"[..]]);
        let many = call(&["migrate", "h", "1", "", "0", "10", "replace", "auth", "pw", "keys", "a", "b"]);
        assert_eq!(keys_of(&many).unwrap(), vec![&b"a"[..], &b"b"[..]]);
        assert!(parse(&call(&["migrate", "h", "1", "k", "0", "10", "keys", "a"])).is_err());
        assert!(parse(&call(&["migrate", "h", "1", "k", "0", "10", "bogus"])).is_err());
        let o = parse(&call(&["migrate", "h", "1", "", "0", "10", "auth2", "u", "p", "keys", "a"])).unwrap();
        assert_eq!(o.auth, vec![b"u".to_vec(), b"p".to_vec()]);
        // Too few arguments for a key (ACL checks from scripts skip arity): none.
        assert!(keys_of(&call(&["migrate", "h", "1"])).is_none());
    }

    #[test]
    fn passwords_are_named_for_redaction() {
        let a = call(&["migrate", "h", "1", "k", "0", "10", "copy", "auth", "pw", "replace"]);
        assert_eq!(secret_args(&a), vec![8]);
        let a = call(&["migrate", "h", "1", "", "0", "10", "auth2", "user", "pw", "keys", "auth", "x"]);
        assert_eq!(secret_args(&a), vec![7, 8]);
    }
}
