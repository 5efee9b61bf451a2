//! GpSimd's gathers within SBUF: `local_gather` (within each group of 16 partitions, from one
//! shared list of offsets) and `nc_n_gather` (within each partition, by its own indices).

use crate::ir::{Op, TileRegion};
use crate::lang::context::{Builder, with_builder};
use crate::loc::SourceLoc;

/// The values `local_gather`'s `num_elem_per_idx` may take (checked by [`crate::validate`]).
pub const LOCAL_GATHER_ELEMS_PER_INDEX: [usize; 6] = [1, 2, 4, 8, 16, 32];

/// `nisa.local_gather(dst, src_buffer, index, num_elem_per_idx, num_valid_indices)`: on GpSimd,
/// each group of 16 partitions (one of its eight cores) flattens its 16 partitions of the
/// uint16 `index` partition first (`index[16·c + p, f]` is offset `16·f + p`), keeps the first
/// `num_valid_indices` (default: all `16 · index.nf`), and every partition of the group gathers
/// `num_elem_per_idx` contiguous elements of its own partition of `src_buffer` at each offset:
/// `dst[p, k·n + e] = src_buffer[p, idx[k] + e]`. `dst` has `src_buffer`'s partitions and
/// `num_valid_indices · num_elem_per_idx` elements per partition. Checked here: the shapes; the
/// dtypes, partition multiple, `num_elem_per_idx` and index-count limits by
/// [`crate::validate`]; an offset past the source row is a simulation error.
#[track_caller]
pub fn local_gather(
    dst: impl Into<TileRegion>,
    src_buffer: impl Into<TileRegion>,
    index: impl Into<TileRegion>,
    num_elem_per_idx: usize,
    num_valid_indices: Option<usize>,
) {
    let loc = SourceLoc::caller();
    let (dst, src, index) = (dst.into(), src_buffer.into(), index.into());
    let inst = "local_gather";
    with_builder(|b| {
        let fail = |b: &mut Builder, m: String| b.fail(loc, format!("{inst}: {m}"));
        if index.np != src.np || dst.np != src.np {
            return fail(
                b,
                format!(
                    "src_buffer has {} partitions, index {} and dst {}; they must match",
                    src.np, index.np, dst.np
                ),
            );
        }
        let valid = num_valid_indices.unwrap_or(16 * index.nf);
        let want = valid.saturating_mul(num_elem_per_idx);
        if dst.nf != want {
            return fail(
                b,
                format!(
                    "dst has {} elements per partition but {valid} indices of {num_elem_per_idx} \
                     elements gather {want}",
                    dst.nf
                ),
            );
        }
        b.push_op(
            Op::LocalGather {
                dst,
                src,
                index,
                num_elem_per_idx,
                num_valid_indices,
            },
            loc,
        );
    });
}

/// `nisa.nc_n_gather(dst, data, indices)`: on GpSimd, `dst[p, j] = data[p, indices[p, j]]`,
/// each partition gathering from its own free elements (flattened) by its own uint32 indices.
/// `dst` has `indices`' shape and `data`'s partitions. Checked here: the shapes; the dtypes and
/// memories by [`crate::validate`]; an index outside `0..data`'s free size is a simulation
/// error.
#[track_caller]
pub fn nc_n_gather(
    dst: impl Into<TileRegion>,
    data: impl Into<TileRegion>,
    indices: impl Into<TileRegion>,
) {
    let loc = SourceLoc::caller();
    let (dst, data, indices) = (dst.into(), data.into(), indices.into());
    with_builder(|b| {
        if indices.np != data.np {
            b.fail(
                loc,
                format!(
                    "nc_n_gather: data has {} partitions but indices {}; they must match",
                    data.np, indices.np
                ),
            );
        } else if dst.shape() != indices.shape() {
            b.fail(
                loc,
                format!(
                    "nc_n_gather: dst has shape {:?} but indices {:?}; dst takes the indices' shape",
                    dst.shape(),
                    indices.shape()
                ),
            );
        } else {
            b.push_op(Op::NcNGather { dst, data, indices }, loc);
        }
    });
}
