//! When a connection's query buffer gives memory back: Redis 7's policy
//! (`clientsCronResizeQueryBuffer`), run by the connection itself on a
//! timer. An idle client holds no buffer at all (ten thousand idle
//! connections would otherwise keep 16 KiB each); a client that sent one
//! big request keeps its room only until the next check finds that its
//! recent requests are much smaller; a busy client is not reallocated at
//! every read. CLIENT LIST's `qbuf-free` shows the result, as Redis's does.

use std::time::{Duration, Instant};

use bytes::BufMut;

/// The room a new buffer starts with, and what a read reserves
/// (Redis's PROTO_IOBUF_LEN).
pub(crate) const IO_BYTES: usize = 16 * 1024;
/// A buffer wasting less than this is left alone.
const WASTE_BYTES: usize = 4 * 1024;
/// Only a buffer above this is trimmed to its recent peak while the
/// client is busy (Redis's PROTO_RESIZE_THRESHOLD).
const RESIZE_THRESHOLD: usize = 32 * 1024;
/// A client idle longer than this loses its buffer.
const IDLE: Duration = Duration::from_secs(2);
/// How often a big buffer is checked, and any other.
const CHECK_BIG: Duration = Duration::from_millis(100);
const CHECK: Duration = Duration::from_secs(1);

/// A connection's unparsed input, with what the resize policy needs.
#[derive(Debug)]
pub(crate) struct QueryBuf {
    /// The bytes read and not yet parsed (its capacity is the buffer).
    pub(crate) buf: Vec<u8>,
    /// The arguments of a request that has arrived in part (`resp::parse_stream`).
    pub(crate) partial: Option<crate::resp::Partial>,
    /// Room (capacity, no bytes) kept for the next big argument after one
    /// was read straight into its own buffer, as Redis keeps its query
    /// buffer at the size of the last big argument: the next one is read
    /// into it. Counted as query-buffer room by CLIENT LIST and the checks.
    room: Vec<u8>,
    /// The most bytes held since the last check.
    peak: usize,
    /// The size of the big argument arriving, if one is.
    arriving: usize,
    last_io: Instant,
    next_check: Instant,
}

impl QueryBuf {
    pub(crate) fn new(now: Instant) -> QueryBuf {
        QueryBuf {
            buf: Vec::with_capacity(IO_BYTES),
            partial: None,
            room: Vec::new(),
            peak: 0,
            arriving: 0,
            last_io: now,
            next_check: now + CHECK,
        }
    }

    /// The client's unanswered input: unparsed bytes plus the part of a
    /// request already parsed (what the query-buffer limit bounds).
    pub(crate) fn held(&self) -> usize {
        self.buf.len() + self.partial.as_ref().map_or(0, |p| p.bytes())
    }

    /// Room for input not yet used (CLIENT LIST's `qbuf-free`).
    pub(crate) fn free(&self) -> usize {
        self.buf.capacity() - self.buf.len() + self.room.capacity()
    }

    fn capacity(&self) -> usize {
        self.buf.capacity() + self.room.capacity()
    }

    /// Where the next read goes: straight into the buffer of a big argument
    /// that is arriving (`resp::Partial::big_arg`) when nothing precedes
    /// its rest in the query buffer, at most the bytes it still takes;
    /// else the query buffer.
    pub(crate) fn read_into(&mut self) -> bytes::buf::Limit<&mut Vec<u8>> {
        match self.partial.as_mut().and_then(|p| p.big_arg()) {
            Some((big, left)) if self.buf.is_empty() => big.limit(left),
            _ => (&mut self.buf).limit(usize::MAX),
        }
    }

    /// Requests were parsed: a big argument that has just begun to arrive
    /// takes the room kept from the last one if it fits; once it is
    /// complete, room as big is kept for the next (address space until
    /// used; the periodic check gives it back when requests turn small).
    pub(crate) fn parsed(&mut self) {
        match self.partial.as_mut().and_then(|p| p.big_arg()) {
            Some((big, left)) => {
                let need = big.len() + left;
                if self.arriving == 0 && self.room.capacity() >= need {
                    self.room.extend_from_slice(big);
                    std::mem::swap(big, &mut self.room);
                    self.room = Vec::new();
                }
                self.arriving = need;
            }
            None if self.arriving > 0 => {
                let mut room = Vec::new();
                if room.try_reserve_exact(self.arriving).is_ok() {
                    self.room = room;
                }
                self.arriving = 0;
            }
            None => {}
        }
    }

    /// Input arrived: the client is not idle, and the peak may grow.
    pub(crate) fn read(&mut self, now: Instant) {
        self.last_io = now;
        self.peak = self.peak.max(self.held());
        if self.capacity() > RESIZE_THRESHOLD || self.arriving > 0 {
            // Grown big: checked as often as big buffers are from now on.
            self.next_check = self.next_check.min(now + CHECK_BIG);
        }
    }

    /// A reply went out: the client is not idle.
    pub(crate) fn wrote(&mut self, now: Instant) {
        self.last_io = now;
    }

    /// When the next check is due; `None` while there is no buffer to give
    /// back (an idle client then has no timer either).
    pub(crate) fn check_due(&self) -> Option<Instant> {
        (self.capacity() > 0).then_some(self.next_check)
    }

    /// The periodic check: frees the buffer of a client idle for more than
    /// two seconds, and trims a big one to the larger of what it holds and
    /// its peak since the last check when that peak is under half of it.
    pub(crate) fn check(&mut self, now: Instant) {
        let idle = now.duration_since(self.last_io) > IDLE;
        if idle || self.room.capacity() / 2 > self.peak {
            self.room = Vec::new();
        }
        let (len, cap) = (self.buf.len(), self.buf.capacity());
        if cap - len > WASTE_BYTES {
            if idle {
                self.buf.shrink_to_fit();
            } else if cap > RESIZE_THRESHOLD && cap / 2 > self.peak {
                self.buf.shrink_to(len.max(self.peak));
            }
        }
        self.peak = self.held();
        let every = if self.capacity() > RESIZE_THRESHOLD { CHECK_BIG } else { CHECK };
        self.next_check = now + every;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_idle_client_loses_its_buffer() {
        let t0 = Instant::now();
        let mut q = QueryBuf::new(t0);
        q.buf.extend_from_slice(b"*1\r\n$4\r\nPING\r\n");
        q.read(t0);
        q.buf.clear();
        q.check(t0 + Duration::from_secs(1));
        assert!(q.buf.capacity() >= IO_BYTES, "not idle yet");
        q.check(t0 + Duration::from_millis(2_100));
        assert_eq!(q.buf.capacity(), 0);
        assert_eq!(q.check_due(), None, "no buffer, no timer");
    }

    #[test]
    fn a_big_buffer_shrinks_to_the_recent_peak() {
        let t0 = Instant::now();
        let mut q = QueryBuf::new(t0);
        q.buf.resize(400_000, b'A');
        q.read(t0);
        assert_eq!(q.check_due(), Some(t0 + CHECK_BIG), "a buffer that grew big is checked soon");
        q.buf.clear();
        // The check right after the big request keeps it: it is the peak.
        q.check(t0 + Duration::from_millis(100));
        assert!(q.buf.capacity() >= 400_000);
        assert_eq!(q.check_due(), Some(t0 + Duration::from_millis(200)), "big buffers are checked often");
        // Then only small requests: trimmed to them, not to nothing.
        q.buf.extend_from_slice(&[b'x'; 130]);
        q.read(t0 + Duration::from_millis(150));
        q.buf.clear();
        q.check(t0 + Duration::from_millis(200));
        assert!(q.buf.capacity() >= 130 && q.buf.capacity() < 32 * 1024, "{}", q.buf.capacity());
    }

    #[test]
    fn a_busy_buffer_under_the_threshold_is_kept() {
        let t0 = Instant::now();
        let mut q = QueryBuf::new(t0);
        q.buf.extend_from_slice(&[b'x'; 100]);
        q.read(t0);
        q.buf.clear();
        q.check(t0 + Duration::from_millis(500));
        assert!(q.buf.capacity() >= IO_BYTES);
    }
}
