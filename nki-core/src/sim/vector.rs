//! Execution of the vector engine's `exponential`: fp32 arithmetic, row reductions of the fp32
//! results before they are rounded to the destination.

use crate::ir::{ScalarOperand, TileRegion};
use crate::sim::exec::{Ctx, ExecError};
use crate::sim::rounding::{column_values, round_into_in_place, write_column};
use crate::sim::row_math::reduce_row;
use crate::sim::rows::{Scratch, rows1};
use crate::sim::store::TileStore;

/// Executes `exponential`.
pub(crate) fn exponential(
    ctx: &Ctx<'_, '_>,
    store: &mut TileStore<'_>,
    s: &mut Scratch,
    (dst, src, max_value): (&TileRegion, &TileRegion, &ScalarOperand),
    reduce: Option<(&TileRegion, &ScalarOperand)>,
) -> Result<(), ExecError> {
    let dt = store.dtype(dst.tile);
    let maxes = column_values(store, max_value, dst.np)?;
    let inits = match reduce {
        Some((_, init)) => column_values(store, init, dst.np)?,
        None => Vec::new(),
    };
    let sums = rows1(
        store,
        dst,
        src,
        s,
        ctx.split,
        #[inline(always)]
        |r, out, x| {
            // x · 1 + (−max) is x − max exactly: the scalar engine's vectorised exponential.
            crate::engine_math::exp_row_inline(x, 1.0, -maxes[r], out);
            let sum = reduce
                .is_some()
                .then(|| inits[r] + reduce_row(crate::ir::BinOp::Add, out));
            round_into_in_place(out, dt);
            sum
        },
    )?;
    if let Some((res, _)) = reduce {
        write_column(store, res, sums.into_iter().flatten().collect())?;
    }
    Ok(())
}
