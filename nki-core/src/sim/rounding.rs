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
        DType::BF16 => {
            for (i, d) in dst.iter_mut().enumerate() {
                *d = half::bf16::from_f32(f(i)).to_f32();
            }
        }
        dt => {
            for (i, d) in dst.iter_mut().enumerate() {
                *d = dt.round(f(i));
            }
        }
    }
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
        ScalarOperand::Column { region } => (0..np).map(|r| Ok(store.row(region, r)?[0])).collect(),
    }
}

#[inline(always)]
pub(crate) fn round_into_in_place(row: &mut [f32], dtype: DType) {
    match dtype {
        DType::F32 => {}
        DType::BF16 => row
            .iter_mut()
            .for_each(|v| *v = crate::dtype::round_bf16(*v)),
        dt => row.iter_mut().for_each(|v| *v = dt.round(*v)),
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
    for (r, v) in values.into_iter().enumerate() {
        store.row_mut(res, r)?[0] = dt.round(v);
    }
    Ok(())
}
