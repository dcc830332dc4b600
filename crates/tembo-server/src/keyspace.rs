//! Key-level operations every command uses: look a key up (expiring it
//! lazily), write or remove its metadata (keeping the expiry index, the key
//! counts and WATCH in step), and read or write a collection's elements.

use std::ops::Bound;

use crate::cmd::CmdError;
use crate::encoding::{self, expire_key, meta_key, sub_key, sub_prefix, Kind, Meta, SUB};
use crate::exec::Ctx;

/// Result of a command step.
pub type Res<T> = Result<T, CmdError>;

/// Reading a collection's elements: what the executor's view (a command's
/// [`Ctx`], pending writes included) and a pinned snapshot of committed
/// state (`crate::rdb_save`) both offer, so that the code that reads a
/// whole value (DUMP's, a stream's groups) serves both.
pub trait SubRange {
    /// Elements (field, value) of a collection with `tag` SUB or ZIDX, in
    /// field order (reversed if `rev`), between the field bounds `from`
    /// and `to`, at most `limit`.
    // Bounds, direction and limit are exactly what callers vary; a struct would only rename them.
    #[allow(clippy::too_many_arguments)]
    fn sub_range(
        &self,
        tag: u8,
        key: &[u8],
        meta: &Meta,
        from: Bound<&[u8]>,
        to: Bound<&[u8]>,
        rev: bool,
        limit: usize,
    ) -> Res<Vec<(Vec<u8>, Vec<u8>)>>;
}

/// The engine keys bounding fields `from`..`to` of the collection whose
/// sub-keys start with `prefix`.
pub fn sub_bounds(prefix: &[u8], from: Bound<&[u8]>, to: Bound<&[u8]>) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let with = |f: &[u8]| [prefix, f].concat();
    let lo = match from {
        Bound::Included(f) => Bound::Included(with(f)),
        Bound::Excluded(f) => Bound::Excluded(with(f)),
        Bound::Unbounded => Bound::Included(prefix.to_vec()),
    };
    let hi = match to {
        Bound::Included(f) => Bound::Included(with(f)),
        Bound::Excluded(f) => Bound::Excluded(with(f)),
        Bound::Unbounded => match encoding::prefix_end(prefix) {
            Some(e) => Bound::Excluded(e),
            None => Bound::Unbounded,
        },
    };
    (lo, hi)
}

impl SubRange for Ctx<'_> {
    fn sub_range(
        &self,
        tag: u8,
        key: &[u8],
        meta: &Meta,
        from: Bound<&[u8]>,
        to: Bound<&[u8]>,
        rev: bool,
        limit: usize,
    ) -> Res<Vec<(Vec<u8>, Vec<u8>)>> {
        let prefix = sub_prefix(tag, self.db(), key, meta.version);
        let (lo, hi) = sub_bounds(&prefix, from, to);
        fields(self.st.store.scan(lo, hi, rev), prefix.len(), limit)
    }
}

/// The first `limit` (field, value) pairs of a scan of a collection's
/// elements: each engine key less its `prefix_len`-byte collection prefix.
pub fn fields<E: Into<CmdError>>(
    scan: impl Iterator<Item = Result<(Vec<u8>, Vec<u8>), E>>,
    prefix_len: usize,
    limit: usize,
) -> Res<Vec<(Vec<u8>, Vec<u8>)>> {
    scan.take(limit)
        .map(|kv| {
            let (mut k, v) = kv.map_err(Into::into)?;
            k.drain(..prefix_len); // the field, in the key's own allocation
            Ok((k, v))
        })
        .collect()
}

/// A metadata record up to this long is read whole in one lookup; a longer
/// one (a big string) is read as its header, then its value.
const WHOLE_READ: usize = 16 * 1024;

impl Ctx<'_> {
    /// The time a relative TTL counts from, and a new expiry is judged
    /// already past against (EXPIRE, SET EX, GETEX, SETEX…): the time now,
    /// as Redis 7.0 takes `mstime()` for them even inside a script, whose
    /// key lookups see the time frozen at its start (`now`). A script that
    /// runs long (a million LPUSHes) and then sets EXPIRE 2 gives its key
    /// two seconds from the EXPIRE, not from the script's start (limits's
    /// moving window).
    pub fn ttl_base(&self) -> u64 {
        if self.st.frozen_now.is_some() {
            self.st.wall.ms_at(std::time::Instant::now())
        } else {
            self.now
        }
    }

    /// The database the selected one's keys are stored under (SWAPDB may
    /// have exchanged them); `client.db` is the one the client selected.
    pub fn db(&self) -> u8 {
        self.st.phys(self.client.db)
    }

    /// The metadata of `key`, or `None` if it does not exist or has expired
    /// (an expired key is deleted on the way, as Redis does).
    pub fn lookup(&mut self, key: &[u8]) -> Res<Option<Meta>> {
        Ok(self.lookup_as(key, false)?.map(|(m, _)| m))
    }

    /// [`lookup`](Self::lookup) without the value of a string or stream
    /// (left empty): what a command needs that only reads a key's type,
    /// expiry or existence, or replaces it whole (SET, DEL), whatever the
    /// size of the string. Its result may be passed as the old metadata to
    /// [`write_meta`](Self::write_meta) and [`remove`](Self::remove), which
    /// read only the header, but never written back as a string's own.
    pub fn lookup_head(&mut self, key: &[u8]) -> Res<Option<Meta>> {
        Ok(self.lookup_as(key, true)?.map(|(m, _)| m))
    }

    /// Whether `key` is there but past its expiry, not yet removed (Redis's
    /// `keyIsExpired`); reads only the metadata's head and removes nothing.
    pub fn expired_unremoved(&mut self, key: &[u8]) -> Res<bool> {
        let mk = self.meta_key_of(key);
        let head = self.st.store.get_range(&mk, 0, encoding::META_HEADER_MAX)?;
        Ok(head.and_then(|(h, _)| Meta::decode_head(&h)).is_some_and(|m| m.expired(self.now)))
    }

    /// The length of the string at `key` (a key of another type is a
    /// WRONGTYPE error), read from its record's header: O(1) whatever the
    /// string's size.
    pub fn string_len(&mut self, key: &[u8]) -> Res<Option<u64>> {
        match self.lookup_as(key, true)? {
            Some((m, _)) if m.kind != Kind::String => Err(CmdError::wrongtype()),
            Some((m, _)) if m.is_chunked() => Ok(Some(m.size)),
            Some((_, record)) => Ok(Some(record.saturating_sub(encoding::STRING_AT as u64))),
            None => Ok(None),
        }
    }

    /// Bytes `from..from + n` of the string at `key` (fewer past its end),
    /// copying only them; for a key [`string_len`](Self::string_len) has
    /// just found to be a string.
    pub fn string_part(&mut self, key: &[u8], from: u64, n: usize) -> Res<Vec<u8>> {
        let mk = self.meta_key_of(key);
        let head = self.st.store.get_range(&mk, 0, encoding::META_HEADER_MAX)?;
        if let Some(m) = head.and_then(|(h, _)| Meta::decode_head(&h)).filter(Meta::is_chunked) {
            return self.chunked_part(key, &m, from, n);
        }
        let part = self.st.store.get_range(&mk, encoding::STRING_AT as u64 + from, n)?;
        Ok(part.map(|(v, _)| v).unwrap_or_default())
    }

    /// [`lookup_head`](Self::lookup_head) with the length of the key's
    /// metadata record (for a string kept in it: `STRING_AT` + its length).
    pub(crate) fn lookup_record(&mut self, key: &[u8]) -> Res<Option<(Meta, u64)>> {
        self.lookup_as(key, true)
    }

    /// The metadata of `key` for a command that writes it back changed
    /// only in its expiry (EXPIRE, PERSIST): a chunked string's head alone
    /// (its bytes unread, so [`write_meta`](Self::write_meta) keeps its
    /// chunks), any other key whole.
    pub fn lookup_to_rewrite(&mut self, key: &[u8]) -> Res<Option<Meta>> {
        match self.lookup_as(key, true)? {
            Some((m, _)) if m.is_chunked() => Ok(Some(m)),
            Some(_) => self.lookup(key),
            None => Ok(None),
        }
    }

    /// The engine key of `key`'s metadata record in the selected database.
    pub(crate) fn meta_key_of(&self, key: &[u8]) -> Vec<u8> {
        meta_key(self.db(), self.st.gen(self.db()), key)
    }

    /// The metadata of `key` (see `lookup` and `lookup_head`) and the
    /// length of its record.
    fn lookup_as(&mut self, key: &[u8], head_only: bool) -> Res<Option<(Meta, u64)>> {
        let mk = self.meta_key_of(key);
        let Some((meta, len)) = self.read_meta(&mk, key, head_only)? else { return Ok(None) };
        if meta.expired(self.now) {
            if self.st.pause.is_some() && !self.writing() && self.st.expiry_paused() {
                // Clients are paused: the key reads as gone but stays (see `pause`).
                return Ok(None);
            }
            self.remove(key, &meta);
            // Redis expires a key on behalf of no client: a tracking client
            // in NOLOOP mode is told even when its own command found it.
            if !self.st.tracking.is_idle() {
                crate::tracking::modified(self.st, key, None);
            }
            self.st.stats.expired_keys += 1;
            if self.st.notify_flags != 0 {
                // The expiry is its own event, not part of the command's.
                let db = self.client.db;
                self.st.notes.retain(|n| !(n.db == db && n.key == key));
                crate::notify::send_from(self.st, Some(&mut *self.client), crate::notify::EXPIRED, "expired", db, key);
            }
            return Ok(None);
        }
        if crate::access::touches(self.client.last_cmd) {
            self.st.access.touch_hashed(self.db(), encoding::meta_key_hash(&mk), self.now);
        }
        let mut meta = meta;
        if meta.is_chunked() && !head_only {
            meta.value = self.chunked_part(key, &meta, 0, usize::try_from(meta.size).unwrap_or(usize::MAX))?;
        }
        Ok(Some((meta, len)))
    }

    /// The metadata of `key` as stored, past its expiry or not (DEBUG
    /// OBJECT looks at a key as Redis's dictionary holds it), expiring and
    /// touching nothing; a chunked string's bytes are not read.
    pub(crate) fn peek_meta(&mut self, key: &[u8]) -> Res<Option<Meta>> {
        let mk = self.meta_key_of(key);
        Ok(self.read_meta(&mk, key, false)?.map(|(m, _)| m))
    }

    /// The decoded metadata record of `key` (stored under `mk`) and the
    /// record's length.
    fn read_meta(&mut self, mk: &[u8], key: &[u8], head_only: bool) -> Res<Option<(Meta, u64)>> {
        let limit = if head_only { encoding::META_HEADER_MAX } else { WHOLE_READ };
        let Some((raw, len)) = self.st.store.get_range(mk, 0, limit)? else { return Ok(None) };
        let meta = if head_only {
            Meta::decode_head(&raw)
        } else if (raw.len() as u64) < len {
            // A big string or stream state: read again from where its bytes
            // start, rather than moving them past the header.
            match Meta::decode_head(&raw) {
                Some(mut m) => {
                    if let Some(at) = m.value_at() {
                        let value = self.st.store.get_range(mk, at as u64, usize::MAX)?;
                        m.value = value.map(|(v, _)| v).unwrap_or_default();
                    }
                    Some(m)
                }
                None => None,
            }
        } else {
            Meta::decode_owned(raw)
        };
        let meta = meta.ok_or_else(|| CmdError::corrupt(key))?;
        Ok(Some((meta, len)))
    }

    /// Whether the command running is a write command (it may delete an
    /// expired key even while clients are paused: it replaces it).
    fn writing(&self) -> bool {
        let name = self.client.last_cmd.split('|').next().unwrap_or("");
        crate::cmd::spec(name.as_bytes()).is_some_and(|s| s.flags.contains(&"write"))
    }

    /// Like [`lookup`](Self::lookup), but a key of another type is a WRONGTYPE error.
    pub fn lookup_kind(&mut self, key: &[u8], kind: Kind) -> Res<Option<Meta>> {
        match self.lookup(key)? {
            Some(m) if m.kind != kind => Err(CmdError::wrongtype()),
            other => Ok(other),
        }
    }

    /// Stores `new` as the metadata of `key`, which had `old`.
    /// A string's `value` is stored whole in the record
    /// ([`write_string`](Self::write_string)), except for the head of a
    /// chunked string whose bytes were not read (from
    /// [`lookup_to_rewrite`](Self::lookup_to_rewrite)): that one is
    /// stored as a head, its chunks kept.
    pub fn write_meta(&mut self, key: &[u8], old: Option<&Meta>, new: &Meta) -> Res<()> {
        if new.kind == Kind::String {
            if new.is_chunked() && new.value.len() as u64 != new.size {
                return self.write_chunked_head(key, old, new.expire_at, new.version, new.size);
            }
            return self.write_string(key, old, new.expire_at, &new.value);
        }
        self.write_meta_record(key, old, new, new.encode())
    }

    /// [`write_meta`](Self::write_meta) of `new` already encoded as
    /// `record` (a string's record built from a borrowed value); `new`'s
    /// own value is not read.
    pub fn write_meta_record(&mut self, key: &[u8], old: Option<&Meta>, new: &Meta, record: Vec<u8>) -> Res<()> {
        let db = self.db();
        let old_exp = old.map_or(0, |m| m.expire_at);
        if old_exp != new.expire_at {
            if old_exp != 0 {
                self.st.store.delete(expire_key(old_exp, db, key));
            }
            if new.expire_at != 0 {
                self.st.store.put(expire_key(new.expire_at, db, key), Vec::new())?;
            }
            let delta = (new.expire_at != 0) as i64 - (old_exp != 0) as i64;
            self.st.pending_counts[db as usize].1 += delta;
        }
        if old.is_none() {
            self.st.pending_counts[db as usize].0 += 1;
        }
        // A collection, or a string stored in chunks, whose elements this
        // record no longer names: the reclaimer deletes them.
        if let Some(o) = old.filter(|o| o.version != 0 && o.version != new.version) {
            self.st.store.put(sub_prefix(encoding::GARBAGE, db, key, o.version), Vec::new())?;
        }
        let mk = meta_key(db, self.st.gen(db), key);
        self.st.access.write_hashed(db, encoding::meta_key_hash(&mk), self.now, old.is_none());
        self.st.store.put(mk, record)?;
        // Watchers, notifications and blocked clients know the database
        // by the number clients select.
        let seen = self.client.db;
        self.st.touch(seen, key, Some(&mut *self.client));
        if old.is_none() && self.st.notify_flags != 0 {
            crate::notify::note(self.st, seen, key, true, false);
        }
        // Clients blocked on this key (BLPOP, BZPOPMIN, XREAD…) are served
        // after this command; a client whose key now holds another type
        // waits on (XREADGROUP's get an error).
        self.st.blocking.signal(seen, key);
        Ok(())
    }

    /// Deletes `key` (metadata and expiry entry). O(1) whatever its size:
    /// a collection's elements are left to the background reclaimer.
    pub fn remove(&mut self, key: &[u8], old: &Meta) {
        let db = self.db();
        self.st.drop_key(db, key, old);
        let seen = self.client.db;
        // XREADGROUP clients blocked on a deleted stream get an error.
        self.st.blocking.signal(seen, key);
        self.st.touch(seen, key, Some(&mut *self.client));
        if self.st.notify_flags != 0 {
            crate::notify::note(self.st, seen, key, false, true);
        }
    }

    /// Removes `key`, whose metadata record does not decode (see
    /// [`State::drop_damaged`](crate::exec::State::drop_damaged)): DEL's and
    /// UNLINK's way out of damage that `tembo pool check` reported.
    /// Whether there was a record.
    pub fn remove_damaged(&mut self, key: &[u8]) -> Res<bool> {
        let mk = self.meta_key_of(key);
        let Some((head, _)) = self.st.store.get_range(&mk, 0, encoding::META_HEADER_MAX)? else { return Ok(false) };
        let db = self.db();
        self.st.drop_damaged(db, key, &head)?;
        let seen = self.client.db;
        self.st.blocking.signal(seen, key);
        self.st.touch(seen, key, Some(&mut *self.client));
        if self.st.notify_flags != 0 {
            crate::notify::note(self.st, seen, key, false, true);
        }
        Ok(true)
    }

    /// Writes `meta` back, or removes the key if the collection became empty.
    pub fn save_collection(&mut self, key: &[u8], old: Option<&Meta>, meta: &Meta) -> Res<()> {
        if meta.size == 0 {
            if let Some(old) = old {
                self.remove(key, old);
            }
            Ok(())
        } else {
            self.write_meta(key, old, meta)
        }
    }

    /// [`save_collection`](Self::save_collection) for a command that
    /// deleted elements of `old` one by one: when its count reaches zero,
    /// no element may be left (one left is damage, an undercount, and
    /// removing the key would drop the elements it never counted).
    pub fn save_shrunk(&mut self, key: &[u8], old: &Meta, meta: &Meta) -> Res<()> {
        if meta.size == 0 && !self.sub_range(SUB, key, old, Bound::Unbounded, Bound::Unbounded, false, 1)?.is_empty() {
            return Err(CmdError::undercount(key));
        }
        self.save_collection(key, Some(old), meta)
    }

    /// Metadata for a new, empty collection of `kind`.
    pub fn new_collection(&mut self, kind: Kind) -> Meta {
        Meta::collection(kind, self.st.store.new_version())
    }

    /// The element `field` of collection `key`.
    pub fn sub_get(&self, key: &[u8], meta: &Meta, field: &[u8]) -> Res<Option<Vec<u8>>> {
        Ok(self.st.store.get_element(&sub_key(self.db(), key, meta.version, field), meta.version)?)
    }

    /// Whether collection `key` has element `field` (its value not copied).
    pub fn sub_exists(&self, key: &[u8], meta: &Meta, field: &[u8]) -> Res<bool> {
        Ok(self.st.store.contains_element(&sub_key(self.db(), key, meta.version, field), meta.version)?)
    }

    /// Stores element `field` of collection `key`.
    pub fn sub_put(&mut self, key: &[u8], meta: &Meta, field: &[u8], value: Vec<u8>) -> Res<()> {
        self.st.store.put(sub_key(self.db(), key, meta.version, field), value)?;
        self.st.touch(self.client.db, key, Some(&mut *self.client));
        Ok(())
    }

    /// Deletes element `field` of collection `key`.
    pub fn sub_del(&mut self, key: &[u8], meta: &Meta, field: &[u8]) {
        self.st.store.delete(sub_key(self.db(), key, meta.version, field));
        self.st.touch(self.client.db, key, Some(&mut *self.client));
    }

    /// Every element of a collection (SUB entries), in field order.
    pub fn sub_all(&self, key: &[u8], meta: &Meta) -> Res<Vec<(Vec<u8>, Vec<u8>)>> {
        self.sub_range(SUB, key, meta, Bound::Unbounded, Bound::Unbounded, false, usize::MAX)
    }
}
