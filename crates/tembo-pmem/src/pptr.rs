//! Persistent references: pool offsets, never virtual addresses, so a pool
//! maps at any address and a reference stays valid across restarts.

use std::fmt;
use std::marker::PhantomData;

/// A byte offset from the start of a pool. Offset 0 is the header, so 0 also
/// serves as the null reference.
pub type PoolOffset = u64;

/// A typed persistent reference: an offset into the pool holding a `T`.
///
/// It is a plain 8-byte value with no lifetime: validity is checked when it is
/// turned into memory by the pool, never assumed.
#[repr(transparent)]
pub struct PPtr<T> {
    offset: PoolOffset,
    _type: PhantomData<fn() -> T>,
}

impl<T> PPtr<T> {
    /// The null reference.
    pub const NULL: PPtr<T> = PPtr::new(0);

    /// A reference to offset `offset`.
    pub const fn new(offset: PoolOffset) -> Self {
        PPtr { offset, _type: PhantomData }
    }

    /// The offset.
    pub const fn offset(self) -> PoolOffset {
        self.offset
    }

    /// Whether this is the null reference.
    pub const fn is_null(self) -> bool {
        self.offset == 0
    }

    /// The same offset viewed as another type.
    pub const fn cast<U>(self) -> PPtr<U> {
        PPtr::new(self.offset)
    }
}

impl<T> Clone for PPtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for PPtr<T> {}
impl<T> PartialEq for PPtr<T> {
    fn eq(&self, other: &Self) -> bool {
        self.offset == other.offset
    }
}
impl<T> Eq for PPtr<T> {}
impl<T> std::hash::Hash for PPtr<T> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.offset.hash(state)
    }
}
impl<T> fmt::Debug for PPtr<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PPtr({:#x})", self.offset)
    }
}
