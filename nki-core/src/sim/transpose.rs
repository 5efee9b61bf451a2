//! The data movement of `nc_transpose`: `dst[f][p] = src[p][f]` between two tiles' storage.
//!
//! Copies only, so every path gives the source's bits. On x86-64 CPUs with AVX-512, 16 × 16
//! blocks move through sixteen 512-bit registers (each column written as one whole 64-byte
//! store); with AVX, 8 × 8 blocks through eight 256-bit ones (unpack, shuffle and lane-permute
//! steps, the usual in-register transpose); elsewhere, and for the edges of a tile whose sides
//! are not multiples of the block, through a small local buffer. A linear call's two operand transposes were a sixth of
//! its simulated time with the buffer alone (`perf record` of `sim_speed -- tiny linear`).

/// Side of the square blocks [`transpose_buffered`] moves through a local buffer.
const BUFFER_BLOCK: usize = 16;

/// `dst[f * dstride + p] = src[p * sstride + f]` for `p < np`, `f < nf`.
///
/// # Panics
/// If either slice is too short for the rows and columns it is asked for (a bug in the caller).
pub(crate) fn transpose(
    src: &[f32],
    sstride: usize,
    np: usize,
    nf: usize,
    dst: &mut [f32],
    dstride: usize,
) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has AVX-512F (checked above).
            unsafe { transpose_avx512(src, sstride, np, nf, dst, dstride) };
            return;
        }
        if std::arch::is_x86_feature_detected!("avx") {
            // SAFETY: the CPU has AVX (checked above).
            unsafe { transpose_avx(src, sstride, np, nf, dst, dstride) };
            return;
        }
    }
    transpose_buffered(src, sstride, (0, np), (0, nf), dst, dstride);
}

/// The rows and columns `(p_full, f_full)` covered by whole `block`-square blocks of an
/// `np × nf` transpose, after checking once that the slices (`(len, stride)` each) hold every
/// element those blocks touch: the last row's last column on each side.
///
/// # Panics
/// If either slice is too short (a bug in the caller).
#[cfg(target_arch = "x86_64")]
fn whole_blocks(
    block: usize,
    (src_len, sstride): (usize, usize),
    (np, nf): (usize, usize),
    (dst_len, dstride): (usize, usize),
) -> (usize, usize) {
    let (p_full, f_full) = (np / block * block, nf / block * block);
    if p_full > 0 && f_full > 0 {
        assert!(
            src_len >= (p_full - 1) * sstride + f_full,
            "transpose source too short"
        );
        assert!(
            dst_len >= (f_full - 1) * dstride + p_full,
            "transpose destination too short"
        );
    }
    (p_full, f_full)
}

/// [`transpose`] with AVX-512: whole 16 × 16 blocks in registers, the edges through
/// [`transpose_avx`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn transpose_avx512(
    src: &[f32],
    sstride: usize,
    np: usize,
    nf: usize,
    dst: &mut [f32],
    dstride: usize,
) {
    use std::arch::x86_64::*;
    const B: usize = 16;
    let (p_full, f_full) = whole_blocks(B, (src.len(), sstride), (np, nf), (dst.len(), dstride));
    for p0 in (0..p_full).step_by(B) {
        for f0 in (0..f_full).step_by(B) {
            // SAFETY: rows p0..p0 + 16 and columns f0..f0 + 16 of the source, and rows
            // f0..f0 + 16 and columns p0..p0 + 16 of the destination, are inside the slices
            // (asserted above); unaligned loads and stores.
            unsafe {
                let s = src.as_ptr().add(p0 * sstride + f0);
                let mut r = [_mm512_setzero_ps(); B];
                for (i, v) in r.iter_mut().enumerate() {
                    *v = _mm512_loadu_ps(s.add(i * sstride));
                }
                // Pairs of rows interleaved within each 128-bit lane, then groups of four rows
                // (`u[4g + j]`: column j + 4·lane of rows 4g..4g + 4, one lane per 128 bits).
                let mut t = [_mm512_setzero_ps(); B];
                for i in 0..B / 2 {
                    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
                    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
                }
                let mut u = [_mm512_setzero_ps(); B];
                for g in 0..B / 4 {
                    let (lo, hi) = (t[4 * g], t[4 * g + 1]);
                    let (lo2, hi2) = (t[4 * g + 2], t[4 * g + 3]);
                    u[4 * g] = _mm512_shuffle_ps::<0x44>(lo, lo2);
                    u[4 * g + 1] = _mm512_shuffle_ps::<0xEE>(lo, lo2);
                    u[4 * g + 2] = _mm512_shuffle_ps::<0x44>(hi, hi2);
                    u[4 * g + 3] = _mm512_shuffle_ps::<0xEE>(hi, hi2);
                }
                // The four groups' lanes gathered: column j + 4k takes lane k of u[j], u[4 + j],
                // u[8 + j], u[12 + j], in two steps of 128-bit lane shuffles.
                let d = dst.as_mut_ptr().add(f0 * dstride + p0);
                for j in 0..4 {
                    let even01 = _mm512_shuffle_f32x4::<0x88>(u[j], u[4 + j]);
                    let odd01 = _mm512_shuffle_f32x4::<0xDD>(u[j], u[4 + j]);
                    let even23 = _mm512_shuffle_f32x4::<0x88>(u[8 + j], u[12 + j]);
                    let odd23 = _mm512_shuffle_f32x4::<0xDD>(u[8 + j], u[12 + j]);
                    let columns = [
                        (j, _mm512_shuffle_f32x4::<0x88>(even01, even23)),
                        (j + 4, _mm512_shuffle_f32x4::<0x88>(odd01, odd23)),
                        (j + 8, _mm512_shuffle_f32x4::<0xDD>(even01, even23)),
                        (j + 12, _mm512_shuffle_f32x4::<0xDD>(odd01, odd23)),
                    ];
                    for (c, v) in columns {
                        _mm512_storeu_ps(d.add(c * dstride), v);
                    }
                }
            }
        }
    }
    // The right edge (columns past the last whole block) of the whole rows, then the bottom
    // edge (rows past the last whole block) of every column, each as a smaller transpose.
    let (src_len, dst_len) = (src.len(), dst.len());
    // SAFETY: AVX-512F implies AVX.
    unsafe {
        if f_full < nf {
            transpose_avx(
                &src[f_full.min(src_len)..],
                sstride,
                p_full,
                nf - f_full,
                &mut dst[(f_full * dstride).min(dst_len)..],
                dstride,
            );
        }
        if p_full < np {
            transpose_avx(
                &src[(p_full * sstride).min(src_len)..],
                sstride,
                np - p_full,
                nf,
                &mut dst[p_full.min(dst_len)..],
                dstride,
            );
        }
    }
}

/// [`transpose`] of rows `p_lo..p_hi` and columns `f_lo..f_hi` in [`BUFFER_BLOCK`]-square
/// blocks, each read row by row (contiguous loads) into a local buffer and written out column
/// by column, so every destination write fills whole cache lines.
#[inline(always)]
fn transpose_buffered(
    src: &[f32],
    sstride: usize,
    (p_lo, p_hi): (usize, usize),
    (f_lo, f_hi): (usize, usize),
    dst: &mut [f32],
    dstride: usize,
) {
    const B: usize = BUFFER_BLOCK;
    let mut block = [[0f32; B]; B];
    for p0 in (p_lo..p_hi).step_by(B) {
        let ph = B.min(p_hi - p0);
        for f0 in (f_lo..f_hi).step_by(B) {
            let fw = B.min(f_hi - f0);
            if ph == B && fw == B {
                // A whole block: every length is the constant B, so the copies are inline
                // vector moves and the column writes unrolled.
                for (i, row) in block.iter_mut().enumerate() {
                    row.copy_from_slice(&src[(p0 + i) * sstride + f0..][..B]);
                }
                for f in 0..B {
                    let d = &mut dst[(f0 + f) * dstride + p0..][..B];
                    for (i, v) in d.iter_mut().enumerate() {
                        *v = block[i][f];
                    }
                }
                continue;
            }
            for (i, row) in block.iter_mut().enumerate().take(ph) {
                row[..fw].copy_from_slice(&src[(p0 + i) * sstride + f0..][..fw]);
            }
            for f in 0..fw {
                let d = &mut dst[(f0 + f) * dstride + p0..][..ph];
                for (i, v) in d.iter_mut().enumerate() {
                    *v = block[i][f];
                }
            }
        }
    }
}

/// [`transpose`] with AVX: whole 8 × 8 blocks in registers, the edges through
/// [`transpose_buffered`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
unsafe fn transpose_avx(
    src: &[f32],
    sstride: usize,
    np: usize,
    nf: usize,
    dst: &mut [f32],
    dstride: usize,
) {
    use std::arch::x86_64::*;
    const B: usize = 8;
    let (p_full, f_full) = whole_blocks(B, (src.len(), sstride), (np, nf), (dst.len(), dstride));
    for p0 in (0..p_full).step_by(B) {
        for f0 in (0..f_full).step_by(B) {
            // SAFETY: rows p0..p0 + 8 and columns f0..f0 + 8 of the source, and rows
            // f0..f0 + 8 and columns p0..p0 + 8 of the destination, are inside the slices
            // (asserted above); unaligned loads and stores.
            unsafe {
                let s = src.as_ptr().add(p0 * sstride + f0);
                let mut r = [_mm256_setzero_ps(); B];
                for (i, v) in r.iter_mut().enumerate() {
                    *v = _mm256_loadu_ps(s.add(i * sstride));
                }
                // Pairs of rows interleaved, then pairs of pairs, then the 128-bit halves.
                let t0 = _mm256_unpacklo_ps(r[0], r[1]);
                let t1 = _mm256_unpackhi_ps(r[0], r[1]);
                let t2 = _mm256_unpacklo_ps(r[2], r[3]);
                let t3 = _mm256_unpackhi_ps(r[2], r[3]);
                let t4 = _mm256_unpacklo_ps(r[4], r[5]);
                let t5 = _mm256_unpackhi_ps(r[4], r[5]);
                let t6 = _mm256_unpacklo_ps(r[6], r[7]);
                let t7 = _mm256_unpackhi_ps(r[6], r[7]);
                let u0 = _mm256_shuffle_ps::<0x44>(t0, t2);
                let u1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
                let u2 = _mm256_shuffle_ps::<0x44>(t1, t3);
                let u3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
                let u4 = _mm256_shuffle_ps::<0x44>(t4, t6);
                let u5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
                let u6 = _mm256_shuffle_ps::<0x44>(t5, t7);
                let u7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
                let columns = [
                    _mm256_permute2f128_ps::<0x20>(u0, u4),
                    _mm256_permute2f128_ps::<0x20>(u1, u5),
                    _mm256_permute2f128_ps::<0x20>(u2, u6),
                    _mm256_permute2f128_ps::<0x20>(u3, u7),
                    _mm256_permute2f128_ps::<0x31>(u0, u4),
                    _mm256_permute2f128_ps::<0x31>(u1, u5),
                    _mm256_permute2f128_ps::<0x31>(u2, u6),
                    _mm256_permute2f128_ps::<0x31>(u3, u7),
                ];
                let d = dst.as_mut_ptr().add(f0 * dstride + p0);
                for (i, v) in columns.into_iter().enumerate() {
                    _mm256_storeu_ps(d.add(i * dstride), v);
                }
            }
        }
    }
    // The right edge (columns past the last whole block) of the whole rows, then the bottom
    // edge (rows past the last whole block) of every column.
    transpose_buffered(src, sstride, (0, p_full), (f_full, nf), dst, dstride);
    transpose_buffered(src, sstride, (p_full, np), (0, nf), dst, dstride);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The destination of each vector path this CPU has (and of the dispatching [`transpose`]),
    /// from a destination of `len` markers.
    fn vector_paths(
        src: &[f32],
        sstride: usize,
        np: usize,
        nf: usize,
        dstride: usize,
        len: usize,
    ) -> Vec<(&'static str, Vec<f32>)> {
        let mut outs = Vec::new();
        let mut dst = vec![-7.5; len];
        transpose(src, sstride, np, nf, &mut dst, dstride);
        outs.push(("dispatch", dst));
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx") {
                let mut dst = vec![-7.5; len];
                // SAFETY: the CPU has AVX.
                unsafe { transpose_avx(src, sstride, np, nf, &mut dst, dstride) };
                outs.push(("avx", dst));
            }
            if std::arch::is_x86_feature_detected!("avx512f") {
                let mut dst = vec![-7.5; len];
                // SAFETY: the CPU has AVX-512F.
                unsafe { transpose_avx512(src, sstride, np, nf, &mut dst, dstride) };
                outs.push(("avx512", dst));
            }
        }
        outs
    }

    /// Every shape from 0 to 35 on each side (whole blocks, edges, both, neither), with row
    /// strides longer than the rows and a destination filled with a marker: each element lands
    /// where the definition says, nothing outside the transposed rectangle is written, and the
    /// vector paths (each the CPU has) and the buffered one agree bit for bit.
    #[test]
    fn every_element_lands_in_its_place_and_nothing_else_is_written() {
        const MARK: f32 = -7.5;
        for np in 0..36 {
            for nf in 0..36 {
                let (sstride, dstride) = (nf + 3, np + 5);
                let src: Vec<f32> = (0..np * sstride + 3).map(|i| i as f32 + 0.25).collect();
                let mut buffered = vec![MARK; nf * dstride + 5];
                transpose_buffered(&src, sstride, (0, np), (0, nf), &mut buffered, dstride);
                for (i, &b) in buffered.iter().enumerate() {
                    let (f, p) = (i / dstride, i % dstride);
                    let want = if f < nf && p < np {
                        src[p * sstride + f]
                    } else {
                        MARK
                    };
                    assert_eq!(b.to_bits(), want.to_bits(), "[{np}, {nf}] at ({f}, {p})");
                }
                for (path, out) in vector_paths(&src, sstride, np, nf, dstride, nf * dstride + 5) {
                    for (i, (&a, &b)) in out.iter().zip(&buffered).enumerate() {
                        assert_eq!(a.to_bits(), b.to_bits(), "{path} [{np}, {nf}] element {i}");
                    }
                }
            }
        }
    }

    /// NaN payloads and signed zeros go through unchanged (a copy, not arithmetic).
    #[test]
    fn special_values_keep_their_bits() {
        let specials = [
            f32::from_bits(0x7fc0_1234),
            f32::from_bits(0xffa0_0001),
            -0.0,
            f32::INFINITY,
            f32::MIN_POSITIVE / 4.0,
        ];
        let src: Vec<f32> = (0..256).map(|i| specials[i % specials.len()]).collect();
        for (path, dst) in vector_paths(&src, 16, 16, 16, 16, 256) {
            for p in 0..16 {
                for f in 0..16 {
                    assert_eq!(
                        dst[f * 16 + p].to_bits(),
                        src[p * 16 + f].to_bits(),
                        "{path}"
                    );
                }
            }
        }
    }
}
