//! Server settings: defaults, the TOML config file, and what CONFIG GET/SET expose.

use std::net::IpAddr;
use std::path::PathBuf;

use serde::Deserialize;

/// Where `tembo serve` keeps its pool when none is given.
pub const DEFAULT_POOL: &str = "tembo-data/tembo.pool";

/// Everything `tembo serve` can be told.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Address to listen on.
    pub bind: String,
    /// TCP port.
    pub port: u16,
    /// A Unix domain socket to listen on too (Redis's `unixsocket`; empty:
    /// none). A socket left there by an earlier server is replaced.
    pub unixsocket: String,
    /// The permissions of the Unix socket, octal as in Redis's
    /// `unixsocketperm` (e.g. `"700"`; `"0"`: as the umask leaves them).
    pub unixsocketperm: String,
    /// The pool file (created on first run).
    pub pool: PathBuf,
    /// Size of a new pool in bytes (in the file also `"256M"`, `"1G"`…,
    /// as on the command line; so are the other sizes).
    #[serde(deserialize_with = "bytes")]
    pub pool_size: u64,
    /// Largest size the pool may grow to (bytes; 0: the engine's default).
    #[serde(deserialize_with = "bytes")]
    pub pool_max_size: u64,
    /// Durability mode: auto (dax if MAP_SYNC, emulated on tmpfs, else
    /// msync), dax, emulated (survives process crashes only), msync.
    pub mode: String,
    /// Engine of a new pool: cdds, kamino, kamino-dynamic or undo (an
    /// existing pool keeps the engine it was created with).
    pub engine: String,
    /// Password clients must give (AUTH / HELLO AUTH); empty: none.
    pub requirepass: String,
    /// Most simultaneous clients.
    pub maxclients: usize,
    /// Number of databases (SELECT 0..databases-1).
    pub databases: usize,
    /// error, warn, info, debug.
    pub loglevel: String,
    /// Allow listening on a non-loopback address without a password.
    pub allow_unprotected: bool,
    /// Largest bulk argument a client may send (bytes).
    #[serde(deserialize_with = "bytes")]
    pub proto_max_bulk_len: usize,
    /// Largest unparsed input a client may have buffered (bytes).
    #[serde(deserialize_with = "bytes")]
    pub client_query_buffer_limit: usize,
    /// ACL users, one `name modifiers…` string each, as after Redis's
    /// `user` directive (e.g. `"alice on >secret ~app:* +@read"`).
    pub users: Vec<String>,
    /// The ACL file that ACL LOAD reads and ACL SAVE writes; users are
    /// loaded from it at start (empty: none, users come from `users`).
    pub aclfile: String,
    /// Channels a new ACL user may use: `resetchannels` (none) or `allchannels`.
    pub acl_pubsub_default: String,
    /// Most entries ACL LOG keeps.
    pub acllog_max_len: usize,
    /// Where BGSAVE writes its backup (a pool file; empty: beside the pool,
    /// `<pool stem>-backup.pool`).
    pub backup_path: PathBuf,
    /// Most pool bytes the data may take (Redis's `maxmemory`; 0: no limit
    /// but the pool's maximum size).
    #[serde(deserialize_with = "bytes")]
    pub maxmemory: u64,
    /// What to do over `maxmemory`: noeviction (refuse writes that add
    /// data), allkeys-lru, allkeys-lfu, allkeys-random, volatile-lru,
    /// volatile-lfu, volatile-random or volatile-ttl.
    pub maxmemory_policy: String,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            bind: "127.0.0.1".into(),
            port: 6379,
            unixsocket: String::new(),
            unixsocketperm: "0".into(),
            pool: PathBuf::from(DEFAULT_POOL),
            pool_size: 256 << 20,
            pool_max_size: 0,
            mode: "auto".into(),
            engine: "cdds".into(),
            requirepass: String::new(),
            maxclients: 10_000,
            databases: 16,
            loglevel: "info".into(),
            allow_unprotected: false,
            proto_max_bulk_len: 512 << 20,
            client_query_buffer_limit: 1 << 30,
            users: Vec::new(),
            aclfile: String::new(),
            acl_pubsub_default: "resetchannels".into(),
            acllog_max_len: 128,
            backup_path: PathBuf::new(),
            maxmemory: 0,
            maxmemory_policy: "noeviction".into(),
        }
    }
}

impl Config {
    /// The file BGSAVE writes: `backup_path`, or `<pool stem>-backup.pool`
    /// beside the pool.
    pub fn backup_file(&self) -> PathBuf {
        if !self.backup_path.as_os_str().is_empty() {
            return self.backup_path.clone();
        }
        let stem = self.pool.file_stem().map_or_else(|| "tembo".into(), |s| s.to_string_lossy().into_owned());
        self.pool.with_file_name(format!("{stem}-backup.pool"))
    }
}

/// A size in the config file: a number of bytes, or a string with a K, M,
/// G or T suffix as the command-line flags take (`pool_size = "1G"`).
fn bytes<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: TryFrom<u64>,
{
    struct Size;
    impl serde::de::Visitor<'_> for Size {
        type Value = u64;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a size: a number of bytes, or a string such as \"512M\" or \"1G\"")
        }
        fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<u64, E> {
            Ok(n)
        }
        fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<u64, E> {
            u64::try_from(n).map_err(|_| E::custom(format!("invalid size {n}: a size cannot be negative")))
        }
        fn visit_str<E: serde::de::Error>(self, t: &str) -> Result<u64, E> {
            crate::size::parse_bytes(t).map_err(E::custom)
        }
    }
    let n = d.deserialize_any(Size)?;
    T::try_from(n).map_err(|_| serde::de::Error::custom(format!("size {n} is too large")))
}

/// A setting that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The config file cannot be read or parsed.
    #[error("config file {path}: {why}")]
    File {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        why: String,
    },
    /// A value out of range or inconsistent.
    #[error("{0}")]
    Invalid(String),
}

impl Config {
    /// Reads a TOML file (keys as in [`Config`], e.g. `port = 7000`).
    pub fn from_file(path: &std::path::Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::File { path: path.to_path_buf(), why: e.to_string() })?;
        toml::from_str(&text).map_err(|e| ConfigError::File { path: path.to_path_buf(), why: e.to_string() })
    }

    /// The Unix socket's permission bits (`unixsocketperm`, octal; 0: leave
    /// them as created).
    pub fn unixsocket_mode(&self) -> Result<u32, ConfigError> {
        u32::from_str_radix(self.unixsocketperm.trim(), 8).ok().filter(|m| *m <= 0o777).ok_or_else(|| {
            ConfigError::Invalid(format!(
                "unixsocketperm {:?}: give octal permission bits, e.g. 700",
                self.unixsocketperm
            ))
        })
    }

    /// Checks ranges and the protected-mode rule.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.unixsocket_mode()?;
        if self.databases == 0 || self.databases > crate::exec::MAX_DATABASES {
            return Err(ConfigError::Invalid(format!(
                "databases must be between 1 and {}, not {}",
                crate::exec::MAX_DATABASES,
                self.databases
            )));
        }
        self.mode_request()?;
        self.engine()?;
        if self.maxclients == 0 {
            return Err(ConfigError::Invalid("maxclients must be at least 1".into()));
        }
        if crate::maxmemory::Policy::parse(&self.maxmemory_policy).is_none() {
            return Err(ConfigError::Invalid(format!(
                "maxmemory_policy {:?}: {}",
                self.maxmemory_policy,
                crate::maxmemory::Policy::choices()
            )));
        }
        if !["error", "warn", "warning", "info", "notice", "debug", "verbose"].contains(&self.loglevel.as_str()) {
            return Err(ConfigError::Invalid(format!(
                "loglevel must be one of error, warn, info, debug (not {:?})",
                self.loglevel
            )));
        }
        if !["resetchannels", "allchannels"].contains(&self.acl_pubsub_default.as_str()) {
            return Err(ConfigError::Invalid(format!(
                "acl_pubsub_default must be resetchannels or allchannels (not {:?})",
                self.acl_pubsub_default
            )));
        }
        if !self.users.is_empty() && !self.aclfile.is_empty() {
            return Err(ConfigError::Invalid(
                "users and aclfile cannot both be set: keep the users in the ACL file".into(),
            ));
        }
        let acl = crate::acl::Acl::from_config(self).map_err(|e| ConfigError::Invalid(format!("ACL: {e}")))?;
        let ip: IpAddr = self
            .bind
            .parse()
            .map_err(|_| ConfigError::Invalid(format!("bind {:?} is not an IP address", self.bind)))?;
        // Protected: connections must log in (a password for the default
        // user, or the default user turned off by the ACL users).
        if !ip.is_loopback() && acl.default_authenticates() && !self.allow_unprotected {
            return Err(ConfigError::Invalid(format!(
                "refusing to listen on {ip} without a password: anyone who can reach it could read and \
                 change every key. Set requirepass (--requirepass), turn the default user off \
                 (--user \"default off\" with other users), bind to 127.0.0.1, or pass \
                 --allow-unprotected if the network is trusted"
            )));
        }
        Ok(())
    }

    /// The pool mode asked for.
    pub fn mode_request(&self) -> Result<tembo_store::ModeRequest, ConfigError> {
        self.mode.parse().map_err(|e| ConfigError::Invalid(format!("mode: {e}")))
    }

    /// The engine asked for.
    pub fn engine(&self) -> Result<tembo_store::Engine, ConfigError> {
        tembo_store::Engine::from_name(&self.engine).ok_or_else(|| {
            ConfigError::Invalid(format!(
                "engine must be one of cdds, kamino, kamino-dynamic, undo (not {:?})",
                self.engine
            ))
        })
    }

    /// The store options `tembo serve` opens (or creates) its pool with.
    ///
    /// # Errors
    /// A bad `mode` or `engine`.
    pub fn store_options(&self) -> Result<tembo_store::Options, ConfigError> {
        use tembo_store::{Limits, Options};
        Ok(Options {
            size: self.pool_size,
            max_size: (self.pool_max_size > 0).then_some(self.pool_max_size),
            mode: self.mode_request()?,
            engine: self.engine()?,
            // A string is stored with its metadata header: a string of exactly
            // proto-max-bulk-len bytes (Redis's largest) must still fit.
            limits: Limits {
                max_value_bytes: self.proto_max_bulk_len.max(Limits::default().max_value_bytes)
                    + crate::encoding::META_HEADER_MAX,
                ..Limits::default()
            },
            ..Options::default()
        })
    }

    /// The `log` level filter for `loglevel`.
    pub fn level(&self) -> log::LevelFilter {
        match self.loglevel.as_str() {
            "error" => log::LevelFilter::Error,
            "warn" | "warning" => log::LevelFilter::Warn,
            "debug" | "verbose" => log::LevelFilter::Debug,
            _ => log::LevelFilter::Info,
        }
    }
}

#[cfg(test)]
mod acl_config_tests {
    use super::*;

    fn cfg(bind: &str, requirepass: &str, users: &[&str]) -> Config {
        Config {
            bind: bind.into(),
            requirepass: requirepass.into(),
            users: users.iter().map(|u| u.to_string()).collect(),
            ..Config::default()
        }
    }

    #[test]
    fn a_public_address_needs_a_login() {
        assert!(cfg("0.0.0.0", "", &[]).validate().is_err());
        assert!(cfg("0.0.0.0", "pw", &[]).validate().is_ok());
        assert!(cfg("0.0.0.0", "", &["default off", "admin on >pw ~* +@all"]).validate().is_ok());
        assert!(cfg("0.0.0.0", "", &["default on nopass ~* +@all"]).validate().is_err());
        assert!(cfg("127.0.0.1", "", &[]).validate().is_ok());
    }

    #[test]
    fn bad_users_are_refused_before_the_pool_opens() {
        let e = cfg("127.0.0.1", "", &["alice on +nosuchcommand"]).validate().unwrap_err().to_string();
        assert!(e.contains("ACL") && e.contains("nosuchcommand"), "{e}");
        let e = cfg("127.0.0.1", "", &["alice on", "alice off"]).validate().unwrap_err().to_string();
        assert!(e.contains("Duplicate"), "{e}");
        let mut c = cfg("127.0.0.1", "", &[]);
        c.aclfile = "/nonexistent/users.acl".into();
        assert!(c.validate().unwrap_err().to_string().contains("/nonexistent/users.acl"));
    }
}

#[cfg(test)]
mod file_tests {
    use super::*;

    #[test]
    fn sizes_in_the_file_take_numbers_or_suffixed_strings() {
        let c: Config = toml::from_str(
            "pool_size = \"1G\"\npool_max_size = 8589934592\nproto_max_bulk_len = \"64M\"\nclient_query_buffer_limit = \"1.5G\"\n",
        )
        .unwrap();
        assert_eq!((c.pool_size, c.pool_max_size), (1 << 30, 8 << 30));
        assert_eq!((c.proto_max_bulk_len, c.client_query_buffer_limit), (64 << 20, 3 << 29));
        let e = toml::from_str::<Config>("pool_size = \"1X\"\n").unwrap_err().to_string();
        assert!(e.contains("invalid size") && e.contains("1G"), "{e}");
        let e = toml::from_str::<Config>("pool_size = -1\n").unwrap_err().to_string();
        assert!(e.contains("negative"), "{e}");
        let e = toml::from_str::<Config>("pool_size = true\n").unwrap_err().to_string();
        assert!(e.contains("a number of bytes"), "{e}");
    }
}
