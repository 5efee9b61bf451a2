//! Normalising a few long rows (a decode step's tokens): the columns spread across the
//! partitions instead of one row per partition.
//!
//! With rows on the partitions, 8 rows of a 8192-wide hidden state use 8 of the 128 partitions:
//! one DMA engine in sixteen moves them and the engines work on 8 lanes. Here a tile of `m` rows
//! holds column `p·c + j` of row `r` (`c = D / 128`) at partition `p`, free element `r·c + j`
//! (the layout nki-library's token-generation norms use), so every partition and DMA engine
//! takes a share of every row. A row's statistics are then a sum across partitions: each
//! partition's partial sum per row, totalled by one matmul with a ones matrix as the stationary
//! operand, which leaves every row's total on every partition, where the per-row scale needs it.

use nki_core::prelude::*;

/// Rows at most this many, with `D` a multiple of 128, take this path.
pub(super) const FEW_ROWS: usize = 32;

/// Whether a `[n, d]` normalisation spreads its columns across the partitions.
pub(super) fn spreads(n: usize, d: usize) -> bool {
    n <= FEW_ROWS && d >= PMAX && d.is_multiple_of(PMAX)
}

/// The row tiles of `n` rows: two (one per core of a logical NeuronCore) when there are two
/// rows or more, the same tiles whatever the launch so that one core and two give the same bits.
pub(super) fn for_each_row_group(n: usize, body: impl FnMut(TileSpan)) {
    for_each_program_tile(n, n.div_ceil(2).max(1), body);
}

/// Rows `rows` of a `[n, d]` tensor (any shape with `d`-element rows) in the spread layout:
/// `[128, rows.size · d / 128]`.
pub(super) fn spread_rows(t: &Hbm, rows: &TileSpan, d: usize) -> HbmView {
    let c = d / PMAX;
    t.strided_view(
        rows.start.clone() * d as i64,
        vec![
            ViewDim {
                size: PMAX,
                stride: c as i64,
            },
            ViewDim {
                size: rows.size,
                stride: d as i64,
            },
            ViewDim { size: c, stride: 1 },
        ],
    )
}

/// A `[d]` vector (a weight or bias) in the spread layout of one row: `[128, d / 128]`.
pub(super) fn spread_vector(v: &Hbm, d: usize) -> Tile {
    let c = d / PMAX;
    let t = sbuf([PMAX, c], v.dtype());
    dma_copy(
        &t,
        v.strided_view(
            AffineExpr::constant(0),
            vec![
                ViewDim {
                    size: PMAX,
                    stride: c as i64,
                },
                ViewDim { size: c, stride: 1 },
            ],
        ),
    );
    t
}

/// Rows `rows` of a per-row statistic `[..B]`, as a `[rows.size, 1]` column.
pub(super) fn row_statistic(t: &Hbm, rows: &TileSpan) -> HbmView {
    t.reshape(&[t.numel(), 1])
        .rows(rows.start.clone(), rows.size)
}

/// The ones matrix whose matmul totals a column over the partitions onto every partition.
pub(super) fn ones() -> Tile {
    let ones = sbuf([PMAX, PMAX], DType::F32);
    memset(&ones, 1.0);
    ones
}

/// Every row's total of `op(x + bias)` over its columns, for a spread tile `xt` of `m` rows
/// (`bias` a `[128, m]` fp32 tile whose column `r` is added to row `r`, or none), as fp32 PSUM
/// tiles in two layouts: on every partition (`[128, m]`, column `r` row `r`'s total, for scaling
/// the spread rows) and one row per partition (`[m, 1]`, for storing per-row statistics). Both
/// are the same sums of the same partial sums, so they hold the same values; the caller's first
/// instruction on each reads it out of PSUM.
pub(super) fn row_totals(
    xt: &Tile,
    m: usize,
    op: ActFn,
    bias: Option<&Tile>,
    ones: &Tile,
) -> (Tile, Tile) {
    let c = xt.shape()[1] / m;
    let scratch = sbuf([PMAX, c], DType::F32);
    let partial = sbuf([PMAX, m], DType::F32);
    for r in 0..m {
        activation_reduce(
            &scratch,
            op,
            xt.cols(r * c, c),
            BinOp::Add,
            partial.cols(r, 1),
            bias.map(|b| b.cols(r, 1)),
            1.0,
        );
    }
    let spread = psum([PMAX, m], DType::F32);
    nc_matmul(&spread, ones, &partial, false);
    let by_row = psum([m, 1], DType::F32);
    nc_matmul(&by_row, &partial, ones.cols(0, 1), false);
    (spread, by_row)
}
