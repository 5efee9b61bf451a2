//! `nc_matmul` on the simulator: `dst (+)= stationaryᵀ · moving` with fp32 accumulation,
//! through a CPU GEMM, or directly for two kinds of stationary operand kernels use often, with
//! the GEMM's bits:
//!
//! - An identity matrix, which adds tiles into PSUM on the tensor engine (a sum over loop
//!   iterations that leaves the vector engines free). The GEMM would spend `K` multiply-adds
//!   per element on it; the direct path adds the moving operand in: every product but one is an
//!   exact zero and the remaining one is exact, so the GEMM's sum is the moving value itself,
//!   `−0` becoming `+0` as in a sum that starts from zero.
//! - Anything else on processors with fused multiply-add vectors ([`fused_gemm`]): the GEMM's
//!   arithmetic (per output element, fused multiply-adds over `K` in order from zero, then
//!   added to `dst`) without its packing, which costs as much as the product itself at the
//!   few rows of a reduction across partitions (a weight gradient's per-row factors, a ones
//!   column) and a good part of it at `nc_matmul`'s largest shape.

use crate::dtype::DType;
use crate::ir::TileRegion;
use crate::sim::exec::{Ctx, ExecError};
use crate::sim::gemm::{Operand, fused_gemm, fused_multiply_add};
use crate::sim::store::{StoreError, TileStore};

/// Executes one `nc_matmul` (see the module doc).
pub(crate) fn matmul(
    ctx: &Ctx<'_, '_>,
    store: &mut TileStore<'_>,
    dst: &TileRegion,
    st: &TileRegion,
    mv: &TileRegion,
    accumulate: bool,
) -> Result<(), ExecError> {
    distinct_tiles(ctx, dst, st, mv)?;
    let dt = store.dtype(dst.tile);
    let (mut out, dstride) = store.take(dst.tile)?;
    let result = (|| -> Result<(), StoreError> {
        let (a, astride) = store.data(st.tile)?;
        let (b, bstride) = store.data(mv.tile)?;
        let (k, m, n) = (st.np, st.nf, mv.nf);
        let a = &a[st.p0 * astride + st.f0..];
        let b = &b[mv.p0 * bstride + mv.f0..];
        let c = &mut out[dst.p0 * dstride + dst.f0..];
        // Bounds for the raw GEMM: the last element each operand touches.
        assert!(
            k == 0 || m == 0 || (k - 1) * astride + m <= a.len(),
            "stationary region inside its tile"
        );
        assert!(
            k == 0 || n == 0 || (k - 1) * bstride + n <= b.len(),
            "moving region inside its tile"
        );
        assert!(
            m == 0 || n == 0 || (m - 1) * dstride + n <= c.len(),
            "dst region inside its tile"
        );
        let moving = Operand {
            data: b,
            stride: bstride,
        };
        let stationary = Operand {
            data: a,
            stride: astride,
        };
        let direct = (is_identity(a, astride, k, m)
            && add_moving(c, dstride, moving, k, n, accumulate))
            || fused_gemm(c, dstride, stationary, m, moving, k, n, accumulate);
        if !direct {
            // SAFETY: A = stationaryᵀ (m×k, element (i, l) at a[l*astride + i]), B = moving
            // (k×n), C = dst (m×n); the asserts above keep every access inside the slices, and
            // `c` does not alias `a` or `b` (different tiles).
            unsafe {
                matrixmultiply::sgemm(
                    m,
                    k,
                    n,
                    1.0,
                    a.as_ptr(),
                    1,
                    astride as isize,
                    b.as_ptr(),
                    bstride as isize,
                    1,
                    if accumulate { 1.0 } else { 0.0 },
                    c.as_mut_ptr(),
                    dstride as isize,
                    1,
                );
            }
        }
        round_rows(c, dstride, m, n, dt);
        Ok(())
    })();
    store.restore(dst.tile, out);
    Ok(result?)
}

/// Executes one `nc_matmul` in transpose mode (`is_transpose`, NeuronCore-v3+): each output
/// element is the fp32 sum, in contraction order, of the products whose `moving` factor is not
/// zero, starting from the first of them (no `0.0 +` in front, so a lone `-0.0` or NaN keeps
/// its bits); with none, `+0.0`. An identity `moving` therefore transposes `stationary` bit for
/// bit. Added to `dst` when `accumulate`, then rounded to `dst`'s dtype like every matmul.
pub(crate) fn transpose_mode(
    ctx: &Ctx<'_, '_>,
    store: &mut TileStore<'_>,
    dst: &TileRegion,
    st: &TileRegion,
    mv: &TileRegion,
    accumulate: bool,
) -> Result<(), ExecError> {
    distinct_tiles(ctx, dst, st, mv)?;
    let (m, n) = (st.nf, mv.nf);
    let rows = |region: &TileRegion, store: &TileStore<'_>| -> Result<Vec<Vec<f32>>, StoreError> {
        (0..region.np)
            .map(|r| store.row(region, r).map(<[f32]>::to_vec))
            .collect()
    };
    let (a, b) = (rows(st, store)?, rows(mv, store)?);
    let dt = store.dtype(dst.tile);
    for i in 0..m {
        let out = store.row_mut(dst, i)?;
        for (j, o) in out.iter_mut().enumerate().take(n) {
            let mut sum: Option<f32> = None;
            for (stationary_row, moving_row) in a.iter().zip(&b) {
                let y = moving_row[j];
                if y != 0.0 {
                    let p = stationary_row[i] * y;
                    sum = Some(sum.map_or(p, |s| s + p));
                }
            }
            let value = sum.unwrap_or(0.0);
            *o = if accumulate { *o + value } else { value };
        }
        crate::sim::rounding::round_into_in_place(out, dt);
    }
    Ok(())
}

/// A matmul's destination is a tile of its own: writing it cannot change an operand.
fn distinct_tiles(
    ctx: &Ctx<'_, '_>,
    dst: &TileRegion,
    st: &TileRegion,
    mv: &TileRegion,
) -> Result<(), ExecError> {
    if dst.tile == st.tile || dst.tile == mv.tile {
        return Err(ctx
            .err("nc_matmul destination aliases an operand".into())
            .into());
    }
    Ok(())
}

/// Is the `[k, m]` stationary region (row `l` at `a[l * astride..]`) the identity matrix?
/// (Ones on the diagonal, zeros of either sign elsewhere.)
///
/// Each row is checked without branching on its elements (a zero of either sign is the one
/// value whose bits are zero below the sign bit), so the check vectorizes: kernels pass an
/// identity for every sum over loop iterations they keep in PSUM, and checking its 128 × 128
/// elements one compare at a time cost more than the sum itself.
fn is_identity(a: &[f32], astride: usize, k: usize, m: usize) -> bool {
    let all_zero = |s: &[f32]| s.iter().fold(0u32, |bits, v| bits | (v.to_bits() << 1)) == 0;
    k == m
        && (0..k).all(|l| {
            let row = &a[l * astride..l * astride + m];
            row[l] == 1.0 && all_zero(&row[..l]) && all_zero(&row[l + 1..])
        })
}

/// `c (+)= moving` for an identity stationary, row by row; declines (returns false, `c`
/// untouched) when the moving operand holds an infinity or NaN, whose products with the
/// identity's zeros are NaN in the GEMM.
fn add_moving(
    c: &mut [f32],
    dstride: usize,
    moving: Operand<'_>,
    k: usize,
    n: usize,
    accumulate: bool,
) -> bool {
    let finite = |row: &[f32]| row.iter().fold(true, |ok, v| ok & v.is_finite());
    if !(0..k).all(|r| finite(moving.row(r, n))) {
        return false;
    }
    for r in 0..k {
        let (src, dst) = (moving.row(r, n), &mut c[r * dstride..r * dstride + n]);
        if accumulate {
            dst.iter_mut().zip(src).for_each(|(d, &v)| *d += v + 0.0);
        } else {
            dst.iter_mut().zip(src).for_each(|(d, &v)| *d = v + 0.0);
        }
    }
    true
}

/// Stationary operands with at most this many columns may run band by band
/// ([`accumulate_band`]).
pub(crate) const SMALL_M: usize = 4;

/// `c (+)= acc` row by row (`acc` is `[m, n]`): a banded product's finished chains added to its
/// destination, or to `+0` when not accumulating, as [`fused_gemm`] adds them.
fn add_chains(c: &mut [f32], dstride: usize, acc: &[f32], n: usize, accumulate: bool) {
    for (i, acc) in acc.chunks_exact(n).enumerate() {
        let row = &mut c[i * dstride..i * dstride + n];
        if accumulate {
            row.iter_mut().zip(acc).for_each(|(d, &v)| *d += v);
        } else {
            row.iter_mut().zip(acc).for_each(|(d, &v)| *d = v + 0.0);
        }
    }
}

/// Continues a banded matmul's chains `acc` (`[m, n]`, `m` the stationary operand's columns)
/// over one band's partitions: `stationary` and `moving` are that band's rows of the operands.
/// Bands call it in partition order, so each element's chain of fused multiply-adds runs over
/// `K` in order from zero, as [`fused_gemm`] computes it in one call.
pub(crate) fn accumulate_band(
    store: &TileStore<'_>,
    stationary: &TileRegion,
    moving: &TileRegion,
    acc: &mut [f32],
) -> Result<(), StoreError> {
    let (a, astride) = store.data(stationary.tile)?;
    let (b, bstride) = store.data(moving.tile)?;
    let (k, m, n) = (stationary.np, stationary.nf, moving.nf);
    if k == 0 || m == 0 || n == 0 {
        return Ok(());
    }
    let a = &a[stationary.p0 * astride + stationary.f0..];
    let b = &b[moving.p0 * bstride + moving.f0..];
    assert!(
        (k - 1) * astride + m <= a.len() && (k - 1) * bstride + n <= b.len() && acc.len() == m * n,
        "banded matmul operands inside their tiles"
    );
    #[cfg(target_arch = "x86_64")]
    if fused_multiply_add() {
        let (stationary, moving) = (
            Operand {
                data: a,
                stride: astride,
            },
            Operand {
                data: b,
                stride: bstride,
            },
        );
        // SAFETY: the processor supports FMA and AVX2 (`fused_multiply_add`).
        unsafe { fused_columns(acc, stationary, m, moving, k) };
        return Ok(());
    }
    unreachable!("matmuls are banded only where multiply-adds fuse")
}

/// Adds a banded matmul's finished chains (`[m, n]`: the stationary operand's columns by the
/// moving operand's) into `dst` as [`fused_gemm`] does, then rounds them to `dst`'s dtype as
/// [`matmul`] does.
pub(crate) fn finish_band(
    store: &mut TileStore<'_>,
    dst: &TileRegion,
    acc: &[f32],
    m: usize,
    n: usize,
    accumulate: bool,
) -> Result<(), StoreError> {
    if m == 0 || n == 0 {
        return Ok(());
    }
    let dt = store.dtype(dst.tile);
    let (mut out, dstride) = store.take(dst.tile)?;
    let c = &mut out[dst.p0 * dstride + dst.f0..];
    assert!(
        (m - 1) * dstride + n <= c.len(),
        "dst region inside its tile"
    );
    add_chains(c, dstride, acc, n, accumulate);
    round_rows(c, dstride, m, n, dt);
    store.restore(dst.tile, out);
    Ok(())
}

/// Rounds the `[m, n]` result rows of `c` to `dt`.
fn round_rows(c: &mut [f32], dstride: usize, m: usize, n: usize, dt: DType) {
    if dt != DType::F32 {
        for r in 0..m {
            let row = &mut c[r * dstride..r * dstride + n];
            row.iter_mut().for_each(|v| *v = dt.round(*v));
        }
    }
}

/// `acc[i][j] = fma(stationary[l][i], moving[l][j], acc[i][j])` for `l = 0..k` in order, for
/// the `m` columns `i` of the stationary operand at once (`acc` is `[m, n]`), so the moving
/// operand is read once.
///
/// # Safety
/// The processor supports FMA and AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn fused_columns(
    acc: &mut [f32],
    stationary: Operand<'_>,
    m: usize,
    moving: Operand<'_>,
    k: usize,
) {
    let n = acc.len() / m;
    let a = |l: usize, i: usize| stationary.data[l * stationary.stride + i];
    // Four rows of the moving operand per pass over `acc`: each element's chain still runs
    // over `l` in order, one fused multiply-add after another, with a quarter of the loads and
    // stores of `acc`.
    let mut l = 0;
    while l + 4 <= k {
        let (b0, b1, b2, b3) = (
            moving.row(l, n),
            moving.row(l + 1, n),
            moving.row(l + 2, n),
            moving.row(l + 3, n),
        );
        for (i, acc) in acc.chunks_exact_mut(n).enumerate() {
            let (a0, a1, a2, a3) = (a(l, i), a(l + 1, i), a(l + 2, i), a(l + 3, i));
            for ((((v, &x0), &x1), &x2), &x3) in acc.iter_mut().zip(b0).zip(b1).zip(b2).zip(b3) {
                *v = a3.mul_add(x3, a2.mul_add(x2, a1.mul_add(x1, a0.mul_add(x0, *v))));
            }
        }
        l += 4;
    }
    for l in l..k {
        let b = moving.row(l, n);
        for (i, acc) in acc.chunks_exact_mut(n).enumerate() {
            let a = a(l, i);
            acc.iter_mut()
                .zip(b)
                .for_each(|(v, &b)| *v = a.mul_add(b, *v));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gemm(a: &[f32], k: usize, b: &[f32], n: usize, c: &mut [f32], accumulate: bool) {
        // SAFETY: a is k×k, b is k×n and c is k×n, all dense.
        unsafe {
            matrixmultiply::sgemm(
                k,
                k,
                n,
                1.0,
                a.as_ptr(),
                1,
                k as isize,
                b.as_ptr(),
                n as isize,
                1,
                if accumulate { 1.0 } else { 0.0 },
                c.as_mut_ptr(),
                n as isize,
                1,
            );
        }
    }

    #[test]
    fn the_identity_path_gives_the_gemm_bits() {
        let (k, n) = (128, 70);
        let mut a = vec![0.0f32; k * k];
        (0..k).for_each(|i| a[i * k + i] = 1.0);
        assert!(is_identity(&a, k, k, k));
        // Values of every sign and scale, signed zeros, subnormals.
        let b: Vec<f32> = (0..k * n)
            .map(|i| match i % 7 {
                0 => -0.0,
                1 => 0.0,
                2 => f32::MIN_POSITIVE / 4.0,
                _ => ((i as f32) * 0.618).sin() * 10f32.powi((i % 11) as i32 - 5),
            })
            .collect();
        let start: Vec<f32> = (0..k * n).map(|i| (i as f32 * 0.37).cos()).collect();
        for accumulate in [false, true] {
            let (mut direct, mut reference) = (start.clone(), start.clone());
            let moving = Operand {
                data: &b,
                stride: n,
            };
            assert!(add_moving(&mut direct, n, moving, k, n, accumulate));
            gemm(&a, k, &b, n, &mut reference, accumulate);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&direct), bits(&reference), "accumulate = {accumulate}");
        }
    }

    /// The identity is recognised by value, as `v == 1.0` on the diagonal and `v == 0.0`
    /// elsewhere would: negative zeros count as zeros, and any other value anywhere (the
    /// smallest subnormal, a NaN, a minus one) in any row is not the identity; columns past
    /// `m` in a longer row are not looked at.
    #[test]
    fn the_identity_is_recognised_by_value() {
        let (k, stride) = (19, 23);
        let mut a = vec![f32::NAN; k * stride];
        for l in 0..k {
            a[l * stride..l * stride + k].fill(if l % 2 == 0 { 0.0 } else { -0.0 });
            a[l * stride + l] = 1.0;
        }
        assert!(is_identity(&a, stride, k, k));
        let strangers = [f32::from_bits(1), -f32::from_bits(1), f32::NAN, -1.0, 2.0];
        for (i, &v) in strangers.iter().enumerate() {
            for (l, col) in [(0, 0), (0, k - 1), (7, 3), (7, 7), (7, 11), (k - 1, k - 1)] {
                let mut b = a.clone();
                b[l * stride + col] = v;
                assert!(
                    !is_identity(&b, stride, k, k),
                    "stranger {i} at ({l}, {col})"
                );
            }
        }
    }

    #[test]
    fn non_finite_moving_values_and_other_matrices_take_the_gemm() {
        let k = 4;
        let mut a = vec![0.0f32; k * k];
        (0..k).for_each(|i| a[i * k + i] = 1.0);
        let mut b = vec![1.0f32; k * 3];
        b[5] = f32::INFINITY;
        let mut c = vec![7.0f32; k * 3];
        let moving = Operand {
            data: &b,
            stride: 3,
        };
        assert!(!add_moving(&mut c, 3, moving, k, 3, true));
        assert!(c.iter().all(|&v| v == 7.0), "declining leaves dst alone");
        a[1] = 0.5;
        assert!(!is_identity(&a, k, k, k));
        assert!(!is_identity(&a[..k * (k - 1)], k, k - 1, k), "not square");
    }
}
