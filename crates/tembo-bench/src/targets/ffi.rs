//! The C peers (LMDB, RocksDB, Berkeley DB, PMDK libpmemobj), each a small
//! C file under `c/` that implements the one interface of `c/peer.h` on
//! its library, compiled and linked by `build.rs`. This module is the only
//! foreign binding: one table of function pointers per library, one safe
//! wrapper that owns the handle.

use std::ffi::{c_char, c_int, CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use anyhow::{bail, Result};

use super::Target;

/// An opaque peer handle (`p##handle` in `peer.h`).
#[repr(C)]
pub(super) struct Handle {
    _private: [u8; 0],
}

type OpenFn = unsafe extern "C" fn(*const c_char, c_int, u64, *mut c_char, usize) -> *mut Handle;
type PutFn = unsafe extern "C" fn(*mut Handle, *const u8, usize, *const u8, usize) -> c_int;
type GetFn = unsafe extern "C" fn(*mut Handle, *const u8, usize, *mut u8, usize, *mut usize) -> c_int;
type DelFn = unsafe extern "C" fn(*mut Handle, *const u8, usize) -> c_int;
type ScanFn = unsafe extern "C" fn(*mut Handle, *const u8, usize, usize, *mut usize, *mut u64) -> c_int;
type ErrorFn = unsafe extern "C" fn(*mut Handle) -> *const c_char;
type CloseFn = unsafe extern "C" fn(*mut Handle);

macro_rules! peer_fns {
    ($($lib:ident => $open:ident $put:ident $get:ident $del:ident $scan:ident $error:ident $close:ident;)*) => {
        extern "C" {
            $(
                fn $open(dir: *const c_char, durable: c_int, size_hint: u64, err: *mut c_char, errlen: usize) -> *mut Handle;
                fn $put(h: *mut Handle, k: *const u8, kl: usize, v: *const u8, vl: usize) -> c_int;
                fn $get(h: *mut Handle, k: *const u8, kl: usize, buf: *mut u8, cap: usize, len: *mut usize) -> c_int;
                fn $del(h: *mut Handle, k: *const u8, kl: usize) -> c_int;
                fn $scan(h: *mut Handle, k: *const u8, kl: usize, n: usize, visited: *mut usize, bytes: *mut u64) -> c_int;
                fn $error(h: *mut Handle) -> *const c_char;
                fn $close(h: *mut Handle);
            )*
        }

        impl Library {
            fn table(self) -> Fns {
                match self {
                    $(Library::$lib => Fns { open: $open, put: $put, get: $get, del: $del, scan: $scan, error: $error, close: $close },)*
                }
            }
        }
    };
}

extern "C" {
    fn pmemobj_peer_range(h: *mut Handle, base: *mut *mut u8, len: *mut usize) -> c_int;
}

/// The C libraries behind the peers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Library {
    Lmdb,
    RocksDb,
    Bdb,
    Pmemobj,
}

struct Fns {
    open: OpenFn,
    put: PutFn,
    get: GetFn,
    del: DelFn,
    scan: ScanFn,
    error: ErrorFn,
    close: CloseFn,
}

peer_fns! {
    Lmdb => lmdb_peer_open lmdb_peer_put lmdb_peer_get lmdb_peer_del lmdb_peer_scan lmdb_peer_error lmdb_peer_close;
    RocksDb => rocksdb_peer_open rocksdb_peer_put rocksdb_peer_get rocksdb_peer_del rocksdb_peer_scan rocksdb_peer_error rocksdb_peer_close;
    Bdb => bdb_peer_open bdb_peer_put bdb_peer_get bdb_peer_del bdb_peer_scan bdb_peer_error bdb_peer_close;
    Pmemobj => pmemobj_peer_open pmemobj_peer_put pmemobj_peer_get pmemobj_peer_del pmemobj_peer_scan pmemobj_peer_error pmemobj_peer_close;
}

/// An open peer; the handle is valid from a successful open until drop.
struct CPeer {
    lib: Library,
    fns: Fns,
    handle: *mut Handle,
    durable: bool,
}

pub(super) fn open(lib: Library, dir: &Path, durable: bool, size_hint: u64) -> Result<Box<dyn Target>> {
    let fns = lib.table();
    let cdir = CString::new(dir.as_os_str().as_bytes())?;
    let mut err = vec![0u8; 512];
    // SAFETY: `cdir` is a NUL-terminated string and `err` a writable buffer
    // of the length passed; the peer writes at most that many bytes.
    let handle =
        unsafe { (fns.open)(cdir.as_ptr(), c_int::from(durable), size_hint, err.as_mut_ptr().cast(), err.len()) };
    if handle.is_null() {
        let msg = CStr::from_bytes_until_nul(&err).map(|c| c.to_string_lossy().into_owned()).unwrap_or_default();
        bail!("{lib:?}: cannot open in {}: {msg}", dir.display());
    }
    Ok(Box::new(CPeer { lib, fns, handle, durable }))
}

impl CPeer {
    fn failure(&self, what: &str) -> anyhow::Error {
        // SAFETY: the handle is open; the peer returns a NUL-terminated
        // string it owns, valid until the next call on this handle.
        let msg = unsafe { CStr::from_ptr((self.fns.error)(self.handle)) }.to_string_lossy().into_owned();
        anyhow::anyhow!("{:?} {what}: {msg}", self.lib)
    }
}

impl Target for CPeer {
    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        // SAFETY: open handle; the slices are valid for their lengths.
        let rc = unsafe { (self.fns.put)(self.handle, key.as_ptr(), key.len(), value.as_ptr(), value.len()) };
        if rc != 0 {
            return Err(self.failure("put"));
        }
        Ok(())
    }

    fn get(&mut self, key: &[u8], buf: &mut Vec<u8>) -> Result<bool> {
        loop {
            let cap = buf.capacity();
            let mut len = 0usize;
            // SAFETY: open handle; `buf` has `cap` bytes of capacity, which
            // the peer may write and we then mark initialised up to what it
            // says it wrote (at most `cap`).
            let rc = unsafe { (self.fns.get)(self.handle, key.as_ptr(), key.len(), buf.as_mut_ptr(), cap, &mut len) };
            match rc {
                1 if len <= cap => {
                    // SAFETY: the peer initialised `len <= cap` bytes.
                    unsafe { buf.set_len(len) };
                    return Ok(true);
                }
                1 => buf.reserve(len), // longer than the buffer: grow and ask again
                0 => return Ok(false),
                _ => return Err(self.failure("get")),
            }
        }
    }

    fn delete(&mut self, key: &[u8]) -> Result<bool> {
        // SAFETY: open handle; the slice is valid for its length.
        match unsafe { (self.fns.del)(self.handle, key.as_ptr(), key.len()) } {
            1 => Ok(true),
            0 => Ok(false),
            _ => Err(self.failure("delete")),
        }
    }

    fn scan(&mut self, start: &[u8], n: usize) -> Result<usize> {
        let (mut visited, mut bytes) = (0usize, 0u64);
        // SAFETY: open handle; the slice is valid; the outputs are locals.
        let rc = unsafe { (self.fns.scan)(self.handle, start.as_ptr(), start.len(), n, &mut visited, &mut bytes) };
        if rc != 0 {
            return Err(self.failure("scan"));
        }
        std::hint::black_box(bytes);
        Ok(visited)
    }

    fn mapped(&self) -> Option<(usize, usize)> {
        match self.lib {
            Library::Pmemobj => self.pmemobj_range(),
            _ => None,
        }
    }

    fn mode(&self) -> String {
        let d = if self.durable { "durable" } else { "volatile" };
        match self.lib {
            Library::Lmdb if self.durable => "synced write txn per op".into(),
            Library::Lmdb => "MDB_NOSYNC|MDB_NOMETASYNC".into(),
            Library::RocksDb if self.durable => "WAL sync=true".into(),
            Library::RocksDb => "WAL disabled".into(),
            Library::Bdb if self.durable => "txn per op, log synced".into(),
            Library::Bdb => "txn per op, DB_TXN_NOSYNC".into(),
            Library::Pmemobj => format!("pmemobj tx per op ({d})"),
        }
    }
}

impl CPeer {
    fn pmemobj_range(&self) -> Option<(usize, usize)> {
        let (mut base, mut len) = (std::ptr::null_mut(), 0usize);
        // SAFETY: open pmemobj handle; the outputs are locals.
        let rc = unsafe { pmemobj_peer_range(self.handle, &mut base, &mut len) };
        (rc == 0).then_some((base as usize, len))
    }
}

impl Drop for CPeer {
    fn drop(&mut self) {
        // SAFETY: the handle is open and is not used after this call.
        unsafe { (self.fns.close)(self.handle) };
    }
}
