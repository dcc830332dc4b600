//! Big strings stored in chunks, and strings edited in place.
//!
//! Records are immutable in the engine's multi-version tree, so a string
//! kept in its metadata record is rewritten whole by every APPEND,
//! SETRANGE, SETBIT or BITFIELD: O(length) per edit, ~0.3 ms for a 1 MB
//! bitmap where Redis takes a few microseconds. So a string over
//! [`CHUNKED_MIN`] that such an edit changes moves into chunks: a short
//! metadata record (kind byte 7: expiry, version, length) and the bytes
//! as sub-keys of [`CHUNK`] bytes, `S db len(key) key version index`,
//! scoped by a version exactly as a collection's elements are, so that
//! deleting or overwriting it is O(1) and the background reclaimer
//! removes the chunks. Its later edits rewrite only the chunks they touch
//! and the metadata record.
//!
//! Why only once edited: a string written and read whole (SET, GET — by
//! far the common case) costs one copy each way in its record, and more
//! in chunks (one lookup and one more copy per chunk: SET+GET of 1 MB cost
//! 600 µs of server CPU chunked against 375 µs in a record). A command
//! that writes a string whole (SET, RENAME, COPY, RESTORE…) stores it in
//! its record again; a change of its expiry alone (EXPIRE, PERSIST, GETEX)
//! rewrites only the metadata record and keeps the chunks.
//!
//! What a reader relies on: chunk `i` holds bytes `i * CHUNK ..` of the
//! string; a chunk that is missing, or shorter than the string now
//! covers, reads as zeros. Strings only grow in place (APPEND, SETRANGE
//! and SETBIT past the end zero-fill), so bytes never stored are zeros;
//! any other change writes the string whole.

use crate::cmd::CmdError;
use crate::encoding::{sub_key, Kind, Meta, STRING_AT};
use crate::exec::Ctx;
use crate::keyspace::Res;

/// Bytes per chunk.
pub const CHUNK: u64 = 64 * 1024;
/// Strings longer than this are stored in chunks.
pub const CHUNKED_MIN: usize = 256 * 1024;

fn chunk_key(db: u8, key: &[u8], version: u64, index: u64) -> Vec<u8> {
    sub_key(db, key, version, &index.to_be_bytes())
}

/// A string being edited in place: its bytes `lo .. lo + window len`
/// (zeros past its old end), from [`Ctx::edit_string`], written back by
/// [`Ctx::finish_string_edit`].
#[derive(Debug)]
pub struct StringEdit {
    old: Option<Meta>,
    /// The string's length before the edit.
    pub len: u64,
    lo: u64,
    /// A string kept in its record: the whole record (the value from
    /// `STRING_AT`, with `lo` 0); a chunked one: the window alone.
    buf: Vec<u8>,
    at: usize,
}

impl StringEdit {
    /// Whether the string existed before the edit.
    pub fn existed(&self) -> bool {
        self.old.is_some()
    }

    /// Where the window starts in the string.
    pub fn lo(&self) -> u64 {
        self.lo
    }

    /// The window's bytes.
    pub fn bytes(&mut self) -> &mut [u8] {
        &mut self.buf[self.at..]
    }

    /// The key's expiry (0: none, or a new key).
    pub fn expire_at(&self) -> u64 {
        self.old.as_ref().map_or(0, |m| m.expire_at)
    }
}

/// Redis's default proto-max-bulk-len: a reply of up to this many bytes is
/// built whatever the setting (a lowered setting keeps older strings
/// readable).
const DEFAULT_MAX_BULK: usize = 512 << 20;

fn no_memory() -> CmdError {
    CmdError::err("out of memory for a string")
}

/// A zero-filled buffer of `n` bytes, or an error rather than an abort.
fn zeroed(n: usize) -> Res<Vec<u8>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| no_memory())?;
    v.resize(n, 0);
    Ok(v)
}

impl Ctx<'_> {
    /// Stores `value` as the string at `key` (which had `old`), whole in
    /// its metadata record (a chunked old string's chunks go to the
    /// reclaimer with its version).
    pub fn write_string(&mut self, key: &[u8], old: Option<&Meta>, expire_at: u64, value: &[u8]) -> Res<()> {
        let new = Meta { expire_at, ..Meta::string(Vec::new()) };
        self.write_meta_record(key, old, &new, Meta::encode_string(expire_at, value))
    }

    /// Stores `value` as the string at `key` in chunks under a fresh version.
    fn write_chunked(&mut self, key: &[u8], old: Option<&Meta>, expire_at: u64, value: &[u8]) -> Res<()> {
        let version = self.st.store.new_version();
        self.put_chunks(key, version, 0, value)?;
        self.write_chunked_head(key, old, expire_at, version, value.len() as u64)
    }

    /// Stores `bytes` as the chunks from byte `from` (a multiple of
    /// [`CHUNK`]) of the string at `key` under `version`.
    fn put_chunks(&mut self, key: &[u8], version: u64, from: u64, bytes: &[u8]) -> Res<()> {
        let db = self.db();
        for (i, c) in bytes.chunks(CHUNK as usize).enumerate() {
            self.st.store.put(chunk_key(db, key, version, from / CHUNK + i as u64), c.to_vec())?;
        }
        Ok(())
    }

    pub(crate) fn write_chunked_head(
        &mut self,
        key: &[u8],
        old: Option<&Meta>,
        expire_at: u64,
        version: u64,
        len: u64,
    ) -> Res<()> {
        let new = Meta { kind: Kind::String, expire_at, version, size: len, head: 0, value: Vec::new() };
        self.write_meta_record(key, old, &new, Meta::encode_chunked(expire_at, version, len))
    }

    /// Bytes `from .. from + n` of the chunked string at `key` (fewer past
    /// its end; see the module docs for what reads as zeros).
    pub fn chunked_part(&self, key: &[u8], meta: &Meta, from: u64, n: usize) -> Res<Vec<u8>> {
        let end = meta.size.min(from.saturating_add(n as u64));
        if from >= end {
            return Ok(Vec::new());
        }
        // A damaged length (hundreds of GiB) must be an error, not zeros
        // filling memory until the kernel kills the server. No string
        // longer than a client may send (proto-max-bulk-len, at least
        // Redis's default) or than the pool may grow to is read whole.
        let pool_max = self.st.store.db().pool().max_size();
        let most = (self.st.shared.max_bulk().max(DEFAULT_MAX_BULK) as u64).max(pool_max);
        if end - from > most {
            return Err(CmdError::err(format!(
                "the string is {} bytes, more than proto-max-bulk-len ({}) or the pool's maximum size \
                 ({pool_max}) lets a reply hold; raise proto-max-bulk-len with CONFIG SET to read it, or, \
                 if `tembo pool check` finds the pool damaged, DEL removes the key",
                meta.size,
                self.st.shared.max_bulk()
            )));
        }
        let n = usize::try_from(end - from).map_err(|_| no_memory())?;
        let mut out = Vec::new();
        out.try_reserve_exact(n).map_err(|_| no_memory())?;
        let db = self.db();
        let mut part = Vec::new();
        for i in from / CHUNK..=(end - 1) / CHUNK {
            let base = i * CHUNK;
            let (lo, hi) = (from.max(base) - base, end.min(base + CHUNK) - base);
            let key = chunk_key(db, key, meta.version, i);
            if self.st.store.get_range_into(&key, lo, (hi - lo) as usize, &mut part)?.is_some() {
                // Zeros for what was never stored before this chunk.
                out.resize((base + lo - from) as usize, 0);
                out.extend_from_slice(&part);
            }
        }
        out.resize(n, 0);
        Ok(out)
    }

    /// Opens the string at `key` for an edit of its bytes `span(len).0 ..
    /// span(len).1` (`len`: its length; the end may lie past it). A string
    /// kept in its record is read whole, once, into a buffer with room
    /// for the edit; a chunked one only in the chunks the span touches. A
    /// key of another type is a WRONGTYPE error; a missing one edits an
    /// empty string.
    pub fn edit_string(&mut self, key: &[u8], span: impl FnOnce(u64) -> (u64, u64)) -> Res<StringEdit> {
        let Some((meta, record_len)) = self.lookup_record(key)? else {
            let (_, hi) = span(0);
            let mut buf = zeroed(STRING_AT + usize::try_from(hi).map_err(|_| no_memory())?)?;
            buf[..STRING_AT].copy_from_slice(&Meta::string_header(0));
            return Ok(StringEdit { old: None, len: 0, lo: 0, buf, at: STRING_AT });
        };
        if meta.kind != Kind::String {
            return Err(CmdError::wrongtype());
        }
        if meta.is_chunked() {
            let len = meta.size;
            let (lo, hi) = span(len);
            let lo = lo / CHUNK * CHUNK;
            // Whole chunks, up to the string's new end (empty when a
            // read-only span lies past it).
            let hi = hi.div_ceil(CHUNK).saturating_mul(CHUNK).min(len.max(hi)).max(lo);
            let mut buf = self.chunked_part(key, &meta, lo, (hi - lo) as usize)?;
            buf.resize((hi - lo) as usize, 0);
            return Ok(StringEdit { old: Some(meta), len, lo, buf, at: 0 });
        }
        let len = record_len.saturating_sub(STRING_AT as u64);
        let (_, hi) = span(len);
        let want = STRING_AT + usize::try_from(len.max(hi)).map_err(|_| no_memory())?;
        let mut buf = Vec::new();
        buf.try_reserve_exact(want).map_err(|_| no_memory())?;
        let mk = self.meta_key_of(key);
        match self.st.store.get_range_into(&mk, 0, usize::MAX, &mut buf)? {
            Some(_) if buf.len() >= STRING_AT => {}
            _ => return Err(CmdError::corrupt(key)),
        }
        buf.resize(want, 0);
        Ok(StringEdit { old: Some(meta), len, lo: 0, buf, at: STRING_AT })
    }

    /// Stores an edited string, `new_len` bytes long now (at least its old
    /// length, at most where the window ends), keeping its expiry; returns
    /// `new_len`. Only the window is written: for a chunked string, the
    /// chunks it covers and the metadata record. A string kept in its
    /// record that grows past [`CHUNKED_MIN`] is stored in chunks.
    pub fn finish_string_edit(&mut self, key: &[u8], mut e: StringEdit, new_len: u64) -> Res<u64> {
        if new_len > self.st.shared.max_bulk() as u64 {
            return Err(CmdError::err("string exceeds maximum allowed size (proto-max-bulk-len)"));
        }
        let exp = e.expire_at();
        let window_end = e.lo + (e.buf.len() - e.at) as u64;
        // An edit inside a chunked string leaves its length and writes a
        // window that may end before it; one that grows it ends in it.
        debug_assert!(new_len >= e.len && (new_len == e.len || new_len <= window_end));
        e.buf.truncate(e.at + new_len.min(window_end).saturating_sub(e.lo) as usize);
        match e.old.as_ref().filter(|m| m.is_chunked()) {
            Some(m) => {
                let version = m.version;
                self.put_chunks(key, version, e.lo, &e.buf)?;
                self.write_chunked_head(key, e.old.as_ref(), exp, version, new_len)?;
            }
            None if new_len as usize > CHUNKED_MIN => {
                self.write_chunked(key, e.old.as_ref(), exp, &e.buf[STRING_AT..])?;
            }
            None => {
                e.buf[..STRING_AT].copy_from_slice(&Meta::string_header(exp));
                let new = Meta { expire_at: exp, ..Meta::string(Vec::new()) };
                self.write_meta_record(key, e.old.as_ref(), &new, e.buf)?;
            }
        }
        Ok(new_len)
    }
}
