//! `nc_matmul`'s tiling mode, as the NKI 0.7 `nki.isa.nc_matmul` docstring states it
//! (`matmul-tiling`): the PE array's 128 rows and 128 columns are cut into tiles of
//! `tile_size` `(row_size, column_size)`, each 64 or 128 on NeuronCore-v2 and 32, 64 or 128
//! from NeuronCore-v3; `tile_position` `(start_row, start_column)` is a multiple of the tile's
//! size below 128; the stationary operand `[K, M]` fits the tile (`K ≤ row_size`,
//! `M ≤ column_size`).

use super::violation;
use crate::error::NkiError;
use crate::ir::{Instruction, Op, Program};
use crate::target::Target;

/// The rule this module checks.
pub(super) const RULE: &str = "matmul-tiling";

/// Checks one instruction's tiling (instructions other than a tiled `nc_matmul` pass).
pub(super) fn check(program: &Program, inst: &Instruction) -> Result<(), NkiError> {
    let Op::NcMatmul {
        stationary,
        moving,
        tile_position,
        tile_size,
        perf_mode,
        ..
    } = &inst.op
    else {
        return Ok(());
    };
    let ([start_row, start_col], [rows, cols]) = (tile_position.as_slice(), tile_size.as_slice())
    else {
        return Ok(());
    };
    let sizes: &[usize] = if program.target == Target::Trn1 {
        &[64, 128]
    } else {
        &[32, 64, 128]
    };
    // The PE rows the stationary operand takes are its partitions (in double-row mode each
    // holds two of the contraction's values); its columns are the output's rows.
    let (k, (_, m, _)) = (stationary.np, perf_mode.dims(stationary, moving));
    let problem = [("row_size", *rows), ("column_size", *cols)]
        .into_iter()
        .find(|(_, size)| !sizes.contains(size))
        .map(|(what, size)| {
            format!(
                "tile_size's {what} is {size}; on {} it must be one of {sizes:?}",
                program.target
            )
        })
        .or_else(|| {
            [
                ("start_row", *start_row, "row_size", *rows),
                ("start_column", *start_col, "column_size", *cols),
            ]
            .into_iter()
            .find(|&(_, start, _, size)| !start.is_multiple_of(size) || start >= 128)
            .map(|(what, start, of, size)| {
                format!(
                    "tile_position's {what} is {start}; it must be a multiple of {of} {size} \
                         below 128"
                )
            })
        })
        .or_else(|| {
            (k > *rows)
                .then(|| format!("stationary has {k} partitions (K), more than row_size {rows}"))
        })
        .or_else(|| {
            (m > *cols)
                .then(|| format!("stationary has {m} columns (M), more than column_size {cols}"))
        });
    match problem {
        None => Ok(()),
        Some(message) => {
            let name = inst.op.name();
            Err(violation(
                RULE,
                format!(
                    "tile_size of {sizes:?}, tile_position a multiple of it below 128, stationary within it"
                ),
                format!(
                    "tile_position {tile_position:?}, tile_size {tile_size:?}, stationary [{k}, {m}]"
                ),
                name.into(),
                format!("{name}: {message}"),
                inst.loc,
            ))
        }
    }
}
