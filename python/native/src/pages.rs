//! Huge pages for large output buffers.
//!
//! An op's outputs are fresh tensors: memory nothing has touched yet, which the simulator's
//! first write faults in one 4 KiB page at a time. For a 128 MiB output that is 32768 page
//! faults, tens of milliseconds of kernel time on a virtual machine (often more than the
//! simulation of a memory-bound op itself). Where transparent huge pages are enabled in
//! `madvise` mode (the common default), advising 2 MiB pages for the aligned interior of each
//! large output makes the first write fault 2 MiB at a time. The advice changes neither the
//! contents nor the ownership of the memory; where it is refused, nothing changes. Setting the
//! environment variable `TORCH_NKI_HUGE_PAGES=0` turns the advice off.

/// Outputs smaller than this are left alone (a few pages, or memory from the allocator's heap).
pub const MIN_BYTES: usize = 8 << 20;

/// The huge page size the advice is aligned to.
const HUGE_PAGE: usize = 2 << 20;

/// The environment variable that turns the advice off when set to `0`.
pub const SWITCH: &str = "TORCH_NKI_HUGE_PAGES";

/// Whether the advice is on: unless [`SWITCH`] is `0` (read once per process).
pub fn enabled() -> bool {
    static ENABLED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ENABLED.get_or_init(|| std::env::var(SWITCH).map_or(true, |v| v.trim() != "0"))
}

/// Advises huge pages for the 2 MiB-aligned interior of `buffer` when it is at least
/// [`MIN_BYTES`] long and the advice is [`enabled`]; returns the number of bytes advised (0
/// when too small, switched off, not on Linux, or refused).
pub fn advise_huge_pages(buffer: &mut [u8]) -> usize {
    if buffer.len() < MIN_BYTES || !enabled() {
        return 0;
    }
    let start = buffer.as_mut_ptr() as usize;
    let first = start.next_multiple_of(HUGE_PAGE);
    let last = (start + buffer.len()) / HUGE_PAGE * HUGE_PAGE;
    if last <= first {
        return 0;
    }
    advise(first, last - first)
}

#[cfg(target_os = "linux")]
fn advise(addr: usize, len: usize) -> usize {
    // SAFETY: `addr..addr + len` lies inside a buffer the caller holds exclusively and is
    // page-aligned; MADV_HUGEPAGE only changes how the kernel backs the range, never its
    // contents.
    let rc = unsafe { libc::madvise(addr as *mut libc::c_void, len, libc::MADV_HUGEPAGE) };
    if rc == 0 { len } else { 0 }
}

#[cfg(not(target_os = "linux"))]
fn advise(_addr: usize, _len: usize) -> usize {
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_buffers_are_left_alone() {
        let mut small = vec![1u8; MIN_BYTES - 1];
        assert_eq!(advise_huge_pages(&mut small), 0);
    }

    #[test]
    fn large_buffers_keep_their_contents() {
        let mut big: Vec<u8> = (0..MIN_BYTES + 3 * HUGE_PAGE)
            .map(|i| (i % 251) as u8)
            .collect();
        let advised = advise_huge_pages(&mut big);
        assert_eq!(advised % HUGE_PAGE, 0);
        assert!(advised <= big.len());
        if cfg!(target_os = "linux") {
            // At least the buffer's length minus one huge page at each end is aligned interior.
            assert!(advised >= big.len() - 2 * HUGE_PAGE, "advised {advised}");
        }
        assert!(big.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8));
    }
}
