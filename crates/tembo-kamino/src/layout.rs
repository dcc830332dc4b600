//! Byte layouts of the heap's persistent structures: the heap root, the
//! object header, the log slots and their chunks.
//!
//! Every field that changes at run time is an aligned 8-byte word written
//! with one store, so a crash never tears it.
//!
//! Heap root (pool root `kamino`, 64 bytes):
//!
//! | word | field |
//! |---|---|
//! | 0 | magic `KAMINOH\0` |
//! | 1 | layout version (1) |
//! | 2 | mode ([`TxMode`] id) |
//! | 3 | α as `f64` bits (dynamic backup fraction) |
//! | 4 | number of log slots |
//! | 5 | offset of the slot table (one 64-byte line per slot) |
//! | 6 | the application's root object (0: none) |
//! | 7 | first chunk of the backup directory (dynamic mode; 0: none) |
//!
//! Object (a pool block): a 16-byte header, then the payload.
//!
//! | word | field |
//! |---|---|
//! | 0 | offset of the object's backup copy (payload only; 0: none) |
//! | 1 | `OBJ_MAGIC << 32 | payload length` |
//!
//! Log slot (one line): word 0 = `txid << 2 | state`, word 1 = first chunk.
//! Backup copy (a pool block): the same header with word 1 =
//! `BACKUP_MAGIC << 32 | length`, then the copy of the payload.
//!
//! Chunk (a pool block of `chunk_bytes`): word 0 = next chunk, word 1 =
//! `CHUNK_MAGIC`, then entries from byte 64 (line-aligned, so no entry header crosses a line). Every entry starts with the txid of
//! the transaction that wrote it; readers stop at the first entry whose
//! txid is not the slot's, so a slot is reused without clearing it.

use tembo_pmem::PoolOffset;

use crate::TxMode;

pub(crate) const ROOT_NAME: &str = "kamino";
pub(crate) const ROOT_BYTES: u64 = 64;
pub(crate) const MAGIC: u64 = u64::from_le_bytes(*b"KAMINOH\0");
pub(crate) const LAYOUT: u64 = 1;

pub(crate) const R_MAGIC: u64 = 0;
pub(crate) const R_LAYOUT: u64 = 8;
pub(crate) const R_MODE: u64 = 16;
pub(crate) const R_ALPHA: u64 = 24;
pub(crate) const R_SLOTS: u64 = 32;
pub(crate) const R_SLOT_TABLE: u64 = 40;
pub(crate) const R_APP_ROOT: u64 = 48;
pub(crate) const R_DIRECTORY: u64 = 56;

/// Bytes of an object header.
pub const OBJ_HEADER: u64 = 16;
pub(crate) const OBJ_MAGIC: u64 = 0x4B4D_4F42; // "KMOB"
/// Tag of a backup copy's header (word 1), so no copy reads as an object.
pub(crate) const BACKUP_MAGIC: u64 = 0x4B4D_4250; // "KMBP"
/// Tag at word 1 of log and directory chunks.
pub(crate) const CHUNK_MAGIC: u64 = 0x4B4D_4348; // "KMCH"
pub(crate) const H_BACKUP: u64 = 0;
pub(crate) const H_LEN: u64 = 8;
/// Largest payload of one object.
pub const MAX_OBJECT_BYTES: u64 = u32::MAX as u64;

pub(crate) const SLOT_BYTES: u64 = 64;
/// Low bit of an intent's object word: the object was allocated by the
/// transaction (`kamino` mode logs these so recovery can give committed new
/// objects their first copy; rollback skips them).
pub(crate) const ALLOC_TAG: u64 = 1;
pub(crate) const CHUNK_HEADER: u64 = 64;

/// Slot states (low two bits of the slot word).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SlotState {
    Idle = 0,
    Running = 1,
    Committed = 2,
}

pub(crate) fn slot_word(txid: u64, s: SlotState) -> u64 {
    txid << 2 | s as u64
}

pub(crate) fn decode_slot_word(w: u64) -> (u64, Option<SlotState>) {
    let s = match w & 3 {
        0 => Some(SlotState::Idle),
        1 => Some(SlotState::Running),
        2 => Some(SlotState::Committed),
        _ => None,
    };
    (w >> 2, s)
}

pub(crate) fn obj_len_word(len: u64) -> u64 {
    OBJ_MAGIC << 32 | len
}

/// Chunk size of a mode's log slots: Kamino-Tx logs 16-byte intents,
/// the undo baseline whole object images.
pub(crate) fn chunk_bytes(mode: TxMode) -> u64 {
    match mode {
        TxMode::Undo => 64 << 10,
        _ => 4 << 10,
    }
}

/// The payload offset of an object.
#[inline]
pub(crate) fn payload(obj: PoolOffset) -> PoolOffset {
    obj + OBJ_HEADER
}
