//! 2 MiB pages for pools on a RAM filesystem, whatever the mount says.
//!
//! A pool on `/dev/shm` is a tmpfs file, and tmpfs backs files with 4 KiB
//! pages unless it was mounted with `huge=` (Debian's and most
//! distributions' `/dev/shm` is not). `MADV_HUGEPAGE` is then ignored, and
//! a random lookup in a pool of hundreds of megabytes takes a TLB miss, a
//! page walk, for nearly every node and record it touches; the first store
//! to each page also takes a page fault.
//!
//! `MADV_COLLAPSE` (Linux 6.1) asks the kernel to back a range with huge
//! pages now, and for shmem it does so whatever the mount's `huge=` option
//! and the `shmem_enabled` setting (only `deny` refuses): the file's page
//! cache then holds 2 MiB folios, which every later mapping of the file —
//! this process's, a reopen's — maps with one page-table entry each.
//!
//! Only fresh pages are collapsed, at creation and at growth, before
//! anything uses them, and cheaply: collapsing pages the file already has
//! copies them (about 0.9–1.7 s a GiB on the VMs measured), so a fresh
//! range gets one 4 KiB page per 2 MiB (the kernel refuses a range that is
//! all holes), is collapsed — the kernel allocates each 2 MiB page and
//! zeroes its holes, 0.17–0.19 s a GiB — and only then is the whole range
//! reserved with `fallocate`, which finds the pages there and only
//! reserves what the collapse did not cover. A pool that existed before
//! is left as it is at open: one created here already has its huge
//! folios, and converting an older one would cost a reopen ~1 s a GiB.
//! Failures change nothing (an older kernel, memory too fragmented for a
//! 2 MiB page): those pages stay small, and the `fallocate` after still
//! reserves every byte, so a full filesystem is still an error at creation
//! or growth, never a `SIGBUS` later.

use std::fs::File;

use crate::map::{reserve_file_space, HUGE_ALIGN as HUGE_PAGE};

/// The 2 MiB-aligned pages wholly inside `[offset, offset + len)`, as
/// offsets (the mapping's base is 2 MiB aligned, so offsets and addresses
/// align alike).
fn whole_pages(offset: usize, len: usize) -> impl Iterator<Item = usize> {
    let start = offset.next_multiple_of(HUGE_PAGE);
    let end = (offset + len) / HUGE_PAGE * HUGE_PAGE;
    (start..end.max(start)).step_by(HUGE_PAGE)
}

/// Backs the whole 2 MiB pages of `[offset, offset + len)` of `file`,
/// mapped at `base + offset`, with huge pages where the kernel can (the
/// pool's `huge_page_bytes` says where it did). The range must be fresh
/// (holes: nothing written, nothing reserved), or the kernel copies what
/// is there; the caller reserves the whole range with `fallocate`
/// afterwards.
///
/// # Safety
/// `base + offset .. base + offset + len` must be a shared mapping of
/// `file` at the same offsets, mapped until this returns.
pub(crate) unsafe fn collapse_fresh(file: &File, base: *mut u8, offset: usize, len: usize) {
    let pages: Vec<usize> = whole_pages(offset, len).collect();
    let (Some(&first), Some(&last)) = (pages.first(), pages.last()) else { return };
    for &page in &pages {
        // One small page per 2 MiB: the kernel collapses a range with a page
        // in it and fills its holes, but refuses one that is only holes.
        if reserve_file_space(file, page as u64, 4096).is_err() {
            return;
        }
    }
    let addr = base.wrapping_add(first).cast::<libc::c_void>();
    let span = last + HUGE_PAGE - first;
    // SAFETY: `first..last + HUGE_PAGE` lies inside the range the caller
    // keeps mapped; MADV_COLLAPSE changes how the kernel backs it, never
    // its bytes. A refusal (an older kernel, no free 2 MiB page) leaves
    // small pages.
    unsafe { libc::madvise(addr, span, libc::MADV_COLLAPSE) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_whole_aligned_pages_are_collapsed() {
        let m = HUGE_PAGE;
        assert_eq!(whole_pages(0, m).collect::<Vec<_>>(), vec![0]);
        assert_eq!(whole_pages(0, m - 1).count(), 0);
        assert_eq!(whole_pages(4096, 3 * m).collect::<Vec<_>>(), vec![m, 2 * m]);
        assert_eq!(whole_pages(m, 2 * m).collect::<Vec<_>>(), vec![m, 2 * m]);
        assert_eq!(whole_pages(5 * m + 1, 10).count(), 0);
    }
}
