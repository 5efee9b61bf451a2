//! Backing for large output buffers: huge pages, faulted in before the simulator writes.
//!
//! An op's outputs are fresh tensors: memory nothing has touched yet, which the simulator's
//! first write faults in one 4 KiB page at a time. For a 128 MiB output that is 32768 page
//! faults, tens of milliseconds of kernel time on a virtual machine (often more than the
//! simulation of a memory-bound op itself). Two things make that cheaper, both on Linux and
//! both only for outputs of at least [`MIN_BYTES`]:
//!
//! - **Huge pages.** Where transparent huge pages are enabled in `madvise` mode (the common
//!   default), advising 2 MiB pages for the aligned interior makes each fault cover 2 MiB.
//!   Setting the environment variable `TORCH_NKI_HUGE_PAGES=0` turns the advice off.
//! - **Faulting in ahead.** The buffer's pages are then faulted in writable before the
//!   simulation starts (`MADV_POPULATE_WRITE`, Linux 5.14+), split over a few threads. Faults
//!   taken from inside the simulator's stores were measured about three times as slow as the
//!   same faults taken up front, where nothing else competes for the memory bus and no copy is
//!   interrupted mid-way.
//!
//! Neither changes the contents (freshly faulted memory reads as zeros, as before, and pages
//! already present are left as they are) nor the ownership of the memory; where the kernel
//! refuses either, nothing changes and the simulator's writes fault as they would have.

use std::num::NonZeroUsize;

/// Outputs smaller than this are left alone (a few pages, or memory from the allocator's heap).
pub const MIN_BYTES: usize = 8 << 20;

/// The huge page size the advice is aligned to.
const HUGE_PAGE: usize = 2 << 20;

/// The base page size faulting in is aligned to (x86-64 and the common aarch64 kernels).
const PAGE: usize = 4 << 10;

/// Each thread faults in at least this much: below it a thread costs more than it saves.
const PER_THREAD: usize = 16 << 20;

/// At most this many threads fault in one buffer (the memory bus saturates well before).
const MAX_THREADS: usize = 4;

/// The environment variable that turns the advice off when set to `0`.
pub const SWITCH: &str = "TORCH_NKI_HUGE_PAGES";

/// Whether the advice is on: unless [`SWITCH`] is `0` (read once per process).
pub fn enabled() -> bool {
    static ENABLED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ENABLED.get_or_init(|| std::env::var(SWITCH).map_or(true, |v| v.trim() != "0"))
}

/// What [`prepare_output`] did to a buffer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Prepared {
    /// Bytes advised into huge pages (the 2 MiB-aligned interior), 0 when not.
    pub advised: usize,
    /// Bytes faulted in ahead (the page-aligned interior), 0 when not.
    pub faulted: usize,
}

/// Prepares an output buffer the simulator is about to write: when it is at least
/// [`MIN_BYTES`] long, advises huge pages for its 2 MiB-aligned interior (if [`enabled`]) and
/// then faults its page-aligned interior in writable. Never changes the contents.
pub fn prepare_output(buffer: &mut [u8]) -> Prepared {
    if buffer.len() < MIN_BYTES {
        return Prepared::default();
    }
    let start = buffer.as_mut_ptr() as usize;
    let end = start + buffer.len();
    let advised = if enabled() {
        aligned(start, end, HUGE_PAGE).map_or(0, |(a, len)| advise_huge(a, len))
    } else {
        0
    };
    let faulted = aligned(start, end, PAGE).map_or(0, |(a, len)| fault_in(a, len));
    Prepared { advised, faulted }
}

/// The largest `align`-aligned range inside `start..end`, as `(start, length)`.
fn aligned(start: usize, end: usize, align: usize) -> Option<(usize, usize)> {
    let first = start.next_multiple_of(align);
    let last = end / align * align;
    (last > first).then(|| (first, last - first))
}

/// Faults `addr..addr + len` in over up to [`MAX_THREADS`] threads, the shares meeting on
/// [`HUGE_PAGE`] boundaries; returns the bytes faulted in (0 if any share was refused).
fn fault_in(addr: usize, len: usize) -> usize {
    // Shares are cut from the huge page holding `addr`, then clipped to the range, so their
    // boundaries are huge-page boundaries of the address space.
    let base = addr / HUGE_PAGE * HUGE_PAGE;
    let clip = |(off, l): (usize, usize)| {
        let (start, end) = ((base + off).max(addr), base + off + l);
        (start, end - start)
    };
    let pieces: Vec<(usize, usize)> = shares(addr - base + len, fault_in_threads())
        .into_iter()
        .map(clip)
        .filter(|&(_, l)| l > 0)
        .collect();
    let Some((&(first, first_len), rest)) = pieces.split_first() else {
        return 0;
    };
    let all = std::thread::scope(|scope| {
        let helpers: Vec<_> = rest
            .iter()
            .map(|&(a, l)| scope.spawn(move || populate_write(a, l)))
            .collect();
        // Where a helper cannot be joined (it panicked: a bug), count its share as refused.
        let mut all = populate_write(first, first_len);
        for helper in helpers {
            all &= helper.join().unwrap_or(false);
        }
        all
    });
    if all { len } else { 0 }
}

/// Threads [`fault_in`] may use: this process's cores, at most [`MAX_THREADS`] (read once;
/// the standard library reads cgroup files to answer).
fn fault_in_threads() -> usize {
    static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *THREADS.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(1, NonZeroUsize::get);
        cores.min(MAX_THREADS)
    })
}

/// Splits `0..len` into at most `threads` consecutive `(offset, length)` shares (one when `len`
/// is smaller than [`PER_THREAD`]); every share but the last is at least [`PER_THREAD`] bytes
/// and a multiple of [`HUGE_PAGE`], so no huge page is faulted from two threads.
fn shares(len: usize, threads: usize) -> Vec<(usize, usize)> {
    let threads = (len / PER_THREAD).clamp(1, threads.max(1));
    let share = (len / threads).next_multiple_of(HUGE_PAGE);
    (0..len)
        .step_by(share)
        .map(|off| (off, share.min(len - off)))
        .collect()
}

#[cfg(target_os = "linux")]
fn advise_huge(addr: usize, len: usize) -> usize {
    // SAFETY: `addr..addr + len` lies inside a buffer the caller holds exclusively and is
    // page-aligned; MADV_HUGEPAGE only changes how the kernel backs the range, never its
    // contents.
    let rc = unsafe { libc::madvise(addr as *mut libc::c_void, len, libc::MADV_HUGEPAGE) };
    if rc == 0 { len } else { 0 }
}

#[cfg(target_os = "linux")]
fn populate_write(addr: usize, len: usize) -> bool {
    // SAFETY: as for `advise_huge`; MADV_POPULATE_WRITE faults the range in as a write would,
    // without writing: pages already present keep their contents, new anonymous pages are
    // zero, as the first real write would have found them.
    unsafe { libc::madvise(addr as *mut libc::c_void, len, libc::MADV_POPULATE_WRITE) == 0 }
}

#[cfg(not(target_os = "linux"))]
fn advise_huge(_addr: usize, _len: usize) -> usize {
    0
}

#[cfg(not(target_os = "linux"))]
fn populate_write(_addr: usize, _len: usize) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_buffers_are_left_alone() {
        let mut small = vec![1u8; MIN_BYTES - 1];
        assert_eq!(prepare_output(&mut small), Prepared::default());
    }

    #[test]
    fn large_buffers_keep_their_contents() {
        let mut big: Vec<u8> = (0..MIN_BYTES + 3 * HUGE_PAGE)
            .map(|i| (i % 251) as u8)
            .collect();
        let prepared = prepare_output(&mut big);
        assert_eq!(prepared.advised % HUGE_PAGE, 0);
        assert!(prepared.advised <= big.len() && prepared.faulted <= big.len());
        if cfg!(target_os = "linux") {
            // At least the buffer's length minus one (huge) page at each end is aligned interior.
            if enabled() {
                assert!(
                    prepared.advised >= big.len() - 2 * HUGE_PAGE,
                    "{prepared:?}"
                );
            }
            assert!(prepared.faulted >= big.len() - 2 * PAGE, "{prepared:?}");
        }
        assert!(big.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8));
    }

    /// How many of the pages of `addr..addr + len` (page-aligned) are resident.
    #[cfg(target_os = "linux")]
    fn resident_pages(addr: usize, len: usize) -> usize {
        let mut residency = vec![0u8; len / PAGE];
        // SAFETY: the range is mapped (inside a live buffer) and page-aligned; `residency` has
        // one byte per page.
        let rc = unsafe { libc::mincore(addr as *mut libc::c_void, len, residency.as_mut_ptr()) };
        assert_eq!(rc, 0, "mincore failed");
        residency.iter().filter(|&&r| r & 1 == 1).count()
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn fresh_buffers_are_faulted_in_and_read_as_zeros() {
        // Zeroed allocations this large come straight from `mmap`: nothing is resident yet.
        let mut fresh = vec![0u8; 3 * PER_THREAD + HUGE_PAGE + 123];
        let start = fresh.as_ptr() as usize;
        let (addr, len) = aligned(start, start + fresh.len(), PAGE).expect("large buffer");
        let before = resident_pages(addr, len);
        let prepared = prepare_output(&mut fresh);
        assert_eq!(prepared.faulted, len);
        assert_eq!(
            resident_pages(addr, len),
            len / PAGE,
            "{before} resident before"
        );
        assert!(fresh.iter().all(|&b| b == 0));
    }

    #[test]
    fn shares_tile_the_range_on_huge_page_boundaries() {
        for len in [
            PAGE,
            PER_THREAD - PAGE,
            PER_THREAD,
            3 * PER_THREAD + 5 * PAGE,
            1 << 30,
        ] {
            for threads in 0..=5 {
                let pieces = shares(len, threads);
                assert!(!pieces.is_empty() && pieces.len() <= threads.max(1));
                let mut next = 0;
                for (i, &(off, l)) in pieces.iter().enumerate() {
                    assert_eq!(off, next, "len {len}, threads {threads}");
                    assert!(l > 0);
                    if i + 1 < pieces.len() {
                        assert_eq!(l % HUGE_PAGE, 0);
                        assert!(l >= PER_THREAD);
                    }
                    next = off + l;
                }
                assert_eq!(next, len);
            }
        }
        assert_eq!(shares(4 * PER_THREAD, 2).len(), 2);
        assert_eq!(shares(PER_THREAD + PAGE, 4).len(), 1);
    }
}
