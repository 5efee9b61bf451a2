//! Caller-owned HBM buffers: the kernel's inputs, read in place, and its outputs, written
//! through a raw pointer so parallel iterations and bands can write disjoint runs at once. Every
//! access is bounds-checked here too (in release builds), behind the DMA checks.

use crate::dtype::DType;
use std::marker::PhantomData;

/// Runs of at least this many fp32 elements go to an output with non-temporal stores ...
const STREAM_MIN_ELEMENTS: usize = 256;

/// ... when the output is at least this large: a smaller one fits in the caches, where plain
/// stores are faster and leave it there for whatever reads it next (silu's 130 × 2100 fp32
/// output, 1.1 MB, spent a quarter of its call in streaming stores on a Xeon with a 2 MiB L2).
/// The streaming stores were measured for outputs of 128 MiB (docs/bench.md).
const STREAM_MIN_OUTPUT_BYTES: usize = 16 << 20;

/// Copies `vals` into `bytes` (the same length in bytes) with non-temporal stores where the
/// destination is 16-byte aligned: an output row is written once and not read again during the
/// run, so it need not be read into the cache first. The bytes are those of a plain copy; the
/// closing fence orders the stores before anything the thread does next.
#[cfg(target_arch = "x86_64")]
fn stream_f32(vals: &[f32], bytes: &mut [u8]) {
    use std::arch::x86_64::{_mm_loadu_ps, _mm_sfence, _mm_stream_ps};
    let dst = bytes.as_mut_ptr();
    // Elements before the first 16-byte boundary (the buffer is at least 4-byte aligned, or
    // the copy is plain throughout).
    let head = if (dst as usize).is_multiple_of(4) {
        (dst.align_offset(16) / 4).min(vals.len())
    } else {
        vals.len()
    };
    let body = (vals.len() - head) / 4 * 4;
    // SAFETY: `bytes` is `vals.len() * 4` long; the head and tail are plain copies inside it,
    // and every 16-byte stream store writes inside it at a 16-byte-aligned address (SSE2 is
    // part of x86-64).
    unsafe {
        std::ptr::copy_nonoverlapping(vals.as_ptr().cast::<u8>(), dst, head * 4);
        for k in (head..head + body).step_by(4) {
            let v = _mm_loadu_ps(vals.as_ptr().add(k));
            _mm_stream_ps(dst.add(k * 4).cast::<f32>(), v);
        }
        let tail = head + body;
        std::ptr::copy_nonoverlapping(
            vals.as_ptr().add(tail).cast::<u8>(),
            dst.add(tail * 4),
            (vals.len() - tail) * 4,
        );
        _mm_sfence();
    }
}

/// One HBM tensor's caller-owned bytes. Outputs are written through a raw pointer so parallel
/// iterations can write disjoint regions (proved disjoint before a loop runs in parallel).
#[derive(Clone, Copy)]
pub(crate) struct HbmBuffer<'a> {
    ptr: *mut u8,
    len: usize,
    pub(crate) dtype: DType,
    pub(crate) writable: bool,
    _lifetime: PhantomData<&'a mut [u8]>,
}

// SAFETY: the simulator only writes through `ptr` from iterations whose write sets are proved
// disjoint, and reads inputs that nothing writes.
unsafe impl Send for HbmBuffer<'_> {}
// SAFETY: see above.
unsafe impl Sync for HbmBuffer<'_> {}

impl<'a> HbmBuffer<'a> {
    pub(crate) fn input(data: &'a [u8], dtype: DType) -> HbmBuffer<'a> {
        HbmBuffer {
            ptr: data.as_ptr() as *mut u8,
            len: data.len(),
            dtype,
            writable: false,
            _lifetime: PhantomData,
        }
    }

    pub(crate) fn output(data: &'a mut [u8], dtype: DType) -> HbmBuffer<'a> {
        HbmBuffer {
            ptr: data.as_mut_ptr(),
            len: data.len(),
            dtype,
            writable: true,
            _lifetime: PhantomData,
        }
    }

    /// A read-only fp32 buffer's elements, in place (`None` for outputs, other dtypes, or
    /// memory not aligned for `f32`).
    pub(crate) fn input_f32(&self) -> Option<&'a [f32]> {
        let usable = !self.writable
            && self.dtype == DType::F32
            && cfg!(target_endian = "little")
            && (self.ptr as usize).is_multiple_of(std::mem::align_of::<f32>());
        // SAFETY: an input's bytes are the caller's, readable and unchanged for 'a; they are
        // aligned for f32 and little-endian f32s have f32's in-memory layout.
        usable.then(|| unsafe { std::slice::from_raw_parts(self.ptr.cast::<f32>(), self.len / 4) })
    }

    /// Elements in the buffer.
    pub(crate) fn numel(&self) -> usize {
        self.len / self.dtype.size_bytes()
    }

    /// Panics unless elements `i..i + n` lie inside the buffer. The DMA checks reject every
    /// access that reaches outside first, with an error; this is the last line between a bug
    /// (or an overflow those checks missed) and memory the buffer does not own, so it is
    /// checked in release builds too (once per run of elements).
    #[inline]
    fn assert_run(&self, i: usize, n: usize) {
        let numel = self.numel();
        assert!(
            i <= numel && n <= numel - i,
            "HBM access to elements {i}..+{n} of a buffer of {numel} (caught in the simulator)"
        );
    }

    /// Reads element `i` (bounds checked by the caller against `numel`).
    #[inline]
    pub(crate) fn read(&self, i: usize) -> f32 {
        let w = self.dtype.size_bytes();
        self.assert_run(i, 1);
        // SAFETY: `i < numel()` (asserted); the bytes belong to the caller's buffer for 'a.
        let bytes = unsafe { std::slice::from_raw_parts(self.ptr.add(i * w), w) };
        self.dtype.read(bytes, 0)
    }

    /// Reads `out.len()` contiguous elements starting at `i`.
    #[inline]
    pub(crate) fn read_run(&self, i: usize, out: &mut [f32]) {
        let w = self.dtype.size_bytes();
        self.assert_run(i, out.len());
        // SAFETY: the run is in bounds (asserted).
        let bytes = unsafe { std::slice::from_raw_parts(self.ptr.add(i * w), out.len() * w) };
        match self.dtype {
            DType::F32 if cfg!(target_endian = "little") => {
                // SAFETY: `bytes` holds exactly `out.len()` little-endian f32s, which on a
                // little-endian host have the in-memory layout of `[f32]`; the regions are
                // distinct allocations (caller buffer vs tile), so they do not overlap.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        bytes.as_ptr(),
                        out.as_mut_ptr().cast::<u8>(),
                        bytes.len(),
                    )
                }
            }
            DType::F32 => {
                for (o, c) in out.iter_mut().zip(bytes.chunks_exact(4)) {
                    *o = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                }
            }
            DType::BF16 => crate::wide::wide(
                #[inline(always)]
                || {
                    for (o, c) in out.iter_mut().zip(bytes.chunks_exact(2)) {
                        *o = f32::from_bits((u16::from_le_bytes([c[0], c[1]]) as u32) << 16);
                    }
                },
            ),
            dt => {
                for (k, o) in out.iter_mut().enumerate() {
                    *o = dt.read(bytes, k);
                }
            }
        }
    }

    /// Reads `out.len()` elements starting at `i`, `stride` elements apart (a transposed or
    /// column access pattern).
    #[inline]
    pub(crate) fn read_strided(&self, i: i64, stride: i64, out: &mut [f32]) {
        let w = self.dtype.size_bytes() as i64;
        let at = |k: usize| (i + k as i64 * stride) * w;
        if let Some(last) = out.len().checked_sub(1) {
            // Both ends inside the buffer, computed without overflow: then so is every element
            // between them, and `at` cannot overflow.
            let end = i128::from(i) + last as i128 * i128::from(stride);
            let n = self.numel() as i128;
            assert!(
                (0..n).contains(&i128::from(i)) && (0..n).contains(&end),
                "strided HBM access outside its buffer (caught in the simulator)"
            );
        }
        match self.dtype {
            DType::F32 => {
                for (k, o) in out.iter_mut().enumerate() {
                    // SAFETY: the whole pattern is in bounds (asserted above).
                    let bits = unsafe {
                        self.ptr
                            .add(at(k) as usize)
                            .cast::<[u8; 4]>()
                            .read_unaligned()
                    };
                    *o = f32::from_le_bytes(bits);
                }
            }
            DType::BF16 => {
                for (k, o) in out.iter_mut().enumerate() {
                    // SAFETY: as above.
                    let bits = unsafe {
                        self.ptr
                            .add(at(k) as usize)
                            .cast::<[u8; 2]>()
                            .read_unaligned()
                    };
                    *o = f32::from_bits((u16::from_le_bytes(bits) as u32) << 16);
                }
            }
            _ => {
                for (k, o) in out.iter_mut().enumerate() {
                    *o = self.read((i + k as i64 * stride) as usize);
                }
            }
        }
    }

    /// Whether a run of `n` fp32 elements goes to this buffer with non-temporal stores
    /// ([`STREAM_MIN_ELEMENTS`], [`STREAM_MIN_OUTPUT_BYTES`]).
    fn streams(&self, n: usize) -> bool {
        cfg!(target_arch = "x86_64")
            && n >= STREAM_MIN_ELEMENTS
            && self.len >= STREAM_MIN_OUTPUT_BYTES
    }

    /// Elements `i..i + n` of an fp32 output to compute in place, when its rows are written
    /// with plain stores: `None` for inputs, other dtypes, memory not aligned for `f32`, and
    /// outputs large enough for [`write_run`](Self::write_run) to stream.
    ///
    /// # Safety
    /// Nothing else reads or writes these elements while the slice lives (the caller's rows
    /// are proved disjoint, as for every concurrent write through this buffer).
    ///
    /// # Panics
    /// When the run is outside the buffer (a bug the DMA checks should have caught).
    pub(crate) unsafe fn run_f32_mut(&self, i: usize, n: usize) -> Option<&'a mut [f32]> {
        let plain = self.writable
            && self.dtype == DType::F32
            && cfg!(target_endian = "little")
            && (self.ptr as usize).is_multiple_of(std::mem::align_of::<f32>())
            && !self.streams(n);
        if !plain {
            return None;
        }
        self.assert_run(i, n);
        // SAFETY: in bounds (asserted) and aligned, in a writable buffer the caller owns for
        // 'a; little-endian f32s have f32's layout; exclusive by the caller's contract.
        Some(unsafe { std::slice::from_raw_parts_mut(self.ptr.cast::<f32>().add(i), n) })
    }

    /// Writes `vals` (already representable in the dtype) contiguously starting at element `i`.
    #[inline]
    pub(crate) fn write_run(&self, i: usize, vals: &[f32]) {
        let w = self.dtype.size_bytes();
        assert!(
            self.writable,
            "write to a read-only HBM buffer (caught in the simulator)"
        );
        self.assert_run(i, vals.len());
        // SAFETY: in bounds (asserted); only writable (output) buffers are written, and
        // concurrent writers touch disjoint runs.
        let bytes = unsafe { std::slice::from_raw_parts_mut(self.ptr.add(i * w), vals.len() * w) };
        match self.dtype {
            DType::F32 if cfg!(target_endian = "little") => {
                #[cfg(target_arch = "x86_64")]
                if self.streams(vals.len()) {
                    stream_f32(vals, bytes);
                    return;
                }
                // SAFETY: as in `read_run`, with the roles swapped.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        vals.as_ptr().cast::<u8>(),
                        bytes.as_mut_ptr(),
                        bytes.len(),
                    )
                }
            }
            DType::F32 => {
                for (v, c) in vals.iter().zip(bytes.chunks_exact_mut(4)) {
                    c.copy_from_slice(&v.to_le_bytes());
                }
            }
            // Tile values are already bf16-exact, so truncating the low half is exact.
            DType::BF16 => crate::wide::wide(
                #[inline(always)]
                || {
                    for (v, c) in vals.iter().zip(bytes.chunks_exact_mut(2)) {
                        c.copy_from_slice(&((v.to_bits() >> 16) as u16).to_le_bytes());
                    }
                },
            ),
            dt => {
                for (k, v) in vals.iter().enumerate() {
                    dt.write(bytes, k, *v);
                }
            }
        }
    }

    /// Writes one element.
    #[inline]
    pub(crate) fn write(&self, i: usize, v: f32) {
        self.write_run(i, std::slice::from_ref(&v));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Streamed output runs hold the bytes of a plain copy whatever the destination's
    /// alignment and the run's length (head, 16-byte body and tail).
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn streamed_runs_are_plain_copies() {
        let vals: Vec<f32> = (0..700).map(|i| (i as f32 * 0.37).sin() * 1e3).collect();
        for offset in [0usize, 1, 2, 3, 4, 5, 8, 13] {
            for len in [0usize, 1, 3, 4, 5, 255, 256, 257, 700 - offset] {
                let mut got = vec![0xAAu8; 8 + 4 * 700];
                let mut want = got.clone();
                let range = 4 + offset..4 + offset + 4 * len;
                stream_f32(&vals[..len], &mut got[range.clone()]);
                let plain: Vec<u8> = vals[..len].iter().flat_map(|v| v.to_le_bytes()).collect();
                want[range].copy_from_slice(&plain);
                assert!(got == want, "offset {offset}, length {len}");
            }
        }
    }
}
