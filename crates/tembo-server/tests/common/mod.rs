//! What the restart tests share: a pool in a directory of its own, opened
//! as a [`Session`] and reopened after the first one is dropped.

use std::path::PathBuf;
use std::sync::Arc;

use tembo_server::Session;
use tembo_store::{Db, Options};

/// A pool file in a fresh directory named after `name` and this process;
/// the directory is removed when this is dropped.
pub struct TestPool {
    dir: PathBuf,
    path: PathBuf,
    opts: Options,
}

impl TestPool {
    pub fn new(name: &str) -> TestPool {
        let dir = std::env::temp_dir().join(format!("tembo-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TestPool { path: dir.join("p.pool"), dir, opts: Options::with_size(32 << 20) }
    }

    /// A session on a newly created pool.
    pub fn create(&self) -> Session {
        Session::new(Arc::new(Db::create(&self.path, &self.opts).unwrap())).unwrap()
    }

    /// A session on the pool reopened.
    pub fn reopen(&self) -> Session {
        Session::new(Arc::new(Db::open(&self.path, &self.opts).unwrap())).unwrap()
    }
}

impl Drop for TestPool {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
