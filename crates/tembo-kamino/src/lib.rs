//! # tembo-kamino — in-place transactions on persistent memory
//!
//! Kamino-Tx (`../shared/papers/kamino-tx.txt` §3, §4, §6) over a
//! persistent object heap in a Tembo pool, with PMDK-style undo logging
//! over the same heap as the baseline, and an in-place B+tree on these
//! transactions ([`tree`]) that `tembo-store` exposes as the engines
//! `kamino`, `kamino-dynamic` and `undo`.
//!
//! ## The heap and its transactions
//! Objects are pool blocks with a 16-byte header; persistent references are
//! pool offsets ([`PPtr`]). A transaction ([`Heap::transaction`]) declares
//! write intent per object ([`Tx::write`]), stores in place, and commits when
//! its closure returns `Ok` — or aborts when it returns `Err` or panics.
//! Isolation is by object locks (exclusive for writers, shared for
//! [`Tx::read_lock`] and [`Heap::read_lock`]); a lock not had within the
//! heap's timeout aborts the transaction with [`KaminoError::LockTimeout`]
//! (deadlocks end this way).
//!
//! ## The three modes ([`TxMode`])
//! - **`Kamino`** (Kamino-Tx-Simple): the intent — the object's offset,
//!   16 bytes — is persisted in the transaction's log slot before the first
//!   store; stores go to the object in place; commit flushes the stored
//!   ranges, fences, and persists the outcome word. Nothing is copied in
//!   the critical path. The Transaction Coordinator (a background thread)
//!   then copies each committed object to its backup. A transaction that
//!   takes an object whose copy is still pending copies it itself before
//!   writing (the paper's dependent transaction). Abort, and recovery of a
//!   transaction left running, restore the stored ranges from the backup;
//!   recovery rolls committed ones forward.
//! - **`KaminoDynamic`** (Kamino-Tx-Dynamic): copies only for the most
//!   recently written objects, at most α × the heap's object bytes; a write
//!   intent on an object without a copy makes one in the critical path,
//!   evicting the least recently written copies of objects nobody holds.
//!   The copy's offset lives in the object's header (no hash table and no
//!   table lock); a persistent directory lists the objects with copies.
//! - **`Undo`**: the object's whole payload is copied into the undo log and
//!   persisted before the first store; commit persists the objects and then
//!   discards the log. Same heap, same locks: the fair comparison.
//!
//! ## Where this differs from the paper, and why
//! - Dependent transactions do not wait for the coordinator: they copy the
//!   pending object themselves (the paper allows this: "the only
//!   transactions for which data is copied in the critical path"). Readers
//!   of a committed object do not wait for its copy either: the committed
//!   change is durable, so reading it is safe.
//! - Allocation and free are not logged: an object allocated by a
//!   transaction that never commits is unreachable, and one freed by a
//!   committed transaction but not yet returned is unreachable too; the
//!   pool's mark-and-sweep ([`Heap::reclaim_leaks`]) frees both after a crash.
//! - A committed transaction's slot is retired with a plain store: if the
//!   crash comes first, recovery copies committed data to the backup again,
//!   which is harmless because rolling back runs first.
//!
//! ## A full pool
//! - In `Kamino` mode a new object's copy block is allocated with the
//!   object, inside its transaction (its header and payload are written by
//!   the roll-forward): a transaction that finds room for one but not both
//!   fails whole with `PoolFull`. Allocating the copy after the commit, as
//!   the coordinator did until session 19, could fail there — and in the
//!   recovery that must make it instead, which then could not open the pool.
//! - In `KaminoDynamic` mode a write whose object needs a copy at a full
//!   pool evicts other objects' copies (least recently written, none held)
//!   until it fits; copies of new objects are skipped while the pool is full.
//! - The B+tree runs a delete-only transaction that found the pool full
//!   again with the pool's reserve open (`Pool::with_reserve`): a rebalance
//!   may need a new separator record, and deletes are how a full pool gets
//!   room back. `tembo-store`'s `every_engine_empties_and_refills_a_full_pool`
//!   fills, reopens, empties and refills a pool with every engine.
//!
//! ## Crash consistency
//! `campaign` runs random multi-object transactions (with aborts, allocs and
//! frees) on the crash simulator at every fence, for every mode; `tembo
//! crashtest --engine kamino|kamino-dynamic|undo` runs it with the B+tree.

mod backup;
pub mod campaign;
mod error;
mod heap;
mod layout;
mod locks;
mod log;
pub mod tree;
mod tx;

pub use error::{KaminoError, Result};
pub use heap::{Coordinator, Heap, HeapOptions, HeapRecovery, HeapStats, ReadGuard, TxMode};
pub use layout::{MAX_OBJECT_BYTES, OBJ_HEADER};
pub use tembo_pmem::PPtr;
pub use tx::{Tx, Writable};
