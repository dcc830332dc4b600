//! Redis 7 key specifications: where a command's key arguments begin, how
//! many follow, and what the command does to each key (`RW access delete`…).
//!
//! The specs themselves are generated from Redis 7.0.15's command JSON
//! ([`super::key_specs`]); this module interprets them as redis-server's
//! `getKeysUsingKeySpecs` does, for COMMAND INFO (which lists them) and
//! COMMAND GETKEYSANDFLAGS (which follows them). Where Redis falls back to a
//! command's own key finder (a spec marked incomplete, unknown or with
//! variable flags), so does this: the keys come from [`super::command_keys`]
//! and the flags from the rules redis-server's finders apply.

use super::args::{int, is};
use super::key_specs::{KEY_SPECS, SUBCOMMAND_INFO, TIPS};
use super::Spec;
use crate::resp::Reply;

pub const K_RO: u16 = 1;
pub const K_RW: u16 = 1 << 1;
pub const K_OW: u16 = 1 << 2;
pub const K_RM: u16 = 1 << 3;
pub const K_ACCESS: u16 = 1 << 4;
pub const K_UPDATE: u16 = 1 << 5;
pub const K_INSERT: u16 = 1 << 6;
pub const K_DELETE: u16 = 1 << 7;
pub const K_NOT_KEY: u16 = 1 << 8;
pub const K_INCOMPLETE: u16 = 1 << 9;
pub const K_VARIABLE_FLAGS: u16 = 1 << 10;

/// Flag names in the order redis-server replies with them.
const FLAG_NAMES: &[(u16, &str)] = &[
    (K_RO, "RO"),
    (K_RW, "RW"),
    (K_OW, "OW"),
    (K_RM, "RM"),
    (K_ACCESS, "access"),
    (K_UPDATE, "update"),
    (K_INSERT, "insert"),
    (K_DELETE, "delete"),
    (K_NOT_KEY, "not_key"),
    (K_INCOMPLETE, "incomplete"),
    (K_VARIABLE_FLAGS, "variable_flags"),
];

/// Where the search for a spec's keys begins.
#[derive(Clone, Copy, Debug)]
pub enum Begin {
    /// At this argument.
    Index(i32),
    /// After this keyword, searched from this argument (from the end when negative).
    Keyword(&'static str, i32),
    /// Only the command knows.
    Unknown,
}

/// How the keys are found from there.
#[derive(Clone, Copy, Debug)]
pub enum Find {
    /// `lastkey` (from the end when negative), every `step`-th argument;
    /// with `limit`, a 1/limit share of the rest.
    Range { lastkey: i32, step: i32, limit: i32 },
    /// The argument at `keynumidx` counts the keys; they start `firstkey` after the begin.
    Keynum { keynumidx: i32, firstkey: i32, step: i32 },
    /// Only the command knows.
    Unknown,
}

/// One key specification of a command.
#[derive(Clone, Copy, Debug)]
pub struct KeySpec {
    pub flags: u16,
    pub begin: Begin,
    pub find: Find,
    /// Redis's note on the spec (empty when it has none).
    pub notes: &'static str,
}

/// The key specs of a command or `container|subcommand`.
pub fn specs_of(full_name: &str) -> &'static [KeySpec] {
    KEY_SPECS.binary_search_by(|(n, _)| n.cmp(&full_name)).map_or(&[], |i| KEY_SPECS[i].1)
}

/// A subcommand's (name, arity, flags) as redis-server lists them.
pub fn subcommand_info(full_name: &str) -> Option<(&'static str, i32, &'static [&'static str])> {
    SUBCOMMAND_INFO.binary_search_by(|(n, _, _)| n.cmp(&full_name)).ok().map(|i| SUBCOMMAND_INFO[i])
}

/// The (first key, last key, step) that COMMAND INFO derives from a single
/// index-and-range key spec, as redis-server's legacy range does; (0, 0, 0)
/// otherwise (every container subcommand has at most one spec).
pub fn legacy_range(full_name: &str) -> (i64, i64, i64) {
    match specs_of(full_name) {
        [KeySpec { begin: Begin::Index(pos), find: Find::Range { lastkey, step, .. }, .. }] => {
            let last = if *lastkey < 0 { i64::from(*lastkey) } else { i64::from(pos + lastkey) };
            (i64::from(*pos), last, i64::from(*step))
        }
        _ => (0, 0, 0),
    }
}

/// COMMAND INFO's tips element: what a command's reply or routing is like
/// (`nondeterministic_output`, `request_policy:all_shards`, ...).
pub fn tips_reply(full_name: &str) -> Reply {
    // redis-server writes tips, key specs and subcommands as RESP3 sets.
    let tips = TIPS.binary_search_by(|(n, _)| n.cmp(&full_name)).map_or(&[][..], |i| TIPS[i].1);
    Reply::Set(tips.iter().map(|t| Reply::bulk(*t)).collect())
}

/// A key-flags set, as redis-server writes it.
pub fn flags_reply(flags: u16) -> Reply {
    Reply::Set(
        FLAG_NAMES.iter().filter(|(bit, _)| flags & bit != 0).map(|(_, n)| Reply::Simple(n.to_string())).collect(),
    )
}

fn map(pairs: Vec<(&str, Reply)>) -> Reply {
    Reply::Map(pairs.into_iter().map(|(k, v)| (Reply::bulk(k), v)).collect())
}

/// COMMAND INFO's key-specifications element.
pub fn specs_reply(full_name: &str) -> Reply {
    Reply::Set(
        specs_of(full_name)
            .iter()
            .map(|s| {
                let mut m = Vec::new();
                if !s.notes.is_empty() {
                    m.push(("notes", Reply::bulk(s.notes)));
                }
                m.push(("flags", flags_reply(s.flags)));
                let begin = match s.begin {
                    Begin::Index(pos) => map(vec![
                        ("type", Reply::bulk("index")),
                        ("spec", map(vec![("index", Reply::Int(pos.into()))])),
                    ]),
                    Begin::Keyword(word, from) => map(vec![
                        ("type", Reply::bulk("keyword")),
                        ("spec", map(vec![("keyword", Reply::bulk(word)), ("startfrom", Reply::Int(from.into()))])),
                    ]),
                    Begin::Unknown => map(vec![("type", Reply::bulk("unknown")), ("spec", map(vec![]))]),
                };
                m.push(("begin_search", begin));
                let find = match s.find {
                    Find::Range { lastkey, step, limit } => map(vec![
                        ("type", Reply::bulk("range")),
                        (
                            "spec",
                            map(vec![
                                ("lastkey", Reply::Int(lastkey.into())),
                                ("keystep", Reply::Int(step.into())),
                                ("limit", Reply::Int(limit.into())),
                            ]),
                        ),
                    ]),
                    Find::Keynum { keynumidx, firstkey, step } => map(vec![
                        ("type", Reply::bulk("keynum")),
                        (
                            "spec",
                            map(vec![
                                ("keynumidx", Reply::Int(keynumidx.into())),
                                ("firstkey", Reply::Int(firstkey.into())),
                                ("keystep", Reply::Int(step.into())),
                            ]),
                        ),
                    ]),
                    Find::Unknown => map(vec![("type", Reply::bulk("unknown")), ("spec", map(vec![]))]),
                };
                m.push(("find_keys", find));
                map(m)
            })
            .collect(),
    )
}

/// The keys of a call (`args[0]` the command name) by its specs, as
/// (argument position, flags); `None` where a spec cannot be followed (an
/// unknown or incomplete spec, a bad key count, keys past the end), which
/// is when redis-server asks the command itself.
fn by_specs(specs: &[KeySpec], args: &[Vec<u8>], negative_arity: bool) -> Option<Vec<(usize, u16)>> {
    let argc = args.len() as i64;
    let mut keys = Vec::new();
    for spec in specs.iter().filter(|s| s.flags & K_NOT_KEY == 0) {
        let first = match spec.begin {
            Begin::Index(pos) => i64::from(pos),
            Begin::Keyword(word, from) => {
                let from = i64::from(from);
                let (start, end) = if from > 0 { (from, argc - 1) } else { (argc + from, 1) };
                let mut i = start;
                let mut found = None;
                while i >= 1 && i < argc {
                    if is(&args[i as usize], word) {
                        found = Some(i + 1);
                        break;
                    }
                    if i == end {
                        break;
                    }
                    i += if start <= end { 1 } else { -1 };
                }
                match found {
                    Some(first) => first,
                    None => continue,
                }
            }
            Begin::Unknown => return None,
        };
        let (first, last, step) = match spec.find {
            Find::Range { lastkey, step, limit } => {
                let lastkey = i64::from(lastkey);
                let last = if lastkey >= 0 {
                    first + lastkey
                } else if limit == 0 {
                    argc + lastkey
                } else {
                    first + ((argc - first) / i64::from(limit) + lastkey)
                };
                (first, last, i64::from(step))
            }
            Find::Keynum { keynumidx, firstkey, step } => {
                let at = first + i64::from(keynumidx);
                if i64::from(keynumidx) >= argc - first || at < 0 {
                    return None;
                }
                let n = int(&args[at as usize]).ok().filter(|n| *n >= 0)?;
                let first = first + i64::from(firstkey);
                (first, first + n - 1, i64::from(step))
            }
            Find::Unknown => return None,
        };
        if last >= argc || last < first || first >= argc {
            return None;
        }
        let mut i = first;
        while i <= last {
            if i >= argc {
                if negative_arity {
                    i += step.max(1);
                    continue;
                }
                return None;
            }
            keys.push((i as usize, spec.flags));
            i += step.max(1);
        }
        if spec.flags & K_INCOMPLETE != 0 {
            return None;
        }
    }
    Some(keys)
}

/// What a call does to each of its keys: COMMAND GETKEYSANDFLAGS's answer
/// as (key, flags). `None` when the arguments name no keys that can be
/// found (a bad key count).
pub fn keys_and_flags<'a>(spec: &Spec, full_name: &str, args: &'a [Vec<u8>]) -> Option<Vec<(&'a [u8], u16)>> {
    let specs = specs_of(full_name);
    let trusted =
        specs.iter().any(|s| s.flags & K_NOT_KEY == 0) && specs.iter().all(|s| s.flags & K_VARIABLE_FLAGS == 0);
    if trusted {
        if let Some(found) = by_specs(specs, args, spec.arity < 0) {
            return Some(found.into_iter().map(|(at, flags)| (args[at].as_slice(), flags)).collect());
        }
    }
    // The command's own finder, with the flags redis-server's finders give.
    let keys = super::command_keys(spec, args)?;
    let first = specs.first().map_or(0, |s| s.flags & !(K_INCOMPLETE | K_VARIABLE_FLAGS));
    Some(
        keys.into_iter()
            .enumerate()
            .map(|(i, key)| {
                let flags = match spec.name {
                    "set" if args.iter().skip(3).any(|a| is(a, "get")) => K_RW | K_ACCESS | K_UPDATE,
                    "set" => K_OW | K_UPDATE,
                    "bitfield" if bitfield_read_only(args) => K_RO | K_ACCESS,
                    "bitfield" => K_RW | K_ACCESS | K_UPDATE,
                    "sort" | "sort_ro" if i == 0 => K_RO | K_ACCESS,
                    "sort" => K_OW | K_UPDATE,
                    _ => first,
                };
                (key, flags)
            })
            .collect(),
    )
}

/// Whether a BITFIELD call only reads (GET and OVERFLOW only), judged as
/// redis-server's key finder does: anything it cannot parse counts as a write.
fn bitfield_read_only(args: &[Vec<u8>]) -> bool {
    let mut i = 2;
    while i < args.len() {
        let rest = args.len() - i - 1;
        if is(&args[i], "get") && rest >= 2 {
            i += 3;
        } else if is(&args[i], "overflow") && rest >= 1 {
            i += 2;
        } else {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(words: &[&str]) -> Vec<Vec<u8>> {
        words.iter().map(|w| w.as_bytes().to_vec()).collect()
    }

    fn flags_of(words: &[&str]) -> Option<Vec<(String, Vec<&'static str>)>> {
        let args = call(words);
        let spec = super::super::spec(&args[0]).expect("known command");
        let full = super::super::full_name(spec, &args);
        keys_and_flags(spec, full, &args).map(|found| {
            found
                .into_iter()
                .map(|(k, f)| {
                    let names = FLAG_NAMES.iter().filter(|(b, _)| f & b != 0).map(|(_, n)| *n).collect();
                    (String::from_utf8_lossy(k).into_owned(), names)
                })
                .collect()
        })
    }

    #[test]
    fn the_table_is_sorted_so_lookups_find_every_command() {
        assert!(KEY_SPECS.windows(2).all(|w| w[0].0 < w[1].0));
        assert!(TIPS.windows(2).all(|w| w[0].0 < w[1].0));
        assert!(SUBCOMMAND_INFO.windows(2).all(|w| w[0].0 < w[1].0));
        for (name, specs) in KEY_SPECS {
            assert_eq!(specs_of(name).len(), specs.len(), "{name}");
        }
        assert!(specs_of("ping").is_empty());
    }

    #[test]
    fn keys_follow_index_keyword_and_keynum_specs() {
        let lmove = flags_of(&["lmove", "a", "b", "left", "left"]).unwrap();
        assert_eq!(lmove, vec![("a".into(), vec!["RW", "access", "delete"]), ("b".into(), vec!["RW", "insert"])]);
        let xread = flags_of(&["xread", "count", "2", "streams", "s1", "s2", "0", "0"]).unwrap();
        assert_eq!(xread, vec![("s1".into(), vec!["RO", "access"]), ("s2".into(), vec!["RO", "access"])]);
        let zunionstore = flags_of(&["zunionstore", "d", "2", "x", "y", "weights", "1", "2"]).unwrap();
        let keys: Vec<&str> = zunionstore.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["d", "x", "y"]);
        assert_eq!(zunionstore[0].1, vec!["OW", "update"]);
        let mset = flags_of(&["mset", "a", "1", "b", "2"]).unwrap();
        assert_eq!(mset.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(), ["a", "b"]);
        // A key count past the arguments names no keys.
        assert!(flags_of(&["eval", "return 1", "3", "a"]).is_none());
    }

    #[test]
    fn commands_with_variable_flags_ask_the_arguments() {
        assert_eq!(flags_of(&["set", "k", "v"]).unwrap()[0].1, vec!["OW", "update"]);
        assert_eq!(flags_of(&["set", "k", "v", "get"]).unwrap()[0].1, vec!["RW", "access", "update"]);
        assert_eq!(flags_of(&["bitfield", "k", "get", "u8", "0"]).unwrap()[0].1, vec!["RO", "access"]);
        assert_eq!(flags_of(&["bitfield", "k", "set", "u8", "0", "1"]).unwrap()[0].1, vec!["RW", "access", "update"]);
        let sort = flags_of(&["sort", "src", "store", "dst"]).unwrap();
        assert_eq!(sort, vec![("src".into(), vec!["RO", "access"]), ("dst".into(), vec!["OW", "update"])]);
    }
}
