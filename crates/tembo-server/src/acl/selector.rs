//! A selector: one set of command rules, key patterns and channel patterns.
//!
//! A user has a root selector and any number of added ones (`(…)` in ACL
//! SETUSER); a call is allowed when one selector allows all of it.
//!
//! Command permissions are kept as the rules themselves, in order, over a
//! base of "everything" (`+@all`) or "nothing" (`-@all`): a call is allowed
//! by the last rule that matches it, or by the base. Redis keeps a bitmap
//! per command and rebuilds an equivalent rule string for ACL GETUSER; the
//! ordered rules *are* that string, so what GETUSER shows is exactly what
//! is enforced. Each new rule for a command drops the earlier rules it
//! overrides (a rule for `client` drops those for `client|id`), and a rule
//! for a subcommand that changes nothing is not kept, as in Redis.

use super::category;
use super::keys::Need;
use crate::cmd::{self, args::glob, Spec};

/// What a command rule names.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Target {
    /// `@category`, as its bit.
    Category(u32, String),
    /// A whole command (every subcommand).
    Command(&'static str),
    /// `container|sub`.
    Sub(&'static str, &'static str),
    /// `command|first-arg` (allow only): the command when its first
    /// argument is this (lower-cased) word.
    FirstArg(&'static str, String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Rule {
    allow: bool,
    target: Target,
}

/// A key pattern and what it grants.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyPattern {
    /// The glob pattern.
    pub pattern: Vec<u8>,
    /// `%R~`.
    pub read: bool,
    /// `%W~`.
    pub write: bool,
}

/// Why a modifier was refused (the text after Redis's "Error in ACL SETUSER modifier '…': ").
pub type RuleError = String;

pub const UNKNOWN: &str = "Unknown command or category name in ACL";
pub const SYNTAX: &str = "Syntax error";
const AFTER_ALLKEYS: &str = "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns";
const AFTER_ALLCHANNELS: &str = "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels";

/// Command rules, key patterns and channel patterns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selector {
    all_commands: bool,
    rules: Vec<Rule>,
    all_keys: bool,
    keys: Vec<KeyPattern>,
    all_channels: bool,
    channels: Vec<Vec<u8>>,
}

impl Selector {
    /// A selector that allows nothing (`-@all`, no keys, no channels).
    pub fn empty() -> Selector {
        Selector {
            all_commands: false,
            rules: Vec::new(),
            all_keys: false,
            keys: Vec::new(),
            all_channels: false,
            channels: Vec::new(),
        }
    }

    /// Everything: the default user's root selector.
    pub fn everything() -> Selector {
        Selector {
            all_commands: true,
            rules: Vec::new(),
            all_keys: true,
            keys: Vec::new(),
            all_channels: true,
            channels: Vec::new(),
        }
    }

    /// Whether it allows every command, key and channel with no exception.
    pub fn is_everything(&self) -> bool {
        self.all_commands && self.rules.is_empty() && self.all_keys && self.all_channels
    }

    /// Applies one selector modifier (`+get`, `~key*`, `&chan`, `allkeys`…).
    pub fn apply(&mut self, op: &[u8]) -> Result<(), RuleError> {
        // Patterns are bytes (keys need not be UTF-8); keywords and command
        // names are ASCII, so a lossy lower-cased copy serves to match them.
        let lower = String::from_utf8_lossy(op).to_ascii_lowercase();
        if op.iter().any(u8::is_ascii_whitespace) {
            // A pattern with a space would not survive ACL LIST / ACL SAVE.
            return Err(SYNTAX.into());
        }
        match lower.as_str() {
            // Setting "everything" again is no error (only a narrower
            // pattern after it is).
            "allkeys" | "~*" | "%rw~*" | "%wr~*" => {
                self.all_keys = true;
                self.keys.clear();
                return Ok(());
            }
            "allchannels" | "&*" => {
                self.all_channels = true;
                self.channels.clear();
                return Ok(());
            }
            "resetkeys" => {
                self.all_keys = false;
                self.keys.clear();
                return Ok(());
            }
            "resetchannels" => {
                self.all_channels = false;
                self.channels.clear();
                return Ok(());
            }
            "allcommands" => return self.apply(b"+@all"),
            "nocommands" => return self.apply(b"-@all"),
            _ => {}
        }
        match op.first() {
            Some(b'~') => self.add_key(&op[1..], true, true),
            Some(b'%') => {
                // `%` then R and W, each at most once, then `~` and the
                // pattern; with no `~` the pattern is empty (Redis accepts
                // `%RW` since its fix for CVE-2024-51741, as access to no key).
                let (mut read, mut write) = (false, false);
                let mut at = 1;
                while at < op.len() {
                    match op[at].to_ascii_uppercase() {
                        b'R' if !read => read = true,
                        b'W' if !write => write = true,
                        b'~' => break,
                        _ => return Err(SYNTAX.into()),
                    }
                    at += 1;
                }
                if !read && !write {
                    return Err(SYNTAX.into());
                }
                self.add_key(op.get(at + 1..).unwrap_or_default(), read, write)
            }
            Some(b'&') => {
                if self.all_channels {
                    return Err(AFTER_ALLCHANNELS.into());
                }
                let pattern = op[1..].to_vec();
                if pattern == b"*" {
                    self.all_channels = true;
                    self.channels.clear();
                } else if !self.channels.contains(&pattern) {
                    self.channels.push(pattern);
                }
                Ok(())
            }
            Some(b'+') | Some(b'-') => self.command_rule(op[0] == b'+', &lower[1..]),
            _ => Err(SYNTAX.into()),
        }
    }

    fn add_key(&mut self, pattern: &[u8], read: bool, write: bool) -> Result<(), RuleError> {
        if self.all_keys {
            return Err(AFTER_ALLKEYS.into());
        }
        if pattern == b"*" && read && write {
            self.all_keys = true;
            self.keys.clear();
            return Ok(());
        }
        match self.keys.iter_mut().find(|k| k.pattern == pattern) {
            Some(k) => {
                k.read |= read;
                k.write |= write;
            }
            None => self.keys.push(KeyPattern { pattern: pattern.to_vec(), read, write }),
        }
        Ok(())
    }

    fn command_rule(&mut self, allow: bool, name: &str) -> Result<(), RuleError> {
        if let Some(cat) = name.strip_prefix('@') {
            if cat == "all" {
                self.all_commands = allow;
                self.rules.clear();
                return Ok(());
            }
            let bit = category::bit(cat).ok_or_else(|| UNKNOWN.to_string())?;
            let target = Target::Category(bit, cat.to_string());
            // A category rule overrides first-argument rules of its commands
            // (so that those can be listed last, as Redis lists them).
            self.rules.retain(|r| match &r.target {
                Target::FirstArg(c, _) => cmd::spec(c.as_bytes()).map_or(true, |s| category::of(s, None) & bit == 0),
                other => *other != target,
            });
            self.rules.push(Rule { allow, target });
            return Ok(());
        }
        let mut parts = name.split('|');
        let base = parts.next().unwrap_or_default();
        let spec = cmd::spec(base.as_bytes()).ok_or_else(|| UNKNOWN.to_string())?;
        match (parts.next(), parts.next()) {
            (None, _) => {
                let cmd = spec.name;
                self.rules.retain(|r| match &r.target {
                    Target::Command(c) | Target::Sub(c, _) | Target::FirstArg(c, _) => *c != cmd,
                    Target::Category(..) => true,
                });
                self.rules.push(Rule { allow, target: Target::Command(cmd) });
                Ok(())
            }
            (Some(sub), None) if cmd::is_container(spec.name) => {
                let sub = cmd::subcommands_of(spec.name)
                    .into_iter()
                    .find(|s| s.eq_ignore_ascii_case(sub))
                    .ok_or_else(|| UNKNOWN.to_string())?;
                let target = Target::Sub(spec.name, sub);
                self.rules.retain(|r| r.target != target);
                if self.allows_command(spec, Some(sub), None) != allow {
                    self.rules.push(Rule { allow, target });
                }
                Ok(())
            }
            (Some(arg), None) if allow && !arg.is_empty() => {
                let target = Target::FirstArg(spec.name, arg.to_string());
                self.rules.retain(|r| r.target != target);
                self.rules.push(Rule { allow, target });
                Ok(())
            }
            (Some(_), Some(_)) if cmd::is_container(spec.name) => {
                Err("Allowing first-arg of a subcommand is not supported".into())
            }
            _ => Err(UNKNOWN.into()),
        }
    }

    /// Whether the command rules allow `spec` (with its subcommand and first argument).
    pub fn allows_command(&self, spec: &Spec, sub: Option<&'static str>, first: Option<&[u8]>) -> bool {
        let cats = category::of(spec, sub);
        let mut allowed = self.all_commands;
        for r in &self.rules {
            let hit = match &r.target {
                Target::Category(bit, _) => cats & bit != 0,
                Target::Command(c) => *c == spec.name,
                Target::Sub(c, s) => *c == spec.name && Some(*s) == sub,
                Target::FirstArg(c, a) => {
                    *c == spec.name && first.is_some_and(|f| f.eq_ignore_ascii_case(a.as_bytes()))
                }
            };
            if hit {
                allowed = r.allow;
            }
        }
        allowed
    }

    /// Whether some key pattern grants `need` on `key`.
    pub fn allows_key(&self, key: &[u8], need: Need) -> bool {
        self.all_keys || self.keys.iter().any(|k| need.granted_by(k.read, k.write) && glob(&k.pattern, key, false))
    }

    /// Whether every key may be read (SORT's BY and GET options need it).
    pub fn reads_all_keys(&self) -> bool {
        self.all_keys || self.keys.iter().any(|k| k.read && k.pattern == b"*")
    }

    /// Whether a channel (or, for PSUBSCRIBE, a pattern taken literally) is allowed.
    pub fn allows_channel(&self, channel: &[u8], is_pattern: bool) -> bool {
        self.all_channels
            || self.channels.iter().any(|p| if is_pattern { p == channel } else { glob(p, channel, false) })
    }

    /// The command rules as ACL GETUSER shows them (`+@all -debug +debug|digest`).
    pub fn describe_commands(&self) -> String {
        let mut out = String::from(if self.all_commands { "+@all" } else { "-@all" });
        let first_args = |r: &&Rule| matches!(r.target, Target::FirstArg(..));
        for r in self.rules.iter().filter(|r| !first_args(r)).chain(self.rules.iter().filter(first_args)) {
            out.push(' ');
            out.push(if r.allow { '+' } else { '-' });
            match &r.target {
                Target::Category(_, name) => {
                    out.push('@');
                    out.push_str(name);
                }
                Target::Command(c) => out.push_str(c),
                Target::Sub(c, s) => out.push_str(&format!("{c}|{s}")),
                Target::FirstArg(c, a) => out.push_str(&format!("{c}|{a}")),
            }
        }
        out
    }

    /// The key patterns as ACL GETUSER shows them (`~*`, `%R~foo ~bar`, or empty).
    pub fn describe_keys(&self) -> String {
        if self.all_keys {
            return "~*".into();
        }
        let words: Vec<String> = self
            .keys
            .iter()
            .map(|k| {
                let flags = match (k.read, k.write) {
                    (true, true) => "~",
                    (true, false) => "%R~",
                    _ => "%W~",
                };
                format!("{flags}{}", String::from_utf8_lossy(&k.pattern))
            })
            .collect();
        words.join(" ")
    }

    /// The channel patterns as ACL GETUSER shows them (`&*`, `&a &b`, or empty).
    pub fn describe_channels(&self) -> String {
        if self.all_channels {
            return "&*".into();
        }
        let words: Vec<String> = self.channels.iter().map(|c| format!("&{}", String::from_utf8_lossy(c))).collect();
        words.join(" ")
    }

    /// The whole selector as modifiers that rebuild it (ACL LIST, ACL SAVE).
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        let keys = self.describe_keys();
        if !keys.is_empty() {
            parts.push(keys);
        }
        if self.all_channels {
            parts.push("&*".into());
        } else {
            parts.push("resetchannels".into());
            let chans = self.describe_channels();
            if !chans.is_empty() {
                parts.push(chans);
            }
        }
        parts.push(self.describe_commands());
        parts.join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sel(ops: &[&str]) -> Selector {
        let mut s = Selector::empty();
        for op in ops {
            s.apply(op.as_bytes()).unwrap();
        }
        s
    }

    #[test]
    fn rules_compact_as_redis_shows_them() {
        assert_eq!(sel(&["+memory|doctor"]).describe_commands(), "-@all +memory|doctor");
        assert_eq!(sel(&["+memory|doctor", "+memory"]).describe_commands(), "-@all +memory");
        assert_eq!(sel(&["+@all", "+client|id"]).describe_commands(), "+@all");
        assert_eq!(sel(&["+@all", "-memory|doctor", "-memory"]).describe_commands(), "+@all -memory");
        assert_eq!(
            sel(&["+@all", "-@string", "+incr", "-debug", "+debug|object"]).describe_commands(),
            "+@all -@string +incr -debug +debug|object"
        );
        assert_eq!(sel(&["+@all", "-@geo"]).describe_commands(), "+@all -@geo");
    }

    #[test]
    fn the_last_matching_rule_decides() {
        let s = sel(&["+@all", "-@string", "+incr", "-select", "+select|0"]);
        let spec = |n: &str| cmd::spec(n.as_bytes()).unwrap();
        assert!(!s.allows_command(spec("get"), None, None));
        assert!(s.allows_command(spec("incr"), None, None));
        assert!(s.allows_command(spec("sadd"), None, None));
        assert!(s.allows_command(spec("select"), None, Some(b"0")));
        assert!(!s.allows_command(spec("select"), None, Some(b"1")));
    }

    #[test]
    fn bad_rules_are_refused() {
        let mut s = Selector::empty();
        assert_eq!(s.apply(b"+nosuchcommand").unwrap_err(), UNKNOWN);
        assert_eq!(s.apply(b"+config|asdf").unwrap_err(), UNKNOWN);
        assert_eq!(s.apply(b"+get|key1|key2").unwrap_err(), UNKNOWN);
        assert!(s.apply(b"+config|get|appendonly").unwrap_err().contains("first-arg of a subcommand"));
        assert_eq!(s.apply(b"+@nosuch").unwrap_err(), UNKNOWN);
        assert_eq!(s.apply(b"bogus").unwrap_err(), SYNTAX);
        s.apply(b"allkeys").unwrap();
        assert!(s.apply(b"~foo").is_err());
        s.apply(b"&*").unwrap();
        assert!(s.apply(b"&foo").is_err());
    }

    #[test]
    fn key_patterns_merge_read_and_write() {
        let s = sel(&["%R~foo", "%W~foo", "%RW~bar", "%R~baz"]);
        assert_eq!(s.describe_keys(), "~foo ~bar %R~baz");
        assert!(s.allows_key(b"baz", Need::Read));
        assert!(!s.allows_key(b"baz", Need::Write));
        assert!(s.allows_key(b"baz", Need::Any));
        assert!(!s.allows_key(b"nothing", Need::Any));
        assert!(s.allows_key(b"foo", Need::ReadWrite));
        let mut bin = Selector::empty();
        bin.apply(b"%R~\xff\x00*").unwrap();
        assert!(bin.allows_key(b"\xff\x00abc", Need::Read));
    }
}
