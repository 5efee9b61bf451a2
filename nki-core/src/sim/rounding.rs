//! Writing engine results: every value rounded to the destination's dtype (round to nearest
//! even), the per-partition values of a scalar operand, and a `reduce_res` column.

use crate::dtype::DType;
use crate::ir::{ScalarOperand, TileRegion};
use crate::sim::store::{StoreError, TileStore};

/// Writes `f(i)` rounded to `dtype` into every `dst[i]`. `for` loops rather than `for_each`:
/// `for_each` goes through an out-of-line `fold` that the compiler may leave outside the caller's
/// wide-vector copy ([`crate::wide`]), running the loop four lanes wide.
#[inline(always)]
pub(crate) fn round_into(dst: &mut [f32], dtype: DType, f: impl Fn(usize) -> f32) {
    match dtype {
        DType::F32 => {
            for (i, d) in dst.iter_mut().enumerate() {
                *d = f(i);
            }
        }
        // `round_bf16` is `half::bf16::from_f32(v).to_f32()` bit for bit (NaN included) without
        // its branches, so the loop vectorises (bf16 transposes and copies were 2x slower).
        DType::BF16 => {
            for (i, d) in dst.iter_mut().enumerate() {
                *d = crate::dtype::round_bf16(f(i));
            }
        }
        dt => {
            for (i, d) in dst.iter_mut().enumerate() {
                *d = dt.round(f(i));
            }
        }
    }
}

/// `row` cut to `out`'s length, for the element loops of [`round_into`] that read it by index:
/// with the lengths equal in sight, the compiler drops the per-element bounds checks that keep
/// a short row's loop (64 elements, an attention block) from running in vectors.
#[inline(always)]
pub(crate) fn as_long_as<'a>(row: &'a [f32], out: &[f32]) -> &'a [f32] {
    &row[..out.len()]
}

/// The per-partition values of a scalar operand for `np` rows (read before the destination is
/// taken out of the store, since a column may live in the destination tile).
pub(crate) fn column_values(
    store: &TileStore<'_>,
    s: &ScalarOperand,
    np: usize,
) -> Result<Vec<f32>, StoreError> {
    match s {
        ScalarOperand::Imm { value } => Ok(vec![*value; np]),
        ScalarOperand::Column { region } => {
            // The tile's storage once, not a lookup per row: this runs per instruction row.
            let (data, stride) = store.data(region.tile)?;
            let at = |r: usize| data[(region.p0 + r) * stride + region.f0];
            Ok((0..np).map(at).collect())
        }
    }
}

/// Rounds every value of `row` to `dtype` in place. `for` loops, as in [`round_into`].
#[inline(always)]
pub(crate) fn round_into_in_place(row: &mut [f32], dtype: DType) {
    match dtype {
        DType::F32 => {}
        DType::BF16 => {
            for v in row.iter_mut() {
                *v = crate::dtype::round_bf16(*v);
            }
        }
        dt => {
            for v in row.iter_mut() {
                *v = dt.round(*v);
            }
        }
    }
}

/// Writes one value per partition into the `(P, 1)` column `res`, rounded to its dtype (a
/// `reduce_res`).
pub(crate) fn write_column(
    store: &mut TileStore<'_>,
    res: &TileRegion,
    values: Vec<f32>,
) -> Result<(), StoreError> {
    let dt = store.dtype(res.tile);
    let (mut data, stride) = store.take(res.tile)?;
    for (r, v) in values.into_iter().enumerate() {
        data[(res.p0 + r) * stride + res.f0] = dt.round(v);
    }
    store.restore(res.tile, data);
    Ok(())
}

#[cfg(test)]
mod bf16_tests {
    use super::*;

    /// `round_into`'s bf16 rounding is `half`'s conversion bit for bit, NaN payloads included.
    #[test]
    fn bf16_rounding_is_halfs_bit_for_bit() {
        let specials = [
            0u32,
            0x8000_0000,
            0x7F80_0000,
            0xFF80_0000,
            0x7F7F_FFFF,
            0x7FC0_0000,
        ];
        let sampled = (0..u32::MAX / 1009).map(|i| i * 1009);
        let bits: Vec<u32> = specials
            .into_iter()
            .chain(sampled)
            .chain(0x7F80_0001..0x7F80_4000)
            .collect();
        let mut out = vec![0.0f32; bits.len()];
        round_into(&mut out, DType::BF16, |i| f32::from_bits(bits[i]));
        for (b, got) in bits.iter().zip(&out) {
            let want = half::bf16::from_f32(f32::from_bits(*b)).to_f32();
            assert_eq!(got.to_bits(), want.to_bits(), "{b:#010x}");
        }
    }
}
