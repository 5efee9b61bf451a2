//! `nki_core::isa`: engine instructions, named and ordered as `nki.isa` (destination first,
//! then the arguments in NKI's order; NKI's keyword arguments are trailing parameters or, for
//! `tensor_scalar`'s second operation, `.then(op1, operand1)`). Each call records one
//! instruction with the caller's source line; operand shapes are checked here, hardware limits
//! later by [`crate::validate`]. The instructions live by engine: `dma` (`dma_copy`,
//! `dma_transpose`), `gather` (GpSimd's `local_gather` and `nc_n_gather`),
//! `elementwise` (the vector engine's and GpSimd's), `activation` (the scalar engine's `activation`, `activation_reduce`, `activate2`),
//! `arithmetic` (the vector engine's `reciprocal`, `exponential`, `tensor_scalar_reduce`,
//! `tensor_scalar_cumulative`, `tensor_tensor_scan`), `gpsimd` (`sequence_bounds`,
//! `nonzero_with_count`, `topk`),
//! `matmul` (the tensor engine's), `mx` (`quantize_mx`, `nc_matmul_mx`: MX data and its
//! scales), `partition` (the
//! cross-partition `tensor_partition_reduce`, `nc_stream_shuffle`), `predicated` (`tensor_copy_predicated`, `select_reduce`, `affine_select`), `random` (`rng`, `rand2`, `dropout`,
//! `set_rng_seed`, `rand_set_state`, `rand_get_state`), `register` (the engine sequencers'
//! `register_alloc`, `register_move`, `register_load`, `register_store`, and the DMA engines'
//! `dma_compute`), `selection` (the vector engine's `max8`, `nc_find_index8`,
//! `nc_match_replace8`) and `statistics` (`bn_stats`, `bn_aggr`); this module holds
//! their operand types and the shape checks they share.

use crate::ir::{BinOp, ScalarOperand, TileRegion};
use crate::lang::context::Builder;
use crate::lang::hbm::{Hbm, HbmView};
use crate::lang::tile::Tile;
use crate::loc::SourceLoc;

mod activation;
mod arithmetic;
mod dma;
mod elementwise;
mod gather;
mod gpsimd;
mod matmul;
mod multicore;
mod mx;
pub(crate) mod operators;
mod partition;
mod predicated;
mod random;
mod register;
mod selection;
mod statistics;
pub use activation::{
    ACTIVATE2_REDUCE_OPS, ACTIVATE2_STAGES, Activate2Stage, activate2, activate2_reduce,
    activation, activation_reduce,
};
pub use arithmetic::{
    CUMULATIVE_OPS, exponential, exponential_reduce, reciprocal, tensor_scalar_cumulative,
    tensor_scalar_reduce, tensor_tensor_scan,
};
pub use dma::{
    DmaCopyArgs, DmaTransposeArgs, TransposeSrc, dma_copy, dma_copy_with, dma_transpose,
    dma_transpose_axes,
};
pub use elementwise::{
    RANGE_SELECT_COMPARISONS, ScalarTensorTensorArgs, TensorScalar, TensorTensor, iota,
    iota_pattern, memset, range_select, scalar_tensor_tensor, scalar_tensor_tensor_reduce,
    scalar_tensor_tensor_with, tensor_copy, tensor_reduce, tensor_scalar, tensor_tensor,
};
pub use gather::{LOCAL_GATHER_ELEMS_PER_INDEX, local_gather, nc_n_gather};
pub use gpsimd::{
    GPSIMD_CORE_PARTITIONS, TOPK_K_MAX, TOPK_N_MAX, TOPK_N_MIN, nonzero_with_count,
    sequence_bounds, topk,
};
pub use matmul::{
    MatmulTiling, nc_matmul, nc_matmul_double_row, nc_matmul_is_transpose, nc_matmul_tiled,
    nc_transpose, nc_transpose_on,
};
pub use multicore::{LNC_CORES, core_barrier, sendrecv};
pub use mx::{
    MX_GROUP_PARTITIONS, MX_SCALE_OFFSETS, mx_scale_partitions, mx_scale_row, nc_matmul_mx,
    quantize_mx,
};
pub use partition::{
    PARTITION_REDUCE_OPS, SHUFFLE_KEEP, nc_stream_shuffle, tensor_partition_reduce,
};
pub use predicated::{affine_select, select_reduce, tensor_copy_predicated};
pub use random::{
    GPSIMD_STATE_WORDS, RAND2_DTYPES, RNG_DTYPES, VECTOR_STATE_WORDS, dropout, rand_get_state,
    rand_set_state, rand2, rng, set_rng_seed, state_words,
};
pub use register::{
    DMA_COMPUTE_MAX_SOURCES, DmaComputeArgs, dma_compute, register_alloc, register_load,
    register_move, register_store,
};
pub use selection::{
    SELECT8_MAX_ELEMENTS, SELECT8_MIN_ELEMENTS, max8, nc_find_index8, nc_match_replace8,
};
pub use statistics::{BN_STATS_FMAX, bn_aggr, bn_stats};

/// Either side of a `dma_copy`: an HBM view or a tile region.
#[derive(Clone, Debug)]
pub enum DmaArg {
    /// Device memory.
    Hbm(HbmView),
    /// On-chip tile.
    Tile(TileRegion),
}

impl From<HbmView> for DmaArg {
    fn from(v: HbmView) -> DmaArg {
        DmaArg::Hbm(v)
    }
}

impl From<&Hbm> for DmaArg {
    fn from(h: &Hbm) -> DmaArg {
        DmaArg::Hbm(h.view())
    }
}

impl From<TileRegion> for DmaArg {
    fn from(r: TileRegion) -> DmaArg {
        DmaArg::Tile(r)
    }
}

impl From<&TileRegion> for DmaArg {
    fn from(r: &TileRegion) -> DmaArg {
        DmaArg::Tile(r.clone())
    }
}

impl From<Tile> for DmaArg {
    fn from(t: Tile) -> DmaArg {
        DmaArg::Tile(t.region())
    }
}

impl From<&Tile> for DmaArg {
    fn from(t: &Tile) -> DmaArg {
        DmaArg::Tile(t.region())
    }
}

impl From<f32> for ScalarOperand {
    fn from(value: f32) -> ScalarOperand {
        ScalarOperand::Imm { value }
    }
}

impl From<TileRegion> for ScalarOperand {
    fn from(region: TileRegion) -> ScalarOperand {
        ScalarOperand::Column { region }
    }
}

impl From<&TileRegion> for ScalarOperand {
    fn from(region: &TileRegion) -> ScalarOperand {
        ScalarOperand::Column {
            region: region.clone(),
        }
    }
}

impl From<Tile> for ScalarOperand {
    fn from(t: Tile) -> ScalarOperand {
        ScalarOperand::Column { region: t.region() }
    }
}

impl From<&Tile> for ScalarOperand {
    fn from(t: &Tile) -> ScalarOperand {
        ScalarOperand::Column { region: t.region() }
    }
}

fn same_shape(b: &mut Builder, loc: SourceLoc, inst: &str, what: &[(&str, &TileRegion)]) -> bool {
    let (n0, r0) = what[0];
    for (n, r) in &what[1..] {
        if r.shape() != r0.shape() {
            b.fail(
                loc,
                format!(
                    "{inst}: {n} has shape {:?} but {n0} has shape {:?}",
                    r.shape(),
                    r0.shape()
                ),
            );
            return false;
        }
    }
    true
}

fn column_ok(
    b: &mut Builder,
    loc: SourceLoc,
    inst: &str,
    name: &str,
    col: &TileRegion,
    np: usize,
) -> bool {
    if col.shape() != [np, 1] {
        b.fail(
            loc,
            format!(
                "{inst}: {name} must be a ({np}, 1) column, got shape {:?}",
                col.shape()
            ),
        );
        return false;
    }
    true
}

fn scalar_ok(
    b: &mut Builder,
    loc: SourceLoc,
    inst: &str,
    name: &str,
    s: &ScalarOperand,
    np: usize,
) -> bool {
    match s {
        ScalarOperand::Imm { .. } => true,
        ScalarOperand::Column { region } => column_ok(b, loc, inst, name, region, np),
    }
}

/// Checks an instruction's optional free-dim reduction `(reduce_op, reduce_res)`: `reduce_res`
/// is a `(np, 1)` column and `reduce_op` a reduction operator (add, multiply, maximum, minimum:
/// those with an identity to start from).
fn reduce_ok(
    b: &mut Builder,
    loc: SourceLoc,
    inst: &str,
    reduce: Option<&(BinOp, TileRegion)>,
    np: usize,
) -> bool {
    let Some((op, res)) = reduce else {
        return true;
    };
    if !column_ok(b, loc, inst, "reduce_res", res, np) {
        return false;
    }
    if op.reduce_identity().is_none() {
        b.fail(loc, not_a_reduction(inst, *op));
        return false;
    }
    true
}

/// Why `op` cannot be `inst`'s reduction operator.
pub(crate) fn not_a_reduction(inst: &str, op: BinOp) -> String {
    let why = if op == BinOp::Subtract {
        " (the docs list nl.subtract as a reduction without saying what it folds; the simulator \
         does not implement it as one)"
    } else {
        ""
    };
    format!("{inst}: {op:?} is not a reduction operator{why}")
}

/// Checks that `r` (operand `name` of `inst`) is in a floating-point tile.
fn float_ok(b: &mut Builder, loc: SourceLoc, inst: &str, name: &str, r: &TileRegion) -> bool {
    match b.tiles.get(r.tile.0 as usize).map(|t| t.dtype) {
        Some(dt) if !dt.is_float() => {
            b.fail(
                loc,
                format!("{inst}: {name} must be a floating-point tile, got {dt}"),
            );
            false
        }
        _ => true,
    }
}
