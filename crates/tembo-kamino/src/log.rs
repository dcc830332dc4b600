//! The Log Manager: per-transaction log slots in the pool.
//!
//! A slot is one cache line (its state word and its first chunk) plus a
//! chain of chunks holding a byte stream of entries. Kamino-Tx writes
//! 16-byte write intents `[txid, object]`; the undo baseline writes
//! `[txid, object, length, 0]` followed by the object's old payload. Each
//! entry begins with its transaction's id, so a reader stops at the first
//! entry of an older transaction and slots are reused without clearing.
//!
//! Promises:
//! - `log.intent_first`: [`SlotWriter::append`] flushes what it wrote (the
//!   slot line too on the first entry); the caller fences before the first
//!   store to the object the entry names;
//! - `log.body_first`: an undo image is persisted before its header, and
//!   the header's txid word is what makes an entry valid;
//! - `log.fresh_chunks`: a chunk is zeroed and persisted before it is
//!   linked, so stale pool bytes never read as entries.

use tembo_pmem::{Pool, PoolOffset};

use crate::error::{invariant, Result};
use crate::layout::{decode_slot_word, slot_word, SlotState, CHUNK_HEADER, CHUNK_MAGIC, SLOT_BYTES};

/// The slot table: where slot `i`'s line is.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SlotTable {
    pub table: PoolOffset,
    pub count: u32,
    pub chunk_bytes: u64,
}

impl SlotTable {
    pub fn line(&self, slot: u32) -> PoolOffset {
        self.table + u64::from(slot) * SLOT_BYTES
    }

    pub fn state(&self, pool: &Pool, slot: u32) -> Result<(u64, Option<SlotState>)> {
        Ok(decode_slot_word(pool.load_u64(self.line(slot))?))
    }

    /// Stores and persists the slot's state word.
    pub fn set_state(&self, pool: &Pool, slot: u32, txid: u64, s: SlotState) -> Result<()> {
        pool.store_u64(self.line(slot), slot_word(txid, s))?;
        pool.persist(self.line(slot), 8);
        Ok(())
    }

    /// The chunks of slot `slot`, in order.
    pub fn chunks(&self, pool: &Pool, slot: u32) -> Result<Vec<PoolOffset>> {
        let mut out = Vec::new();
        let mut c = pool.load_u64(self.line(slot) + 8)?;
        while c != 0 {
            if out.len() > 1 << 20 {
                return Err(invariant("log.chunk_chain", self.line(slot), "chunk chain does not end"));
            }
            out.push(c);
            c = pool.load_u64(c)?;
        }
        Ok(out)
    }

    fn data_bytes(&self) -> u64 {
        self.chunk_bytes - CHUNK_HEADER
    }
}

/// Allocates a zeroed, persisted chunk.
fn new_chunk(pool: &Pool, bytes: u64) -> Result<PoolOffset> {
    let c = pool.alloc(bytes)?;
    if let Err(e) = pool.fill(c, bytes, 0).and_then(|()| pool.store_u64(c + 8, CHUNK_MAGIC)) {
        let _ = pool.free(c);
        return Err(e.into());
    }
    pool.persist(c, bytes);
    Ok(c)
}

/// Appends entries of one transaction to one slot.
#[derive(Debug)]
pub(crate) struct SlotWriter {
    pub slot: u32,
    pub txid: u64,
    chunks: Vec<PoolOffset>,
    /// Stream position: bytes written so far.
    pos: u64,
    started: bool,
}

impl SlotWriter {
    pub fn new(t: &SlotTable, pool: &Pool, slot: u32, txid: u64) -> Result<SlotWriter> {
        Ok(SlotWriter { slot, txid, chunks: t.chunks(pool, slot)?, pos: 0, started: false })
    }

    /// Whether an entry was appended (the slot is Running).
    pub fn started(&self) -> bool {
        self.started
    }

    /// Appends one entry: `head` (its first word the txid; 16 or 32 bytes,
    /// aligned to its size so it never crosses a cache line) and then
    /// `body` (an undo image). The body is persisted before the head is
    /// written, so a head that reached the media always has its image; in
    /// ordering `full` the txid word is persisted after the rest of the
    /// head, so no crash can tear an entry into a valid-looking one (in
    /// `fast`, stores to one line are assumed to persist in order). Writes
    /// the slot line (Running) on the first entry. The caller fences.
    pub fn append(&mut self, t: &SlotTable, pool: &Pool, head: &[u8], body: &[u8]) -> Result<()> {
        debug_assert!(head.len() == 16 || head.len() == 32);
        if !self.started {
            pool.store_u64(t.line(self.slot), slot_word(self.txid, SlotState::Running))?;
            pool.flush(t.line(self.slot), 8);
            self.started = true;
        }
        let at = self.pos.next_multiple_of(head.len() as u64);
        if !body.is_empty() {
            self.write_at(t, pool, at + head.len() as u64, body)?;
            pool.fence();
        }
        if pool.ordering() == tembo_pmem::OrderingMode::Full {
            self.write_at(t, pool, at + 8, &head[8..])?;
            pool.fence();
            self.write_at(t, pool, at, &head[..8])?;
        } else {
            self.write_at(t, pool, at, head)?;
        }
        self.pos = at + (head.len() + body.len()) as u64;
        Ok(())
    }

    fn write_at(&mut self, t: &SlotTable, pool: &Pool, mut pos: u64, mut bytes: &[u8]) -> Result<()> {
        let cap = t.data_bytes();
        while !bytes.is_empty() {
            let idx = (pos / cap) as usize;
            while self.chunks.len() <= idx {
                let c = new_chunk(pool, t.chunk_bytes)?;
                let link = match self.chunks.last() {
                    Some(&prev) => prev,
                    None => t.line(self.slot) + 8,
                };
                pool.store_u64(link, c)?;
                pool.persist(link, 8);
                self.chunks.push(c);
            }
            let within = pos % cap;
            let n = (cap - within).min(bytes.len() as u64) as usize;
            let at = self.chunks[idx] + CHUNK_HEADER + within;
            pool.write(at, &bytes[..n])?;
            pool.flush(at, n as u64);
            pos += n as u64;
            bytes = &bytes[n..];
        }
        Ok(())
    }
}

/// Reads back the entries of the transaction a slot records.
#[derive(Debug)]
pub(crate) struct SlotReader<'a> {
    pool: &'a Pool,
    chunks: Vec<PoolOffset>,
    cap: u64,
    pos: u64,
    txid: u64,
}

impl<'a> SlotReader<'a> {
    pub fn new(t: &SlotTable, pool: &'a Pool, slot: u32, txid: u64) -> Result<SlotReader<'a>> {
        Ok(SlotReader { pool, chunks: t.chunks(pool, slot)?, cap: t.data_bytes(), pos: 0, txid })
    }

    fn end(&self) -> u64 {
        self.chunks.len() as u64 * self.cap
    }

    fn read_stream(&mut self, dst: &mut [u8]) -> Result<bool> {
        if self.pos + dst.len() as u64 > self.end() {
            return Ok(false);
        }
        let mut done = 0;
        while done < dst.len() {
            let idx = (self.pos / self.cap) as usize;
            let within = self.pos % self.cap;
            let n = ((self.cap - within) as usize).min(dst.len() - done);
            self.pool.read(self.chunks[idx] + CHUNK_HEADER + within, &mut dst[done..done + n])?;
            self.pos += n as u64;
            done += n;
        }
        Ok(true)
    }

    /// The next entry's header words (`words` of them, the first being the
    /// txid, which is checked and not returned), or `None` at the end.
    pub fn next_header<const N: usize>(&mut self) -> Result<Option<[u64; N]>> {
        let mut buf = vec![0u8; N * 8];
        self.pos = self.pos.next_multiple_of(N as u64 * 8);
        let start = self.pos;
        if !self.read_stream(&mut buf)? {
            return Ok(None);
        }
        let mut words = [0u64; N];
        for (i, w) in words.iter_mut().enumerate() {
            *w = u64::from_le_bytes(buf[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
        }
        if words[0] != self.txid {
            self.pos = start;
            return Ok(None);
        }
        Ok(Some(words))
    }

    /// The next `len` bytes of the entry (an undo image).
    pub fn read_body(&mut self, len: u64) -> Result<Vec<u8>> {
        let mut v = vec![0u8; len as usize];
        if !self.read_stream(&mut v)? {
            return Err(invariant("log.undo_image", 0, format!("undo image of {len} bytes runs past the log")));
        }
        Ok(v)
    }
}

/// Marks every slot idle at `txid` and then zeroes every chunk (recovery),
/// so no entry of an older life can ever match a new txid. Idle goes first:
/// a crash while zeroing must not leave a Running slot whose entries are
/// half zeroed (an undo image that reads as zeros).
pub(crate) fn reset_all(t: &SlotTable, pool: &Pool, txid: u64) -> Result<()> {
    for s in 0..t.count {
        pool.store_u64(t.line(s), slot_word(txid, SlotState::Idle))?;
        pool.flush(t.line(s), 8);
    }
    pool.fence();
    for s in 0..t.count {
        for c in t.chunks(pool, s)? {
            pool.fill(c + CHUNK_HEADER, t.data_bytes(), 0)?;
            pool.flush(c + CHUNK_HEADER, t.data_bytes());
        }
    }
    pool.fence();
    Ok(())
}

/// Applies a slot's undo images newest first (abort and recovery of the
/// undo mode); returns how many objects it restored. The caller fences.
pub(crate) fn apply_undo(t: &SlotTable, pool: &Pool, slot: u32, txid: u64) -> Result<u64> {
    let mut rd = SlotReader::new(t, pool, slot, txid)?;
    let mut images = Vec::new();
    while let Some([_, obj, len, _]) = rd.next_header::<4>()? {
        images.push((obj, rd.read_body(len)?));
    }
    let n = images.len() as u64;
    for (obj, img) in images.into_iter().rev() {
        pool.write(crate::layout::payload(obj), &img)?;
        pool.flush(crate::layout::payload(obj), img.len() as u64);
    }
    Ok(n)
}
