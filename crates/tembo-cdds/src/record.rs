//! Records: the immutable blocks an entry points to.
//!
//! A put allocates exactly one block holding both key and value, written and
//! flushed before the commit that makes its entry visible, then never written
//! again until it is freed. Inner entries use the same shape with the child
//! node's offset in place of the value length.
//!
//! ```text
//! leaf:  u32 key_len | u32 flags | u64 value_len | key | value | u32 crc32c
//! inner: u32 key_len | u32 flags | u64 child     | key         | u32 crc32c
//! ```
//!
//! Values are never stored inline in the 32-byte slots (a deviation from the
//! thesis's short-value case): keeping slots at two per cache line halves the
//! lines a shift touches, and the record is one allocation either way. The
//! CRC is for `check` and media corruption, not crash consistency.

use std::cmp::Ordering;

use tembo_pmem::Pool;

use crate::entry::{key_prefix, Entry};
use crate::error::{CddsError, Result};

const HEADER: u64 = 16;
const CRC: u64 = 4;
/// Flag bit: the maximum-key sentinel (thesis §4.5), which has no key bytes.
pub const FLAG_SENTINEL: u32 = 1;
/// Flag bit: an inner record (the word holds a child node's offset).
pub const FLAG_INNER: u32 = 2;

/// A record's header fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordHeader {
    /// Key bytes.
    pub key_len: u64,
    /// `FLAG_*` bits.
    pub flags: u32,
    /// Value length (leaf) or child offset (inner).
    pub word: u64,
}

impl RecordHeader {
    /// Whether this is the +∞ sentinel.
    pub fn is_sentinel(&self) -> bool {
        self.flags & FLAG_SENTINEL != 0
    }
    pub(crate) fn body_len(&self) -> u64 {
        if self.flags & FLAG_INNER != 0 {
            self.key_len
        } else {
            self.key_len.saturating_add(self.word)
        }
    }
}

fn write(pool: &Pool, key: &[u8], flags: u32, word: u64, value: &[u8]) -> Result<u64> {
    let off = alloc(pool, key.len(), value.len())?;
    fill(pool, off, key, flags, word, value)?;
    Ok(off)
}

/// Allocates the block of a record of this shape.
fn alloc(pool: &Pool, key_len: usize, value_len: usize) -> Result<u64> {
    // Deferred: the commit's fence makes the allocation durable before any
    // committed entry can point here; an uncommitted one is swept as a leak.
    Ok(pool.alloc_deferred(footprint(key_len, value_len))?)
}

/// How much of a put's record (and of its caller's value) is prefetched
/// ahead of the descent: the lines of a record with a 256-byte value.
const FILL_PREFETCH_BYTES: u64 = 320;

/// Allocates a leaf record's block for `key`/`value` and starts loading
/// its lines and the value's, without writing: the caller descends the
/// tree meanwhile, then calls [`fill_leaf`]. A put that wrote its record
/// first waited for the value's cache misses (the CRC's read, when the
/// caller's value is cold) and the block's, then for the descent's.
pub fn alloc_leaf(pool: &Pool, key: &[u8], value: &[u8]) -> Result<u64> {
    let off = alloc(pool, key.len(), value.len())?;
    Pool::prefetch_slice(value, FILL_PREFETCH_BYTES as usize);
    pool.prefetch(off, footprint(key.len(), value.len()).min(FILL_PREFETCH_BYTES));
    Ok(off)
}

/// Writes and flushes the leaf record for `key`/`value` into the block
/// [`alloc_leaf`] returned for them.
pub fn fill_leaf(pool: &Pool, off: u64, key: &[u8], value: &[u8]) -> Result<()> {
    fill(pool, off, key, 0, value.len() as u64, value)
}

fn fill(pool: &Pool, off: u64, key: &[u8], flags: u32, word: u64, value: &[u8]) -> Result<()> {
    let body = key.len() as u64 + value.len() as u64;
    let mut head = [0u8; 16];
    head[..4].copy_from_slice(&(key.len() as u32).to_le_bytes());
    head[4..8].copy_from_slice(&flags.to_le_bytes());
    head[8..].copy_from_slice(&word.to_le_bytes());
    // CRC-32C (Castagnoli) with the CPU's instruction where it has one:
    // table-driven CRC was a tenth of a put's CPU time.
    let crc = crc32c::crc32c_append(crc32c::crc32c(&head), key);
    pool.write(off, &head)?;
    pool.write(off + HEADER, key)?;
    let at = off + HEADER + key.len() as u64;
    // Flushed, not fenced: the fence before the commit store orders it.
    let (crc, flushed) = if value.len() <= FILL_CHUNK {
        pool.write(at, value)?;
        (crc32c::crc32c_append(crc, value), off)
    } else {
        fill_chunks(pool, off, at, value, crc)?
    };
    pool.write(off + HEADER + body, &crc.to_le_bytes())?;
    pool.flush(flushed, off + HEADER + body + CRC - flushed);
    Ok(())
}

/// Bytes of a big value checksummed, copied and flushed at a time.
const FILL_CHUNK: usize = 32 * 1024;

/// Writes a big `value` at `at` (in the record at `off`) a chunk at a time,
/// each chunk checksummed, copied and its whole lines flushed while they
/// are in the nearest caches: a value of megabytes checksummed whole and
/// then copied was read twice from memory, and its lines flushed after
/// they had left the caches. Returns the CRC (`crc` extended by the
/// value) and where the lines left to flush start; each line is flushed
/// once, after its last byte is written.
fn fill_chunks(pool: &Pool, off: u64, at: u64, value: &[u8], mut crc: u32) -> Result<(u32, u64)> {
    let mut flushed = off;
    let mut to = at;
    for chunk in value.chunks(FILL_CHUNK) {
        crc = crc32c::crc32c_append(crc, chunk);
        pool.write(to, chunk)?;
        to += chunk.len() as u64;
        let whole = to & !(tembo_pmem::CACHE_LINE_BYTES - 1);
        if whole > flushed {
            pool.flush(flushed, whole - flushed);
            flushed = whole;
        }
    }
    Ok((crc, flushed))
}

/// Writes an inner record pointing to `child`; `key` `None` is the sentinel.
pub fn write_inner(pool: &Pool, key: Option<&[u8]>, child: u64) -> Result<u64> {
    match key {
        Some(k) => write(pool, k, FLAG_INNER, child, &[]),
        None => write(pool, &[], FLAG_INNER | FLAG_SENTINEL, child, &[]),
    }
}

/// Reads a record's header.
pub fn header(pool: &Pool, rec: u64) -> Result<RecordHeader> {
    // Two word loads, not a byte copy: this runs on every tree level of
    // every lookup that ties on a key prefix, and for every child pointer.
    let w0 = pool.load_u64(rec)?;
    let word = pool.load_u64(rec + 8)?;
    let key_len = w0 & 0xFFFF_FFFF;
    let flags = (w0 >> 32) as u32;
    if flags & !(FLAG_SENTINEL | FLAG_INNER) != 0 {
        return Err(CddsError::invariant(format!("record has unknown flags {flags:#x}"), rec));
    }
    Ok(RecordHeader { key_len, flags, word })
}

/// Borrows a record's key in place.
pub fn key<'p>(pool: &'p Pool, rec: u64, h: &RecordHeader) -> Result<&'p [u8]> {
    // SAFETY: records are immutable from their flush until they are freed,
    // and frees are deferred (`pins`: the writer's limbo) past every read op
    // that might still hold a reference to the record, so nobody writes these bytes
    // while the borrow lives. The range is bounds-checked by `bytes`.
    Ok(unsafe { pool.bytes(rec + HEADER, h.key_len)? })
}

/// Copies a leaf record's value.
pub fn value(pool: &Pool, rec: u64, h: &RecordHeader) -> Result<Vec<u8>> {
    let mut v = Vec::new();
    value_into(pool, rec, h, &mut v)?;
    Ok(v)
}

/// Copies a leaf record's value into `buf` (cleared first), reusing its
/// allocation: a caller reading many values pays for no allocation, free
/// or zero-fill per read.
pub fn value_into(pool: &Pool, rec: u64, h: &RecordHeader, buf: &mut Vec<u8>) -> Result<()> {
    value_range_into(pool, rec, h, 0, u64::MAX, buf)
}

/// Copies at most `limit` bytes of a leaf record's value, from byte
/// `offset` on, into `buf` (cleared first; nothing past the value's end):
/// what reads of a value's head or of a part of a big value need.
pub fn value_range_into(
    pool: &Pool,
    rec: u64,
    h: &RecordHeader,
    offset: u64,
    limit: u64,
    buf: &mut Vec<u8>,
) -> Result<()> {
    // Before allocating: a damaged length must be an error, not an abort.
    let at = (rec + HEADER).checked_add(h.key_len).ok_or_else(|| CddsError::invariant("record key length", rec))?;
    pool.check_range(at, h.word)?;
    let offset = offset.min(h.word);
    // SAFETY: as in `key`: the record is immutable until freed, and frees
    // wait for every read op that could hold it; the range is checked.
    let bytes = unsafe { pool.bytes(at + offset, (h.word - offset).min(limit))? };
    buf.clear();
    buf.extend_from_slice(bytes);
    Ok(())
}

/// Verifies a record's checksum (for `check`).
pub fn verify(pool: &Pool, rec: u64) -> Result<RecordHeader> {
    let h = header(pool, rec)?;
    let len = HEADER.checked_add(h.body_len()).ok_or_else(|| CddsError::invariant("record length", rec))?;
    pool.check_range(rec, len + CRC)?;
    let mut buf = vec![0u8; usize::try_from(len + CRC).map_err(|_| CddsError::invariant("record length", rec))?];
    pool.read(rec, &mut buf)?;
    let want = u32::from_le_bytes(buf[len as usize..].try_into().expect("4 bytes"));
    if crc32c::crc32c(&buf[..len as usize]) != want {
        return Err(CddsError::invariant("record checksum mismatch", rec));
    }
    Ok(h)
}

/// Bytes a record of this shape occupies (before allocator rounding).
pub fn footprint(key_len: usize, value_len: usize) -> u64 {
    HEADER + key_len as u64 + value_len as u64 + CRC
}

/// Compares the key of `e` with `key` (the sentinel is above every key).
pub fn cmp_entry(pool: &Pool, e: &Entry, key: &[u8], key_pfx: u64) -> Result<Ordering> {
    match e.prefix.cmp(&key_pfx) {
        Ordering::Equal => {}
        o if e.prefix != u64::MAX => return Ok(o),
        o => {
            // A sentinel also carries prefix MAX: check the record.
            let h = header(pool, e.rec)?;
            return Ok(if h.is_sentinel() { Ordering::Greater } else { o });
        }
    }
    let h = header(pool, e.rec)?;
    if h.is_sentinel() {
        return Ok(Ordering::Greater);
    }
    if key.len() <= 8 && h.key_len <= 8 && key_pfx == e.prefix && h.key_len as usize == key.len() {
        return Ok(Ordering::Equal);
    }
    Ok(self::key(pool, e.rec, &h)?.cmp(key))
}

/// Compares the keys of two entries.
pub fn cmp_entries(pool: &Pool, a: &Entry, b: &Entry) -> Result<Ordering> {
    let hb = header(pool, b.rec)?;
    if hb.is_sentinel() {
        let ha = header(pool, a.rec)?;
        return Ok(if ha.is_sentinel() { Ordering::Equal } else { Ordering::Less });
    }
    let kb = key(pool, b.rec, &hb)?;
    cmp_entry(pool, a, kb, b.prefix)
}

/// The prefix word an entry for `key` (or the sentinel) carries.
pub fn prefix_of(key: Option<&[u8]>) -> u64 {
    key.map_or(u64::MAX, key_prefix)
}

#[cfg(test)]
mod tests {
    #[test]
    fn checksum_is_crc32c() {
        // The CRC-32C check value: records written by earlier builds verify.
        assert_eq!(crc32c::crc32c(b"123456789"), 0xE306_9283);
        let whole = crc32c::crc32c(b"hello, world");
        assert_eq!(crc32c::crc32c_append(crc32c::crc32c(b"hello, "), b"world"), whole);
    }
}
