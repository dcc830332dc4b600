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
