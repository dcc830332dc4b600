//! One ACL user: its state, its passwords (SHA-256 digests only) and its
//! selectors, changed by ACL SETUSER's modifiers.

use sha2::{Digest, Sha256};

use super::selector::{RuleError, Selector, SYNTAX};

/// A user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    /// The name.
    pub name: String,
    /// `on` / `off`.
    pub enabled: bool,
    /// Any password is accepted.
    pub nopass: bool,
    /// `sanitize-payload` (true) or `skip-sanitize-payload` (false), when set.
    pub sanitize: Option<bool>,
    /// Lower-case hex SHA-256 digests of the passwords.
    pub passwords: Vec<String>,
    /// The root selector.
    pub root: Selector,
    /// Added selectors (`(…)`).
    pub selectors: Vec<Selector>,
}

/// The lower-case hex SHA-256 digest of a password.
pub fn hash_password(pass: &[u8]) -> String {
    Sha256::digest(pass).iter().map(|b| format!("{b:02x}")).collect()
}

fn valid_hash(h: &[u8]) -> bool {
    h.len() == 64 && h.iter().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c))
}

impl User {
    /// A new user as ACL SETUSER makes it: off, no password, no
    /// permissions; all channels if `acl-pubsub-default` is `allchannels`.
    pub fn new(name: &str, all_channels: bool) -> User {
        let mut root = Selector::empty();
        if all_channels {
            root.apply(b"allchannels").expect("a valid modifier");
        }
        User {
            name: name.to_string(),
            enabled: false,
            nopass: false,
            sanitize: None,
            passwords: Vec::new(),
            root,
            selectors: Vec::new(),
        }
    }

    /// The `default` user of a server with password `requirepass` (none if empty).
    pub fn default_user(requirepass: &str) -> User {
        let mut u = User::new("default", true);
        u.enabled = true;
        u.sanitize = Some(true);
        u.root = Selector::everything();
        u.set_requirepass(requirepass);
        u
    }

    /// CONFIG SET requirepass: the default user's one password, or none.
    pub fn set_requirepass(&mut self, pass: &str) {
        self.passwords.clear();
        self.nopass = pass.is_empty();
        if !pass.is_empty() {
            self.passwords.push(hash_password(pass.as_bytes()));
        }
    }

    /// Whether `pass` opens this user (it must also be enabled).
    pub fn password_ok(&self, pass: &[u8]) -> bool {
        self.enabled && (self.nopass || self.passwords.contains(&hash_password(pass)))
    }

    /// Applies one ACL SETUSER modifier; `(…)` adds a selector.
    pub fn apply(&mut self, op: &[u8], all_channels: bool) -> Result<(), RuleError> {
        if op.first() == Some(&b'(') && op.last() == Some(&b')') && op.len() >= 2 {
            let mut sel = Selector::empty();
            if all_channels {
                sel.apply(b"allchannels")?;
            }
            for word in op[1..op.len() - 1].split(|&c| c == b' ').filter(|w| !w.is_empty()) {
                sel.apply(word)?;
            }
            self.selectors.push(sel);
            return Ok(());
        }
        let lower = String::from_utf8_lossy(op).to_ascii_lowercase();
        match lower.as_str() {
            "on" => self.enabled = true,
            "off" => self.enabled = false,
            "nopass" => {
                self.nopass = true;
                self.passwords.clear();
            }
            "resetpass" => {
                self.nopass = false;
                self.passwords.clear();
            }
            "skip-sanitize-payload" => self.sanitize = Some(false),
            "sanitize-payload" => self.sanitize = Some(true),
            "clearselectors" => self.selectors.clear(),
            "reset" => {
                let name = std::mem::take(&mut self.name);
                *self = User::new(&name, all_channels);
                self.sanitize = Some(true);
            }
            _ => match op.first() {
                Some(b'>') => {
                    let h = hash_password(&op[1..]);
                    if !self.passwords.contains(&h) {
                        self.passwords.push(h);
                    }
                    self.nopass = false;
                }
                Some(b'#') => {
                    if !valid_hash(&op[1..]) {
                        return Err(
                            "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters"
                                .into(),
                        );
                    }
                    let h = String::from_utf8_lossy(&op[1..]).into_owned();
                    if !self.passwords.contains(&h) {
                        self.passwords.push(h);
                    }
                    self.nopass = false;
                }
                Some(b'<') | Some(b'!') => {
                    let h = if op[0] == b'<' {
                        hash_password(&op[1..])
                    } else {
                        if !valid_hash(&op[1..]) {
                            return Err("The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters".into());
                        }
                        String::from_utf8_lossy(&op[1..]).into_owned()
                    };
                    let before = self.passwords.len();
                    self.passwords.retain(|p| *p != h);
                    if self.passwords.len() == before {
                        return Err("The password you are trying to remove from the user does not exist".into());
                    }
                }
                Some(b'(') => return Err(SYNTAX.into()),
                _ => self.root.apply(op)?,
            },
        }
        Ok(())
    }

    /// The flags ACL GETUSER lists.
    pub fn flags(&self) -> Vec<&'static str> {
        let mut f = vec![if self.enabled { "on" } else { "off" }];
        if self.nopass {
            f.push("nopass");
        }
        match self.sanitize {
            Some(true) => f.push("sanitize-payload"),
            Some(false) => f.push("skip-sanitize-payload"),
            None => {}
        }
        f
    }

    /// The user as one line of modifiers (ACL LIST, and the ACL file).
    pub fn describe(&self) -> String {
        let mut parts = vec![format!("user {}", self.name)];
        parts.extend(self.flags().iter().map(|f| f.to_string()));
        parts.extend(self.passwords.iter().map(|p| format!("#{p}")));
        parts.push(self.root.describe());
        parts.extend(self.selectors.iter().map(|s| format!("({})", s.describe())));
        parts.join(" ")
    }
}

/// Joins ACL SETUSER's arguments so that a selector split over several
/// (`(~key`, `+get`, `)`) becomes one modifier.
pub fn merge_selector_args(args: &[Vec<u8>]) -> Result<Vec<Vec<u8>>, String> {
    let mut out = Vec::new();
    let mut open: Option<Vec<u8>> = None;
    for a in args {
        match open.as_mut() {
            Some(acc) => {
                acc.push(b' ');
                acc.extend_from_slice(a);
                if a.last() == Some(&b')') {
                    out.push(open.take().expect("open selector"));
                }
            }
            None if a.first() == Some(&b'(') && a.last() != Some(&b')') => open = Some(a.clone()),
            None => out.push(a.clone()),
        }
    }
    if let Some(acc) = open {
        return Err(format!("Unmatched parenthesis in acl selector starting at '{}'.", String::from_utf8_lossy(&acc)));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_and_flags() {
        let mut u = User::new("alice", false);
        assert!(!u.password_ok(b"pw"), "a new user is off");
        u.apply(b"on", false).unwrap();
        u.apply(b">pw", false).unwrap();
        assert!(u.password_ok(b"pw") && !u.password_ok(b"other"));
        assert_eq!(u.passwords, vec![hash_password(b"pw")]);
        assert!(u.apply(b"<nope", false).is_err());
        u.apply(b"<pw", false).unwrap();
        assert!(!u.password_ok(b"pw"));
        assert!(u.apply(b"#abc", false).is_err());
        u.apply(b"nopass", false).unwrap();
        assert!(u.password_ok(b"anything"));
        assert_eq!(u.describe(), "user alice on nopass resetchannels -@all");
    }

    #[test]
    fn selectors_merge_across_arguments() {
        let args: Vec<Vec<u8>> =
            ["(~key5", "+get", ")", "on", "(~k +get)"].iter().map(|s| s.as_bytes().to_vec()).collect();
        let merged = merge_selector_args(&args).unwrap();
        assert_eq!(merged, vec![b"(~key5 +get )".to_vec(), b"on".to_vec(), b"(~k +get)".to_vec()]);
        assert!(merge_selector_args(&[b"(~k".to_vec()]).is_err());
        let mut u = User::new("bob", false);
        for m in &merged {
            u.apply(m, false).unwrap();
        }
        assert_eq!(u.selectors.len(), 2);
        assert_eq!(u.selectors[0].describe_keys(), "~key5");
        assert_eq!(
            u.describe(),
            "user bob on resetchannels -@all (~key5 resetchannels -@all +get) (~k resetchannels -@all +get)"
        );
    }
}
