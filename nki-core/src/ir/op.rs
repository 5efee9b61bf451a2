//! Engine instructions of the IR: what each computes (`Op`), their operands, and the tiles
//! and HBM ranges they read and write (the arithmetic they apply is in `math`).

use super::{ActFn, BinOp, DmaOperand, HbmAccess, TileRegion};
use serde::Serialize;

/// A per-partition operand: an immediate scalar, or a `(P, 1)` tile column.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ScalarOperand {
    /// The same value for every element.
    Imm {
        /// The value.
        value: f32,
    },
    /// One value per partition, broadcast along the free dim.
    Column {
        /// A region with `nf == 1`.
        region: TileRegion,
    },
}

/// The engine an elementwise two-tensor instruction runs on: NKI's `engine=` argument of
/// `nisa.tensor_tensor`. The arithmetic is the same (fp32 inside, rounded on write); what differs
/// is throughput, and that GpSimd cannot reach PSUM. Kernels move work to GpSimd when the vector
/// engine is their bottleneck and GpSimd is idle.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ElementwiseEngine {
    /// The vector engine (NKI's default for floating-point data).
    #[default]
    Vector,
    /// The GpSimd engine: eight general-purpose SIMD cores, no PSUM access.
    GpSimd,
}

impl ElementwiseEngine {
    /// The NKI spelling, `nisa.engine.<name>`.
    pub fn nki_name(self) -> &'static str {
        match self {
            ElementwiseEngine::Vector => "vector",
            ElementwiseEngine::GpSimd => "gpsimd",
        }
    }
}

/// One engine instruction, destination first.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "inst", rename_all = "snake_case")]
pub enum Op {
    /// DMA between HBM and SBUF.
    DmaCopy {
        /// Destination.
        dst: DmaOperand,
        /// Source.
        src: DmaOperand,
    },
    /// Vector (or GpSimd) engine: `dst = a <op> b` elementwise.
    TensorTensor {
        /// Destination.
        dst: TileRegion,
        /// First input.
        a: TileRegion,
        /// Second input.
        b: TileRegion,
        /// Operator.
        op: BinOp,
        /// The engine that runs it (NKI's `engine=`).
        engine: ElementwiseEngine,
    },
    /// Vector engine: `dst = (data <op0> operand0) <op1> operand1`.
    TensorScalar {
        /// Destination.
        dst: TileRegion,
        /// Input.
        data: TileRegion,
        /// First operator and operand.
        op0: BinOp,
        /// First operand.
        operand0: ScalarOperand,
        /// Optional second operator and operand.
        op1: Option<(BinOp, ScalarOperand)>,
    },
    /// Vector engine: `dst = (data <op0> operand0) <op1> operand1`, a [`Op::TensorScalar`]
    /// whose second operand is a full tile: `operand0` broadcasts along the free dim,
    /// `operand1` has `data`'s shape. Computed in fp32 (the intermediate too), rounded once to
    /// `dst`'s dtype; optionally reducing each row of the fp32 result into `reduce_res`.
    /// `data` and `operand1` cannot both be in PSUM.
    ScalarTensorTensor {
        /// Destination, `data`'s shape.
        dst: TileRegion,
        /// Input.
        data: TileRegion,
        /// First operator, applied to `data` and `operand0`.
        op0: BinOp,
        /// First operand: an immediate or a `(P, 1)` column.
        operand0: ScalarOperand,
        /// Second operator, applied to the first result and `operand1`.
        op1: BinOp,
        /// Second operand, `data`'s shape.
        operand1: TileRegion,
        /// Optional free-dim reduction of the result: operator and `(P, 1)` destination.
        reduce: Option<(BinOp, TileRegion)>,
    },
    /// Scalar engine: `dst = f(data·scale + bias)`, optionally reducing each row into `reduce_res`.
    Activation {
        /// Destination.
        dst: TileRegion,
        /// Function.
        func: ActFn,
        /// Input.
        data: TileRegion,
        /// Multiplier applied before the function.
        scale: ScalarOperand,
        /// Optional `(P, 1)` bias added before the function.
        bias: Option<TileRegion>,
        /// Optional free-dim reduction of the result: operator and `(P, 1)` destination.
        reduce: Option<(BinOp, TileRegion)>,
    },
    /// Vector engine: reduce the free dim of `data` into a `(P, 1)` destination.
    TensorReduce {
        /// Destination, `nf == 1`.
        dst: TileRegion,
        /// Operator.
        op: BinOp,
        /// Input.
        data: TileRegion,
        /// Negate the result.
        negate: bool,
    },
    /// Vector engine: mean and variance statistics of each partition of `data` (free size at
    /// most 512), as two `(count, mean, variance · count)` triples, of its even-indexed and of
    /// its odd-indexed elements: `dst` is `(P, 6)`. Feeds [`Op::BnAggr`].
    BnStats {
        /// Destination, `(P, 6)`.
        dst: TileRegion,
        /// Input.
        data: TileRegion,
    },
    /// Vector engine: combines the `(count, mean, variance · count)` triples of `data`
    /// (`(P, 3k)`, from [`Op::BnStats`]) into `dst` `(P, 2)`: the mean, then the biased
    /// variance.
    BnAggr {
        /// Destination, `(P, 2)`.
        dst: TileRegion,
        /// The triples.
        data: TileRegion,
    },
    /// Copy with a dtype cast (e.g. PSUM fp32 → SBUF bf16).
    TensorCopy {
        /// Destination.
        dst: TileRegion,
        /// Source.
        src: TileRegion,
    },
    /// Fill with a constant.
    Memset {
        /// Destination.
        dst: TileRegion,
        /// The value.
        value: f32,
    },
    /// GpSimd engine: `dst[p, f] = offset + channel_multiplier·p + step·f` for partition `p`
    /// and free index `f` within the destination region, computed in int32 and written in
    /// `dst`'s dtype (`nisa.iota` with a one-dimensional pattern `[[step, nf]]`).
    Iota {
        /// Destination, in SBUF.
        dst: TileRegion,
        /// The value at `[0, 0]`.
        offset: i32,
        /// Added per partition.
        channel_multiplier: i32,
        /// Added per free element.
        step: i32,
    },
    /// Vector engine (NeuronCore-v3 and newer): `dst[p, f] = on_true[p, f]` where
    /// `i comp0 bound0[p]` and `i comp1 bound1[p]` for `i = f + range_start` (in fp32), and
    /// `on_false` elsewhere; optionally reducing each row of the result into `reduce_res`.
    RangeSelect {
        /// Destination, `on_true`'s shape.
        dst: TileRegion,
        /// The values selected where both comparisons hold.
        on_true: TileRegion,
        /// First comparison, of the index against `bound0`.
        comp0: BinOp,
        /// `(P, 1)` fp32 column.
        bound0: TileRegion,
        /// Second comparison, of the index against `bound1`.
        comp1: BinOp,
        /// `(P, 1)` fp32 column.
        bound1: TileRegion,
        /// Added to the free index before comparing.
        range_start: f32,
        /// The value written where either comparison fails.
        on_false: f32,
        /// Optional free-dim reduction of the result: operator and `(P, 1)` destination.
        reduce: Option<(BinOp, TileRegion)>,
    },
    /// Tensor engine: `dst = dataᵀ`, an SBUF `[P, F]` region into a PSUM `[F, P]` region.
    NcTranspose {
        /// PSUM destination `[F, P]`.
        dst: TileRegion,
        /// SBUF source `[P, F]`.
        data: TileRegion,
    },
    /// Tensor engine: `dst (+)= stationaryᵀ · moving`, contraction over partitions.
    NcMatmul {
        /// PSUM destination `[M, N]`.
        dst: TileRegion,
        /// `[K, M]` in SBUF.
        stationary: TileRegion,
        /// `[K, N]` in SBUF.
        moving: TileRegion,
        /// Add into `dst` instead of overwriting it.
        accumulate: bool,
    },
}

impl Op {
    /// The `nki.isa` instruction name.
    pub const fn name(&self) -> &'static str {
        match self {
            Op::DmaCopy { .. } => "dma_copy",
            Op::TensorTensor { .. } => "tensor_tensor",
            Op::TensorScalar { .. } => "tensor_scalar",
            Op::ScalarTensorTensor { .. } => "scalar_tensor_tensor",
            Op::Activation { .. } => "activation",
            Op::TensorReduce { .. } => "tensor_reduce",
            Op::BnStats { .. } => "bn_stats",
            Op::BnAggr { .. } => "bn_aggr",
            Op::TensorCopy { .. } => "tensor_copy",
            Op::Memset { .. } => "memset",
            Op::Iota { .. } => "iota",
            Op::RangeSelect { .. } => "range_select",
            Op::NcMatmul { .. } => "nc_matmul",
            Op::NcTranspose { .. } => "nc_transpose",
        }
    }

    /// Tile regions the instruction writes.
    pub fn tile_writes(&self) -> Vec<&TileRegion> {
        match self {
            Op::DmaCopy {
                dst: DmaOperand::Tile { region },
                ..
            } => vec![region],
            Op::DmaCopy { .. } => vec![],
            Op::TensorTensor { dst, .. }
            | Op::TensorScalar { dst, .. }
            | Op::TensorReduce { dst, .. }
            | Op::BnStats { dst, .. }
            | Op::BnAggr { dst, .. }
            | Op::TensorCopy { dst, .. }
            | Op::Memset { dst, .. }
            | Op::Iota { dst, .. }
            | Op::NcMatmul { dst, .. }
            | Op::NcTranspose { dst, .. } => vec![dst],
            Op::ScalarTensorTensor { dst, reduce, .. }
            | Op::Activation { dst, reduce, .. }
            | Op::RangeSelect { dst, reduce, .. } => {
                let mut v = vec![dst];
                if let Some((_, r)) = reduce {
                    v.push(r);
                }
                v
            }
        }
    }

    /// Tile regions the instruction reads.
    pub fn tile_reads(&self) -> Vec<&TileRegion> {
        fn column(s: &ScalarOperand) -> Option<&TileRegion> {
            match s {
                ScalarOperand::Column { region } => Some(region),
                ScalarOperand::Imm { .. } => None,
            }
        }
        match self {
            Op::DmaCopy {
                src: DmaOperand::Tile { region },
                ..
            } => vec![region],
            Op::DmaCopy { .. } | Op::Memset { .. } | Op::Iota { .. } => vec![],
            Op::TensorTensor { a, b, .. } => vec![a, b],
            Op::TensorScalar {
                data,
                operand0,
                op1,
                ..
            } => {
                let mut v = vec![data];
                v.extend(column(operand0));
                if let Some((_, o)) = op1 {
                    v.extend(column(o));
                }
                v
            }
            Op::ScalarTensorTensor {
                data,
                operand0,
                operand1,
                ..
            } => {
                let mut v = vec![data];
                v.extend(column(operand0));
                v.push(operand1);
                v
            }
            Op::Activation {
                data, scale, bias, ..
            } => {
                let mut v = vec![data];
                v.extend(column(scale));
                v.extend(bias.as_ref());
                v
            }
            Op::TensorReduce { data, .. }
            | Op::BnStats { data, .. }
            | Op::BnAggr { data, .. }
            | Op::NcTranspose { data, .. } => vec![data],
            Op::TensorCopy { src, .. } => vec![src],
            Op::RangeSelect {
                on_true,
                bound0,
                bound1,
                ..
            } => vec![on_true, bound0, bound1],
            Op::NcMatmul {
                dst,
                stationary,
                moving,
                accumulate,
            } => {
                let mut v = vec![stationary, moving];
                if *accumulate {
                    v.push(dst);
                }
                v
            }
        }
    }

    /// HBM accesses the instruction reads and writes, as `(access, is_write)`.
    pub fn hbm_accesses(&self) -> Vec<(&HbmAccess, bool)> {
        let mut v = Vec::new();
        if let Op::DmaCopy { dst, src } = self {
            if let DmaOperand::Hbm { access } = dst {
                v.push((access, true));
            }
            if let DmaOperand::Hbm { access } = src {
                v.push((access, false));
            }
        }
        v
    }
}

impl Op {
    /// The same instruction with every tile region passed through `tile` and every HBM offset
    /// through `offset` (renumbering tiles, substituting loop indices).
    pub fn map_operands(
        &self,
        tile: &mut dyn FnMut(&TileRegion) -> TileRegion,
        offset: &mut dyn FnMut(&crate::affine::AffineExpr) -> crate::affine::AffineExpr,
    ) -> Op {
        fn scalar(
            s: &ScalarOperand,
            tile: &mut dyn FnMut(&TileRegion) -> TileRegion,
        ) -> ScalarOperand {
            match s {
                ScalarOperand::Imm { value } => ScalarOperand::Imm { value: *value },
                ScalarOperand::Column { region } => ScalarOperand::Column {
                    region: tile(region),
                },
            }
        }
        let mut dma = |d: &DmaOperand| match d {
            DmaOperand::Tile { region } => DmaOperand::Tile {
                region: tile(region),
            },
            DmaOperand::Hbm { access } => DmaOperand::Hbm {
                access: HbmAccess {
                    offset: offset(&access.offset),
                    ..access.clone()
                },
            },
        };
        match self {
            Op::DmaCopy { dst, src } => {
                let dst = dma(dst);
                Op::DmaCopy { dst, src: dma(src) }
            }
            Op::TensorTensor {
                dst,
                a,
                b,
                op,
                engine,
            } => Op::TensorTensor {
                dst: tile(dst),
                a: tile(a),
                b: tile(b),
                op: *op,
                engine: *engine,
            },
            Op::TensorScalar {
                dst,
                data,
                op0,
                operand0,
                op1,
            } => Op::TensorScalar {
                dst: tile(dst),
                data: tile(data),
                op0: *op0,
                operand0: scalar(operand0, tile),
                op1: op1.as_ref().map(|(op, s)| (*op, scalar(s, tile))),
            },
            Op::ScalarTensorTensor {
                dst,
                data,
                op0,
                operand0,
                op1,
                operand1,
                reduce,
            } => Op::ScalarTensorTensor {
                dst: tile(dst),
                data: tile(data),
                op0: *op0,
                operand0: scalar(operand0, tile),
                op1: *op1,
                operand1: tile(operand1),
                reduce: reduce.as_ref().map(|(op, r)| (*op, tile(r))),
            },
            Op::Activation {
                dst,
                func,
                data,
                scale,
                bias,
                reduce,
            } => Op::Activation {
                dst: tile(dst),
                func: *func,
                data: tile(data),
                scale: scalar(scale, tile),
                bias: bias.as_ref().map(&mut *tile),
                reduce: reduce.as_ref().map(|(op, r)| (*op, tile(r))),
            },
            Op::TensorReduce {
                dst,
                op,
                data,
                negate,
            } => Op::TensorReduce {
                dst: tile(dst),
                op: *op,
                data: tile(data),
                negate: *negate,
            },
            Op::BnStats { dst, data } => Op::BnStats {
                dst: tile(dst),
                data: tile(data),
            },
            Op::BnAggr { dst, data } => Op::BnAggr {
                dst: tile(dst),
                data: tile(data),
            },
            Op::TensorCopy { dst, src } => Op::TensorCopy {
                dst: tile(dst),
                src: tile(src),
            },
            Op::Memset { dst, value } => Op::Memset {
                dst: tile(dst),
                value: *value,
            },
            Op::Iota {
                dst,
                offset,
                channel_multiplier,
                step,
            } => Op::Iota {
                dst: tile(dst),
                offset: *offset,
                channel_multiplier: *channel_multiplier,
                step: *step,
            },
            Op::RangeSelect {
                dst,
                on_true,
                comp0,
                bound0,
                comp1,
                bound1,
                range_start,
                on_false,
                reduce,
            } => Op::RangeSelect {
                dst: tile(dst),
                on_true: tile(on_true),
                comp0: *comp0,
                bound0: tile(bound0),
                comp1: *comp1,
                bound1: tile(bound1),
                range_start: *range_start,
                on_false: *on_false,
                reduce: reduce.as_ref().map(|(op, r)| (*op, tile(r))),
            },
            Op::NcTranspose { dst, data } => Op::NcTranspose {
                dst: tile(dst),
                data: tile(data),
            },
            Op::NcMatmul {
                dst,
                stationary,
                moving,
                accumulate,
            } => Op::NcMatmul {
                dst: tile(dst),
                stationary: tile(stationary),
                moving: tile(moving),
                accumulate: *accumulate,
            },
        }
    }
}
