//! Tiling helpers shared by the kernels: rows of a tensor's last dimension, and column chunks.

use nki_core::prelude::*;

/// Columns per chunk of the row kernels: 2048 fp32 = 8 KiB per partition per tile.
pub(crate) const CHUNK: usize = 2048;

/// Rows up to this many bytes per partition (all the tensors a kernel keeps together) stay in
/// SBUF between a kernel's first pass and its second (16384 bf16 or 8192 fp32 columns of one
/// tensor); longer rows are loaded twice.
pub(crate) const KEEP_ROW_BYTES: usize = 32 * 1024;

/// Whether `tensors` rows of `d` elements of `dtype` fit [`KEEP_ROW_BYTES`] together.
pub(crate) fn keeps_rows(d: usize, dtype: DType, tensors: usize) -> bool {
    tensors * d * dtype.size_bytes() <= KEEP_ROW_BYTES
}

/// `[..B, D]` as `(N, D)`: every leading dim flattened into rows of the last one.
pub(crate) fn rows_of(x: &Hbm) -> (usize, usize) {
    let d = *x.shape().last().unwrap_or(&1);
    (x.numel() / d.max(1), d)
}

/// `(start, width)` of the consecutive `size`-wide pieces of `0..total`, the last one ragged.
pub(crate) fn spans(total: usize, size: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..total)
        .step_by(size.max(1))
        .map(move |start| (start, size.min(total - start)))
}

/// `(start, width)` of each [`CHUNK`]-column chunk of a `d`-wide row.
pub(crate) fn column_chunks(d: usize) -> Vec<(usize, usize)> {
    spans(d, CHUNK).collect()
}

/// Views `t` as rows of its last dimension: `[rows, cols]`.
pub(crate) fn as_rows(t: &Hbm) -> HbmView {
    let (rows, cols) = rows_of(t);
    t.reshape(&[rows, cols])
}

/// The unit of the columns each core takes of the rows [`for_each_chunk`] does not share out in
/// whole tiles: 128 bytes of fp32 per partition.
const CORE_COLUMN_UNIT: usize = 32;

/// The least bytes per partition each core's share of a row must hold for [`for_each_chunk`] to
/// share the rows left over from whole tiles by columns: below it, the cost model's fixed cost
/// of the extra instructions each core then runs outweighs the bytes it no longer moves (fp32
/// rows of 130 × 512 cost 5.49 µs shared by tiles and 6.07 µs by columns; 130 × 1024, 7.90
/// and 6.34 µs; bf16 130 × 2048, 7.90 and 6.34 µs).
const CORE_COLUMN_SHARE_BYTES: usize = 2048;

/// Runs `body(rows, cols)` over this program's `[rows, cols]` tiles of the row view `view`
/// (rows tiled 128 to the partitions, columns in chunks of [`CHUNK`], ragged tails included),
/// for kernels whose elements are independent. The cores of the launch share out the whole
/// 128-row tiles that come out even, as many to each ([`tile_shared_rows`]). The rows left over
/// (fewer whole tiles than cores, and the ragged tail) every core takes, each its share of the
/// columns in [`CORE_COLUMN_UNIT`]-wide units ([`program_range`]), when that share of a row is
/// at least [`CORE_COLUMN_SHARE_BYTES`]; narrower rows are shared out tile by tile. So 130 wide
/// rows are not 128 on one core and 2 on the other: each core moves half of every row, with as
/// many instructions as before (an instruction takes as long on 2 partitions as on 128, a DMA's
/// time follows its bytes).
pub(crate) fn for_each_chunk(view: &HbmView, mut body: impl FnMut(&TileSpan, TileSpan)) {
    let [total_rows, total_cols] = [view.shape()[0], view.shape()[1]];
    let programs = program_instance().map_or(1, |(_, n)| n);
    let share_bytes = total_cols * view.dtype().size_bytes() / programs.max(1);
    let whole = if share_bytes >= CORE_COLUMN_SHARE_BYTES {
        tile_shared_rows(total_rows, programs)
    } else {
        total_rows
    };
    for_each_program_tile(whole, PMAX, |r| {
        for_each_tile(total_cols, CHUNK, |c| body(&r, c));
    });
    for_each_tile_in(whole..total_rows, PMAX, |r| {
        let cols = program_range(total_cols, CORE_COLUMN_UNIT);
        for_each_tile_in(cols, CHUNK, |c| body(&r, c));
    });
}

/// Rows `0..` this many of `total_rows` [`for_each_chunk`] shares between `programs` cores in
/// whole 128-row tiles, as many tiles to each: the largest multiple of `programs` tiles that
/// fits.
fn tile_shared_rows(total_rows: usize, programs: usize) -> usize {
    let programs = programs.max(1);
    total_rows / PMAX / programs * programs * PMAX
}

/// Runs `body` over this program's 128-row tiles of `0..total_rows`: the row tiles (the ragged
/// last one included) are split across the cores of the launch ([`for_each_program_tile`]).
pub(crate) fn for_each_row_tile(total_rows: usize, body: impl FnMut(TileSpan)) {
    for_each_program_tile(total_rows, PMAX, body);
}

/// Writes zeros to every element of `out`, viewed as `[rows, cols]` of its last dimension:
/// what a sum over no rows gives (the weight gradients of an empty batch, a kernel's only
/// work then), split across the cores of the launch as [`for_each_chunk`] splits.
pub(crate) fn fill_zeros(out: &Hbm) {
    let (rows, cols) = rows_of(out);
    if rows == 0 || cols == 0 {
        return;
    }
    let view = out.reshape(&[rows, cols]);
    let zeros = sbuf([rows.min(PMAX), cols.min(CHUNK)], out.dtype());
    memset(&zeros, 0.0);
    for_each_chunk(&view, |r, c| {
        dma_copy(
            block(&view, r, &c),
            zeros.region().slice(0, r.size, 0, c.size),
        );
    });
}

/// The `[r, c]` block of a row view.
pub(crate) fn block(v: &HbmView, r: &TileSpan, c: &TileSpan) -> HbmView {
    v.clone()
        .rows(r.start.clone(), r.size)
        .cols(c.start.clone(), c.size)
}

/// `xᵀ` of an SBUF tile `[p, f]` (`p, f ≤ 128`) into a new SBUF tile `[f, p]` of `dtype`,
/// multiplied by `scale` on the way out of PSUM.
pub(crate) fn transposed(x: &Tile, scale: f32, dtype: DType) -> Tile {
    let [p, f] = x.shape();
    let t = psum([f, p], x.dtype());
    nc_transpose(&t, x);
    let out = sbuf([f, p], dtype);
    if scale == 1.0 {
        tensor_copy(&out, &t);
    } else {
        tensor_scalar(&out, &t, BinOp::Multiply, scale);
    }
    out
}

/// `[P, P]` identity matrix in `dtype`: the stationary operand that makes `nc_matmul` an add
/// into PSUM (its `[n, n]` corner for an `n`-row moving operand).
pub fn identity(dtype: DType) -> Tile {
    let diff = sbuf([PMAX, PMAX], DType::F32);
    iota(&diff, 0, 1, -1);
    let eye = sbuf([PMAX, PMAX], dtype);
    tensor_scalar(&eye, &diff, BinOp::Equal, 0.0);
    eye
}

/// The PSUM-bank-sized column pieces `(start, width)` of `width` columns: one fp32 matmul
/// output (at most [`PSUM_BANK_FMAX`] columns) each.
pub fn psum_banks(width: usize) -> impl Iterator<Item = (usize, usize)> {
    spans(width, PSUM_BANK_FMAX)
}
