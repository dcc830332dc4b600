//! The ACL file (`aclfile`, ACL LOAD, ACL SAVE) and `user` lines of the
//! config: one `user <name> <modifiers…>` per line, as ACL LIST prints them.
//!
//! Loading is all or nothing: a file with any bad line changes no user.
//! Saving writes a temporary file beside the real one, syncs it and
//! renames it over, so a crash leaves the old file or the new one.

use std::io::Write;

use super::user::{merge_selector_args, User};

/// Parses one `user name modifiers…` line (split on spaces).
pub fn parse_user_line(line: &str, all_channels: bool) -> Result<User, String> {
    let words: Vec<Vec<u8>> = line.split_whitespace().map(|w| w.as_bytes().to_vec()).collect();
    match words.first() {
        Some(w) if w == b"user" => {}
        _ => return Err("line should start with user keyword".into()),
    }
    let name = words.get(1).ok_or("user name missing")?;
    let name = String::from_utf8_lossy(name).into_owned();
    let mut user = User::new(&name, all_channels);
    for op in merge_selector_args(&words[2..])? {
        user.apply(&op, all_channels)
            .map_err(|why| format!("Error in user declaration '{}': {why}", String::from_utf8_lossy(&op)))?;
    }
    Ok(user)
}

/// Parses the `user` lines of a config or file; duplicate users are refused.
pub fn parse_users<'a>(lines: impl Iterator<Item = &'a str>, all_channels: bool) -> Result<Vec<User>, String> {
    let mut users: Vec<User> = Vec::new();
    for (i, line) in lines.enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let user = parse_user_line(line, all_channels).map_err(|e| format!("line {}: {e}", i + 1))?;
        if users.iter().any(|u| u.name == user.name) {
            return Err(format!("line {}: Duplicate user '{}' found", i + 1, user.name));
        }
        users.push(user);
    }
    Ok(users)
}

/// Reads every user of the file at `path`.
pub fn load(path: &str, all_channels: bool) -> Result<Vec<User>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("Error loading ACLs, opening file '{path}': {e}"))?;
    parse_users(text.lines(), all_channels).map_err(|e| format!("{path}:{e}"))
}

/// Writes `users` to the file at `path`, replacing it atomically.
pub fn save<'a>(path: &str, users: impl Iterator<Item = &'a User>) -> std::io::Result<()> {
    let tmp = format!("{path}.tmp-{}", std::process::id());
    let mut text = String::new();
    for u in users {
        text.push_str(&u.describe());
        text.push('\n');
    }
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn save_then_load_gives_the_same_users() {
        let dir = std::env::temp_dir().join(format!("tembo-acl-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("users.acl").display().to_string();
        let users = parse_users(
            [
                "user default on nopass ~* &* +@all",
                "# a comment",
                "user alice on >secret %R~read* ~rw* resetchannels &news -@all +get +set (~other +@read)",
            ]
            .into_iter(),
            false,
        )
        .unwrap();
        save(&path, users.iter()).unwrap();
        let back = load(&path, false).unwrap();
        assert_eq!(back, users);
        assert!(parse_users(["user a on", "user a off"].into_iter(), false).unwrap_err().contains("Duplicate"));
        assert!(parse_users(["usr a on"].into_iter(), false).is_err());
        assert!(parse_users(["user a +nosuchcommand"].into_iter(), false).is_err());
        assert!(load(&dir.join("missing.acl").display().to_string(), false).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[cfg(test)]
mod roundtrip {
    use proptest::prelude::*;

    use super::*;
    use crate::acl::check_user;
    use crate::cmd;

    /// Modifiers ACL SETUSER takes, valid and not (those that fail are skipped).
    const OPS: &[&str] = &[
        "on",
        "off",
        "nopass",
        "resetpass",
        ">pw1",
        ">pw2",
        "<pw1",
        "#5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8",
        "~app:*",
        "%R~ro:*",
        "%W~wo:*",
        "%RW~rw:*",
        "allkeys",
        "resetkeys",
        "&news",
        "&chat:*",
        "allchannels",
        "resetchannels",
        "+get",
        "-get",
        "+set",
        "+@read",
        "-@write",
        "+@all",
        "-@all",
        "+client|id",
        "-client|kill",
        "+select|0",
        "-@dangerous",
        "+@string",
        "allcommands",
        "nocommands",
        "reset",
        "(~k:* +get)",
        "(%W~w +@write)",
        "clearselectors",
        "skip-sanitize-payload",
        "sanitize-payload",
        "+nosuchcommand",
        "bogus",
    ];

    /// Calls whose verdicts must survive a save and a load.
    const CALLS: &[&[&str]] = &[
        &["get", "app:1"],
        &["get", "ro:1"],
        &["set", "wo:1", "v"],
        &["set", "ro:1", "v"],
        &["incr", "rw:1"],
        &["get", "k:1"],
        &["set", "w", "v"],
        &["client", "id"],
        &["client", "kill", "1.2.3.4:5"],
        &["select", "0"],
        &["select", "1"],
        &["publish", "news", "m"],
        &["publish", "chat:1", "m"],
        &["subscribe", "other"],
        &["flushall"],
    ];

    proptest! {
        #[test]
        fn users_survive_acl_save_and_load(picks in proptest::collection::vec(0..OPS.len(), 0..14), all_channels: bool) {
            let mut user = User::new("u", all_channels);
            for &i in &picks {
                let _ = user.apply(OPS[i].as_bytes(), all_channels);
            }
            let line = user.describe();
            let back = parse_user_line(&line, all_channels).map_err(|e| TestCaseError::fail(format!("{line}: {e}")))?;
            prop_assert_eq!(back.describe(), line.clone());
            prop_assert_eq!((back.enabled, back.nopass, &back.passwords), (user.enabled, user.nopass, &user.passwords));
            for call in CALLS {
                let args: Vec<Vec<u8>> = call.iter().map(|a| a.as_bytes().to_vec()).collect();
                let spec = cmd::spec(&args[0]).expect("a known command");
                prop_assert_eq!(check_user(&back, spec, &args), check_user(&user, spec, &args), "{:?} under {}", call, line);
            }
        }
    }
}
