//! Engine instructions of the IR: what each computes (`Op`), their operands, and the tiles
//! and HBM ranges they read and write (the arithmetic they apply is in `math`).

use super::operand::{Access, Operand, OperandMap, OperandUse, Param};
use super::{ActFn, BinOp, DmaOperand, HbmAccess, RegisterId, RegisterValue, TileRegion};
use crate::affine::AffineExpr;
use serde::Serialize;

/// Declares [`Op`] and derives from its declaration everything that follows the operands: the
/// instruction names, the operand visitor, and the accessors built on it. A variant is
/// `Name = "nki_name" { role field: Type, ... }`, the role `read`, `write` or `param`, with an
/// optional `reads field when flag` for a destination an instruction also reads when a boolean
/// parameter says so (`nc_matmul`'s accumulation), or `keeps field & ...` for destinations it
/// writes only in part, the rest keeping its value (`tensor_copy_predicated`), so it also reads
/// them.
macro_rules! instructions {
    (
        $(#[$enum_doc:meta])*
        pub enum Op {
            $(
                $(#[$doc:meta])*
                $variant:ident = $name:literal {
                    $( $(#[$field_doc:meta])* $role:ident $field:ident : $ty:ty ),* $(,)?
                } $(reads $also:ident when $flag:ident)? $(keeps $($kept:ident)&+)?
            ),* $(,)?
        }
    ) => {
        $(#[$enum_doc])*
        #[derive(Clone, Debug, PartialEq, Serialize)]
        #[serde(tag = "inst", rename_all = "snake_case")]
        pub enum Op {
            $(
                $(#[$doc])*
                $variant { $( $(#[$field_doc])* $field: $ty ),* },
            )*
        }

        impl Op {
            /// Every instruction's `nki.isa` name, in declaration order.
            pub const NAMES: &'static [&'static str] = &[$($name),*];

            /// The `nki.isa` instruction name.
            pub const fn name(&self) -> &'static str {
                match self {
                    $( Op::$variant { .. } => $name, )*
                }
            }

            /// Calls `f` with every tile region and HBM access the instruction names, in field
            /// order, with how it uses each.
            pub fn visit_operands<'a>(&'a self, f: &mut dyn FnMut(OperandUse<'a>)) {
                match self {
                    $(
                        #[allow(unused_variables)]
                        Op::$variant { $($field),* } => {
                            $( instructions!(@visit $role $field f); )*
                            $( if *$flag { Operand::visit($also, Access::Read, f); } )?
                            $($( Operand::visit($kept, Access::Read, f); )+)?
                        }
                    )*
                }
            }

            /// Calls `f` with every ALU operator the instruction uses (`op=`, `op0=`,
            /// `reduce_op=`, ...), in field order.
            pub fn visit_operators(&self, f: &mut dyn FnMut(BinOp)) {
                match self {
                    $(
                        #[allow(unused_variables)]
                        Op::$variant { $($field),* } => {
                            $( instructions!(@ops $role $field f); )*
                        }
                    )*
                }
            }

            /// The same instruction with every tile region passed through `tile` and every HBM
            /// offset through `offset` (renumbering tiles, substituting loop indices).
            pub fn map_operands(
                &self,
                tile: &mut dyn FnMut(&TileRegion) -> TileRegion,
                offset: &mut dyn FnMut(&AffineExpr) -> AffineExpr,
            ) -> Op {
                let mut m = OperandMap { tile, offset };
                match self {
                    $(
                        Op::$variant { $($field),* } => Op::$variant {
                            $( $field: instructions!(@map $role $field m) ),*
                        },
                    )*
                }
            }
        }
    };
    (@visit read $field:ident $f:ident) => { Operand::visit($field, Access::Read, $f) };
    (@visit write $field:ident $f:ident) => { Operand::visit($field, Access::Write, $f) };
    (@visit param $field:ident $f:ident) => { () };
    (@ops read $field:ident $f:ident) => { Operand::operators($field, $f) };
    (@ops write $field:ident $f:ident) => { Operand::operators($field, $f) };
    (@ops param $field:ident $f:ident) => { Param::operators($field, $f) };
    (@map read $field:ident $m:ident) => { Operand::map($field, &mut $m) };
    (@map write $field:ident $m:ident) => { Operand::map($field, &mut $m) };
    (@map param $field:ident $m:ident) => { $field.clone() };
}

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

/// How a DMA's descriptors are generated: NKI's `nisa.dge_mode`. The simulator moves the same
/// bytes whichever is chosen; validation checks which an instruction allows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DgeMode {
    /// The compiler chooses (NKI's default).
    #[default]
    Unknown,
    /// Software descriptor generation on GpSimd (the indirect forms).
    Swdge,
    /// The hardware descriptor generator (NeuronCore-v3 and newer).
    Hwdge,
    /// Descriptors made by the runtime before execution.
    None,
}

impl DgeMode {
    /// Every mode, in `nisa.dge_mode`'s order.
    pub const ALL: [DgeMode; 4] = [
        DgeMode::Unknown,
        DgeMode::Swdge,
        DgeMode::Hwdge,
        DgeMode::None,
    ];

    /// The NKI spelling, `nisa.dge_mode.<name>`.
    pub fn nki_name(self) -> &'static str {
        match self {
            DgeMode::Unknown => "unknown",
            DgeMode::Swdge => "swdge",
            DgeMode::Hwdge => "hwdge",
            DgeMode::None => "none",
        }
    }

    /// The mode `nisa.dge_mode.<name>` names.
    pub fn from_nki_name(name: &str) -> Option<DgeMode> {
        DgeMode::ALL.into_iter().find(|m| m.nki_name() == name)
    }
}

/// What a DMA does with an out-of-bounds index of an indirect access: NKI's `nisa.oob_mode`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OobMode {
    /// A runtime error (NKI's default).
    #[default]
    Error,
    /// The transfer of that index is skipped.
    Skip,
}

impl OobMode {
    /// The NKI spelling, `nisa.oob_mode.<name>`.
    pub fn nki_name(self) -> &'static str {
        match self {
            OobMode::Error => "error",
            OobMode::Skip => "skip",
        }
    }

    /// The mode `nisa.oob_mode.<name>` names.
    pub fn from_nki_name(name: &str) -> Option<OobMode> {
        [OobMode::Error, OobMode::Skip]
            .into_iter()
            .find(|m| m.nki_name() == name)
    }
}

instructions! {
    /// One engine instruction, destination first. Each variant is one `nki.isa` instruction:
    /// its NKI name, then its fields, each declared as an operand the instruction `read`s or
    /// `write`s, or a `param`eter naming no memory.
    pub enum Op {
    /// DMA between HBM and SBUF.
    DmaCopy = "dma_copy" {
        /// Destination.
        write dst: DmaOperand,
        /// Source.
        read src: DmaOperand,
    },
    /// DMA engines (NeuronCore-v3 and newer): `dst` = `src` transposed. `src` has the shape
    /// `dims` (2 to 4 dims: `[a, b]`, `[a, b, c]` or `[a, b, c, d]`, the first its rows and the
    /// others merged, row-major, into its free run); `dst` is that shape permuted by
    /// `(1, 0)`, `(2, 1, 0)` or `(3, 1, 2, 0)` (its first permuted dim the partitions, the
    /// others its free run). Values pass through unconverted (one dtype on both sides).
    DmaTranspose = "dma_transpose" {
        /// SBUF destination, the permuted shape.
        write dst: TileRegion,
        /// HBM or SBUF source, `[dims[0], product of the other dims]`.
        read src: DmaOperand,
        /// The source's dims.
        param dims: Vec<usize>,
        /// DMA queue priority 0..=3, lower first (NeuronCore-v4 and newer).
        param priority: Option<u8>,
        /// How the descriptors are generated.
        param dge_mode: DgeMode,
        /// What an out-of-bounds indirect index does.
        param oob_mode: OobMode,
    },
    /// Vector (or GpSimd) engine: `dst = a <op> b` elementwise.
    TensorTensor = "tensor_tensor" {
        /// Destination.
        write dst: TileRegion,
        /// First input.
        read a: TileRegion,
        /// Second input.
        read b: TileRegion,
        /// Operator.
        param op: BinOp,
        /// The engine that runs it (NKI's `engine=`).
        param engine: ElementwiseEngine,
    },
    /// Vector engine: `dst = (data <op0> operand0) <op1> operand1`.
    TensorScalar = "tensor_scalar" {
        /// Destination.
        write dst: TileRegion,
        /// Input.
        read data: TileRegion,
        /// First operator and operand.
        param op0: BinOp,
        /// First operand.
        read operand0: ScalarOperand,
        /// Optional second operator and operand.
        read op1: Option<(BinOp, ScalarOperand)>,
    },
    /// Vector engine: `dst = (data <op0> operand0) <op1> operand1`, a [`Op::TensorScalar`]
    /// whose second operand is a full tile: `operand0` broadcasts along the free dim,
    /// `operand1` has `data`'s shape. Computed in fp32 (the intermediate too), rounded once to
    /// `dst`'s dtype; optionally reducing each row of the fp32 result into `reduce_res`.
    /// `data` and `operand1` cannot both be in PSUM.
    ScalarTensorTensor = "scalar_tensor_tensor" {
        /// Destination, `data`'s shape.
        write dst: TileRegion,
        /// Input.
        read data: TileRegion,
        /// First operator, applied to `data` and `operand0`.
        param op0: BinOp,
        /// First operand: an immediate or a `(P, 1)` column.
        read operand0: ScalarOperand,
        /// Second operator, applied to the first result and `operand1`.
        param op1: BinOp,
        /// Second operand, `data`'s shape.
        read operand1: TileRegion,
        /// Optional free-dim reduction of the result: operator and `(P, 1)` destination.
        write reduce: Option<(BinOp, TileRegion)>,
    },
    /// Scalar engine: `dst = f(data·scale + bias)`, optionally reducing each row into `reduce_res`.
    Activation = "activation" {
        /// Destination.
        write dst: TileRegion,
        /// Function.
        param func: ActFn,
        /// Input.
        read data: TileRegion,
        /// Multiplier applied before the function.
        read scale: ScalarOperand,
        /// Optional `(P, 1)` bias added before the function.
        read bias: Option<TileRegion>,
        /// Optional free-dim reduction of the result: operator and `(P, 1)` destination.
        write reduce: Option<(BinOp, TileRegion)>,
    },
    /// Scalar engine (NeuronCore-v4+): `dst = f((data <op0> imm0) <op1> imm1)`, each stage an
    /// operator and its operand (an immediate or a `(P, 1)` column) or `None` for `nl.bypass`,
    /// either stage's operands swapped when its `reverse` flag is set (`imm0 <op0> data`);
    /// `relu_param` is the function's parameter ([`ActFn::apply_with`]: `nl.prelu`'s slope).
    /// Computed in fp32, rounded once to `dst`; optionally reducing each row of the fp32
    /// results into `reduce_res` (NKI's `reduce_cmd=reset_reduce`).
    Activate2 = "activate2" {
        /// Destination, `data`'s shape.
        write dst: TileRegion,
        /// Function.
        param func: ActFn,
        /// Input.
        read data: TileRegion,
        /// The first tensor-scalar stage: `op0` and `imm0` (`None`: `nl.bypass`).
        read stage0: Option<(BinOp, ScalarOperand)>,
        /// `imm0 <op0> data` instead of `data <op0> imm0`.
        param reverse0: bool,
        /// The second tensor-scalar stage: `op1` and `imm1` (`None`: `nl.bypass`).
        read stage1: Option<(BinOp, ScalarOperand)>,
        /// `imm1 <op1> x` instead of `x <op1> imm1`.
        param reverse1: bool,
        /// The function's parameter: an immediate or a `(P, 1)` column.
        read relu_param: ScalarOperand,
        /// Optional free-dim reduction of the result: operator and `(P, 1)` destination.
        write reduce: Option<(BinOp, TileRegion)>,
    },
    /// Vector engine: reduce the free dim of `data` into a `(P, 1)` destination.
    TensorReduce = "tensor_reduce" {
        /// Destination, `nf == 1`.
        write dst: TileRegion,
        /// Operator.
        param op: BinOp,
        /// Input.
        read data: TileRegion,
        /// Negate the result.
        param negate: bool,
    },
    /// Vector engine: mean and variance statistics of each partition of `data` (free size at
    /// most 512), as two `(count, mean, variance · count)` triples, of its even-indexed and of
    /// its odd-indexed elements: `dst` is `(P, 6)`. Feeds [`Op::BnAggr`].
    BnStats = "bn_stats" {
        /// Destination, `(P, 6)`.
        write dst: TileRegion,
        /// Input.
        read data: TileRegion,
    },
    /// Vector engine: combines the `(count, mean, variance · count)` triples of `data`
    /// (`(P, 3k)`, from [`Op::BnStats`]) into `dst` `(P, 2)`: the mean, then the biased
    /// variance.
    BnAggr = "bn_aggr" {
        /// Destination, `(P, 2)`.
        write dst: TileRegion,
        /// The triples.
        read data: TileRegion,
    },
    /// Copy with a dtype cast (e.g. PSUM fp32 → SBUF bf16).
    TensorCopy = "tensor_copy" {
        /// Destination.
        write dst: TileRegion,
        /// Source.
        read src: TileRegion,
    },
    /// Vector engine: `dst[p, f] = src[p, f]` (or the immediate `imm` without `src`) where
    /// `predicate[p, f]` is nonzero (zero with `reverse`); `dst` keeps its value elsewhere.
    TensorCopyPredicated = "tensor_copy_predicated" {
        /// Destination, written where the predicate holds.
        write dst: TileRegion,
        /// The values copied, `dst`'s shape and dtype; `None` copies `imm`.
        read src: Option<TileRegion>,
        /// The value copied without `src`.
        param imm: f32,
        /// The predicate, `dst`'s shape.
        read predicate: TileRegion,
        /// Copy where the predicate is zero instead (NKI's `reverse_pred`).
        param reverse: bool,
    } keeps dst,
    /// Fill with a constant.
    Memset = "memset" {
        /// Destination.
        write dst: TileRegion,
        /// The value.
        param value: f32,
    },
    /// `engine`'s XORWOW generators: 32 random bits per element of `dst`, each partition from
    /// its compute lane's state, truncated to `dst`'s integer dtype (its least significant bits).
    Rng = "rng" {
        /// Destination, an integer tile.
        write dst: TileRegion,
        /// The vector engine or GpSimd (NeuronCore-v3+, SBUF only).
        param engine: ElementwiseEngine,
    },
    /// Vector engine (NeuronCore-v4+): uniform fp32 values in `[min, max)` from the XORWOW
    /// generators, written in `dst`'s dtype.
    Rand2 = "rand2" {
        /// Destination.
        write dst: TileRegion,
        /// The lower bound: an immediate or a `(P, 1)` column.
        read min: ScalarOperand,
        /// The upper bound (above `min`): an immediate or a `(P, 1)` column.
        read max: ScalarOperand,
    },
    /// Sets the XORWOW state of `engine`'s compute lanes, one lane per partition of the uint32
    /// `src_seeds` (6 words per lane on GpSimd, 24 on the vector engine).
    RandSetState = "rand_set_state" {
        /// The state words, uint32, in SBUF.
        read src_seeds: TileRegion,
        /// GpSimd or the vector engine (NeuronCore-v4+).
        param engine: ElementwiseEngine,
    },
    /// Stores the XORWOW state of `engine`'s compute lanes into the uint32 `dst`, one lane per
    /// partition (6 words per lane on GpSimd, 24 on the vector engine).
    RandGetState = "rand_get_state" {
        /// Destination, uint32.
        write dst: TileRegion,
        /// GpSimd or the vector engine (NeuronCore-v4+).
        param engine: ElementwiseEngine,
    },
    /// Seeds every compute lane of the vector engine's generators from one 32-bit value.
    SetRngSeed = "set_rng_seed" {
        /// The `[1, 1]` seed, a 32-bit dtype.
        read src_seeds: TileRegion,
    },
    /// Vector engine: `dst = data`, each element replaced by zero with probability `prob`, one
    /// draw of the vector engine's generators per element.
    Dropout = "dropout" {
        /// Destination, `data`'s shape and dtype.
        write dst: TileRegion,
        /// Input.
        read data: TileRegion,
        /// The drop probability: an immediate or a `(P, 1)` column.
        read prob: ScalarOperand,
    },
    /// GpSimd engine: `dst[p, f] = offset + channel_multiplier·p + step·f` for partition `p`
    /// and free index `f` within the destination region, computed in int32 and written in
    /// `dst`'s dtype (`nisa.iota` with a one-dimensional pattern `[[step, nf]]`).
    Iota = "iota" {
        /// Destination, in SBUF.
        write dst: TileRegion,
        /// The value at `[0, 0]`.
        param offset: i32,
        /// Added per partition.
        param channel_multiplier: i32,
        /// Added per free element.
        param step: i32,
    },
    /// GpSimd engine: `dst[p, f] = on_true[p, f]` where `cmp(offset + channel_multiplier·p +
    /// step·f, 0)` holds (the affine value computed in int32, as [`Op::Iota`]'s, for partition
    /// `p` and free index `f` within the region) and `on_false` elsewhere (`nisa.affine_select`
    /// with a one-dimensional pattern `[[step, nf]]`).
    AffineSelect = "affine_select" {
        /// Destination, in SBUF.
        write dst: TileRegion,
        /// Added per free element.
        param step: i32,
        /// Added per partition.
        param channel_multiplier: i32,
        /// The values selected where the comparison holds, `dst`'s shape, in SBUF.
        read on_true: TileRegion,
        /// The value written where it does not.
        param on_false: f32,
        /// The comparison of the affine value with 0.
        param cmp: BinOp,
        /// The affine value at `[0, 0]`.
        param offset: i32,
    },
    /// Vector engine (NeuronCore-v3 and newer): `dst[p, f] = on_true[p, f]` where
    /// `i comp0 bound0[p]` and `i comp1 bound1[p]` for `i = f + range_start` (in fp32), and
    /// `on_false` elsewhere; optionally reducing each row of the result into `reduce_res`.
    RangeSelect = "range_select" {
        /// Destination, `on_true`'s shape.
        write dst: TileRegion,
        /// The values selected where both comparisons hold.
        read on_true: TileRegion,
        /// First comparison, of the index against `bound0`.
        param comp0: BinOp,
        /// `(P, 1)` fp32 column.
        read bound0: TileRegion,
        /// Second comparison, of the index against `bound1`.
        param comp1: BinOp,
        /// `(P, 1)` fp32 column.
        read bound1: TileRegion,
        /// Added to the free index before comparing.
        param range_start: f32,
        /// The value written where either comparison fails.
        param on_false: f32,
        /// Optional free-dim reduction of the result: operator and `(P, 1)` destination.
        write reduce: Option<(BinOp, TileRegion)>,
    },
    /// Vector engine: `dst = 1 / data` elementwise, in fp32, rounded to `dst`'s dtype.
    Reciprocal = "reciprocal" {
        /// Destination, `data`'s shape.
        write dst: TileRegion,
        /// Input.
        read data: TileRegion,
    },
    /// Vector engine (NeuronCore-v4 and newer): `dst = exp(src − max_value)` elementwise, in
    /// fp32, rounded to `dst`'s dtype; with `reduce_res`, each row's fp32 exponentials are also
    /// summed on top of `reduce_init` into it.
    Exponential = "exponential" {
        /// Destination, `src`'s shape.
        write dst: TileRegion,
        /// Input.
        read src: TileRegion,
        /// Subtracted before the exponential: an immediate or a `(P, 1)` column.
        read max_value: ScalarOperand,
        /// Optional `(P, 1)` destination of the row sums.
        write reduce_res: Option<TileRegion>,
        /// Where each row sum starts (0 for NKI's `reset_reduce`, `reduce_init` for
        /// `load_reduce`): an immediate or a `(P, 1)` column.
        read reduce_init: ScalarOperand,
    },
    /// Vector engine: `dst = data <op0> operand0` (a one-operator [`Op::TensorScalar`]) and, for
    /// each row, its fp32 results reduced with `reduce_op`, combined with `reduce_init` when
    /// given (NKI's `load_reduce`), negated when `negate`, into `reduce_res`.
    TensorScalarReduce = "tensor_scalar_reduce" {
        /// Destination, `data`'s shape.
        write dst: TileRegion,
        /// Input.
        read data: TileRegion,
        /// The operator.
        param op0: BinOp,
        /// Its operand: an immediate or a `(P, 1)` column.
        read operand0: ScalarOperand,
        /// The reduction operator (add, multiply, maximum, minimum).
        param reduce_op: BinOp,
        /// `(P, 1)` destination of the row reductions.
        write reduce_res: TileRegion,
        /// Where each row's reduction starts instead of `reduce_op`'s identity.
        read reduce_init: Option<ScalarOperand>,
        /// Negate what is written to `reduce_res` (NKI's `reduce_res_negate`).
        param negate: bool,
    },
    /// Vector engine: a scan along the free dim of each partition, `dst[f] = (data0[f] <op0>
    /// dst[f−1]) <op1> data1[f]` with `initial` (an immediate or a `(P, 1)` column) before the
    /// first element; `reverse0` / `reverse1` swap the operands of `op0` / `op1`. The state is
    /// carried in fp32; each element is rounded once, to `dst`'s dtype, as it is written.
    TensorTensorScan = "tensor_tensor_scan" {
        /// Destination, `data0`'s shape.
        write dst: TileRegion,
        /// First input: `op0`'s left operand (its right one with `reverse0`).
        read data0: TileRegion,
        /// Second input, `data0`'s shape: `op1`'s right operand (its left one with `reverse1`).
        read data1: TileRegion,
        /// The state before the first element.
        read initial: ScalarOperand,
        /// Combines `data0` with the previous state.
        param op0: BinOp,
        /// Combines that with `data1`.
        param op1: BinOp,
        /// `op0(state, data0)` instead of `op0(data0, state)`.
        param reverse0: bool,
        /// `op1(data1, x)` instead of `op1(x, data1)`.
        param reverse1: bool,
    },
    /// GpSimd engine: `dst[0, f]` = the reduction with `op` (add or maximum) of `data[p, f]` over
    /// its partitions `p`, in fp32 in partition order, rounded once to `dst`'s dtype.
    TensorPartitionReduce = "tensor_partition_reduce" {
        /// Destination, one partition of `data`'s free size, in SBUF.
        write dst: TileRegion,
        /// The reduction operator.
        param op: BinOp,
        /// Input, in SBUF.
        read data: TileRegion,
    },
    /// Vector engine: `dst[p, f] = on_true[p, f]` where `predicate[p, f]` is nonzero (zero with
    /// `reverse_pred`) and `on_false` (an immediate or a `(P, 1)` column) elsewhere, in fp32,
    /// rounded once to `dst`'s dtype; with `reduce_res`, each row's maximum of the fp32 results
    /// (NKI's `reduce_cmd=reset_reduce`, from −inf) into that `(P, 1)` column.
    SelectReduce = "select_reduce" {
        /// Destination, `on_true`'s shape.
        write dst: TileRegion,
        /// The predicate, `on_true`'s shape (an integer tile).
        read predicate: TileRegion,
        /// The values selected where the predicate holds.
        read on_true: TileRegion,
        /// The value selected elsewhere: an immediate or a `(P, 1)` column.
        read on_false: ScalarOperand,
        /// Optional `(P, 1)` destination of each row's maximum.
        write reduce_res: Option<TileRegion>,
        /// Select `on_true` where the predicate is zero instead.
        param reverse_pred: bool,
    },
    /// Vector engine: a running reduction along each row, `acc = op1(op0(src[f], imm0), acc)`,
    /// every step written to `dst[f]`; `acc` starts at `op1`'s identity (NKI's
    /// `reduce_cmd=reset_reduce`: 0 for add and subtract) or at `imm1` (`load_reduce`). Carried
    /// in fp32, each element rounded once to `dst`'s dtype.
    TensorScalarCumulative = "tensor_scalar_cumulative" {
        /// Destination, `src`'s shape.
        write dst: TileRegion,
        /// Input.
        read src: TileRegion,
        /// Applied to each element and `imm0`.
        param op0: BinOp,
        /// The running reduction (add, subtract, multiply, maximum, minimum).
        param op1: BinOp,
        /// `op0`'s operand: an immediate or a `(P, 1)` column.
        read imm0: ScalarOperand,
        /// Where the reduction starts instead of `op1`'s identity (NKI's `load_reduce`).
        read imm1: Option<ScalarOperand>,
    },
    /// GpSimd engine: for each element of a row of `segment_ids`, the start and the (exclusive)
    /// end of the run of equal ids it belongs to, the starts in `dst`'s first half and the ends
    /// in its second (NKI's `(1, 2, N)` tile); id 0 is padding, bounds `N` and −1.
    SequenceBounds = "sequence_bounds" {
        /// Destination, `(1, 2·N)` (NKI's `(1, 2, N)`), in SBUF.
        write dst: TileRegion,
        /// The `(1, N)` segment ids, in SBUF.
        read segment_ids: TileRegion,
    },
    /// GpSimd engine: in the partitions of the regions that are multiples of 16 (each GpSimd
    /// core's first), the indices (plus `index_offset`) of `src`'s nonzero elements, then
    /// `padding_val` up to `src`'s free size, then their count, into `dst` (one element wider);
    /// the other partitions of `dst` keep their values.
    NonzeroWithCount = "nonzero_with_count" {
        /// Destination, int32, `src`'s free size + 1, in SBUF.
        write dst: TileRegion,
        /// Input, in SBUF.
        read src: TileRegion,
        /// Added to every index found.
        param index_offset: i32,
        /// Written after the indices.
        param padding_val: i32,
    } keeps dst,
    /// GpSimd engine: in every group of 16 partitions, the `K` (`val_dst`'s free size) largest
    /// of the `n` bf16 values laid out as a snake (element `e` at partition `e % 16`, column
    /// `e / 16`), in ascending order, and their snake indices (uint32), written as the same
    /// snake into `val_dst` and `idx_dst`; their other elements keep their values.
    Topk = "topk" {
        /// Destination of the values, bf16, `[P, K]`, in SBUF.
        write val_dst: TileRegion,
        /// Destination of the indices, uint32, `[P, K]`, in SBUF.
        write idx_dst: TileRegion,
        /// The snakes, bf16, in SBUF.
        read src: TileRegion,
        /// Elements in each snake.
        param n: usize,
    } keeps val_dst & idx_dst,
    /// Vector engine: within each quadrant of 32 partitions of the regions, `dst` partition
    /// `32·q + i` takes `src` partition `32·q + mask[i]`, or keeps its value where `mask[i]` is
    /// 255.
    NcStreamShuffle = "nc_stream_shuffle" {
        /// Destination, `src`'s free size and dtype.
        write dst: TileRegion,
        /// Source.
        read src: TileRegion,
        /// The 32 source partitions within a quadrant (255: unmodified).
        param mask: Vec<u8>,
    } keeps dst,
    /// GpSimd engine: within each group of 16 partitions (one GpSimd core), the group's indices
    /// (`index`'s 16 partitions flattened partition first, the first `num_valid_indices` of
    /// them) are free-element offsets into each of the group's partitions of `src`:
    /// `dst[p, k·n + e] = src[p, idx[k] + e]` for `e < n = num_elem_per_idx`.
    LocalGather = "local_gather" {
        /// Destination, `src`'s partitions and dtype, `num_valid_indices · num_elem_per_idx`
        /// elements per partition.
        write dst: TileRegion,
        /// The gathered values (NKI's `src_buffer`), in SBUF.
        read src: TileRegion,
        /// The uint16 offsets, `src`'s partitions.
        read index: TileRegion,
        /// Contiguous elements read at each offset.
        param num_elem_per_idx: usize,
        /// Offsets used per group of 16 partitions (`None`: all `16 · index.nf`).
        param num_valid_indices: Option<usize>,
    },
    /// GpSimd engine: `dst[p, j] = data[p, indices[p, j]]`, each partition gathering from its
    /// own free elements.
    NcNGather = "nc_n_gather" {
        /// Destination, `indices`' shape, `data`'s dtype.
        write dst: TileRegion,
        /// The gathered values, in SBUF.
        read data: TileRegion,
        /// The uint32 free-element indices, `data`'s partitions.
        read indices: TileRegion,
    },
    /// Vector engine: the eight largest values of each partition of `src`, in descending order
    /// (NaN above everything, ties in row order), into the `(P, 8)` `dst`.
    Max8 = "max8" {
        /// Destination, `(P, 8)`.
        write dst: TileRegion,
        /// Input, 8 to 16384 elements per partition.
        read src: TileRegion,
    },
    /// Vector engine: for each of the eight values of `vals`' partition, the index in `data`'s
    /// partition of its first occurrence (the k-th occurrence for its k-th repetition in `vals`),
    /// or −1 (uint32's all-ones bits read as int32) where there is none, into the int32 `(P, 8)`
    /// `dst`.
    NcFindIndex8 = "nc_find_index8" {
        /// Destination, `(P, 8)` int32.
        write dst: TileRegion,
        /// Searched, 8 to 16384 elements per partition.
        read data: TileRegion,
        /// The `(P, 8)` values.
        read vals: TileRegion,
    },
    /// Vector engine: `dst = data` with the first not yet replaced occurrence of each of the
    /// eight values of `vals` (taken from the last to the first) replaced by `imm`; where each
    /// was found (or −1) into the int32 `(P, 8)` `dst_idx`, when given.
    NcMatchReplace8 = "nc_match_replace8" {
        /// Destination, `data`'s shape.
        write dst: TileRegion,
        /// Searched, 8 to 16384 elements per partition.
        read data: TileRegion,
        /// The `(P, 8)` values.
        read vals: TileRegion,
        /// The replacement.
        param imm: f32,
        /// Optional `(P, 8)` int32 destination of the matched indices.
        write dst_idx: Option<TileRegion>,
    },
    /// Tensor engine: `dst = dataᵀ`, an SBUF `[P, F]` region into a PSUM `[F, P]` region.
    NcTranspose = "nc_transpose" {
        /// PSUM destination `[F, P]`.
        write dst: TileRegion,
        /// SBUF source `[P, F]`.
        read data: TileRegion,
    },
    /// Tensor engine: `dst (+)= stationaryᵀ · moving`, contraction over partitions.
    NcMatmul = "nc_matmul" {
        /// PSUM destination `[M, N]`.
        write dst: TileRegion,
        /// `[K, M]` in SBUF.
        read stationary: TileRegion,
        /// `[K, N]` in SBUF.
        read moving: TileRegion,
        /// Add into `dst` instead of overwriting it.
        param accumulate: bool,
    } reads dst when accumulate,
    /// Vector engine: MX quantisation of fp16/bf16 `src` `[P, 4F]` into packed fp8 `dst`
    /// `[P, F]` and one E8M0 scale per group of 8 partitions × 4 elements into `dst_scale`
    /// (group `g` of a column at row `32·(g/4) + g%4` of `dst_scale`; the other rows keep
    /// their values).
    QuantizeMx = "quantize_mx" {
        /// `float8_e5m2_x4` / `float8_e4m3fn_x4` destination, `src`'s partitions, a quarter of
        /// its free size.
        write dst: TileRegion,
        /// float16 / bfloat16 input, in the MX layout (each 4 consecutive free elements are
        /// the 4 contraction values of one packed element).
        read src: TileRegion,
        /// The scales (float8_e8m0fnu or uint8), `dst`'s free size.
        write dst_scale: TileRegion,
    } keeps dst_scale,
    /// Tensor engine: `dst (+)= Σ_k Σ_lane (stationary · 2^stationary_scale)ᵀ ·
    /// (moving · 2^moving_scale)`, contracting over the partitions and the four lanes of each
    /// packed element (MXFP8 / MXFP4 with their block scales), accumulated in fp32.
    NcMatmulMx = "nc_matmul_mx" {
        /// PSUM destination `[M, N]`, float32 or bfloat16.
        write dst: TileRegion,
        /// Packed `[K, M]` in SBUF.
        read stationary: TileRegion,
        /// Packed `[K, N]` in SBUF.
        read moving: TileRegion,
        /// `stationary`'s scales, laid out as `quantize_mx` writes them.
        read stationary_scale: TileRegion,
        /// `moving`'s scales, laid out as `quantize_mx` writes them.
        read moving_scale: TileRegion,
        /// `(start_row, start_column)` of row tiling mode (empty: the whole array).
        param tile_position: Vec<usize>,
        /// `(row_size, column_size)` of row tiling mode (empty: the whole array).
        param tile_size: Vec<usize>,
        /// Add into `dst` instead of overwriting it.
        param accumulate: bool,
    } reads dst when accumulate,
    /// Engine sequencers: a new register, holding `init` (or nothing until it is written: a
    /// read before then is a simulation error).
    RegisterAlloc = "register_alloc" {
        /// The register.
        write dst: RegisterId,
        /// Its first value.
        param init: Option<i32>,
    },
    /// Engine sequencers: `dst = src`, an immediate or another register's value.
    RegisterMove = "register_move" {
        /// The register written.
        write dst: RegisterId,
        /// The value.
        read src: RegisterValue,
    },
    /// Engine sequencers: `dst` = the one integer element of `src` (HBM or SBUF), as int32.
    RegisterLoad = "register_load" {
        /// The register written.
        write dst: RegisterId,
        /// A one-element region of an integer tensor.
        read src: DmaOperand,
    },
    /// Engine sequencers: the one element of `dst` (HBM or SBUF) = `src`'s value, converted
    /// to `dst`'s integer dtype.
    RegisterStore = "register_store" {
        /// A one-element region of an integer tensor.
        write dst: DmaOperand,
        /// The register read.
        read src: RegisterId,
    },
    /// DMA engines: `dst = srcs[0]·scales[0] + srcs[1]·scales[1] + ...` element by element (the
    /// `k`-th element of each operand in row-major order: partitions, then free elements), in
    /// fp32, rounded once to `dst`'s dtype. Every element of every source is read before `dst`
    /// is written.
    DmaCompute = "dma_compute" {
        /// Destination, HBM or SBUF.
        write dst: DmaOperand,
        /// The sources (1 to 16), HBM or SBUF, each `dst`'s element count.
        read srcs: Vec<DmaOperand>,
        /// How the scaled sources combine (`nl.add`).
        param reduce_op: BinOp,
        /// One factor per source (NKI's `scales`; `None` is all 1.0).
        param scales: Vec<f32>,
        /// Whether scatter indices are unique (indirect accesses only).
        param unique_indices: bool,
        /// What an out-of-bounds indirect index does.
        param oob_mode: OobMode,
    },
    }
}

impl Op {
    /// Tile regions the instruction writes.
    pub fn tile_writes(&self) -> Vec<&TileRegion> {
        self.tiles(Access::Write)
    }

    /// Tile regions the instruction reads.
    pub fn tile_reads(&self) -> Vec<&TileRegion> {
        self.tiles(Access::Read)
    }

    fn tiles(&self, want: Access) -> Vec<&TileRegion> {
        let mut v = Vec::new();
        self.visit_operands(&mut |u| match u {
            OperandUse::Tile(r, access) if access == want => v.push(r),
            _ => {}
        });
        v
    }

    /// Registers the instruction reads.
    pub fn register_reads(&self) -> Vec<RegisterId> {
        self.registers(Access::Read)
    }

    /// Registers the instruction writes.
    pub fn register_writes(&self) -> Vec<RegisterId> {
        self.registers(Access::Write)
    }

    fn registers(&self, want: Access) -> Vec<RegisterId> {
        let mut v = Vec::new();
        self.visit_operands(&mut |u| match u {
            OperandUse::Register(r, access) if access == want => v.push(r),
            _ => {}
        });
        v
    }

    /// Whether the instruction reads or writes a register (such instructions run in program
    /// order: the simulator never runs them in parallel or band by band).
    pub fn uses_registers(&self) -> bool {
        let mut any = false;
        self.visit_operands(&mut |u| any |= matches!(u, OperandUse::Register(..)));
        any
    }

    /// HBM accesses the instruction reads and writes, as `(access, is_write)`.
    pub fn hbm_accesses(&self) -> Vec<(&HbmAccess, bool)> {
        let mut v = Vec::new();
        self.visit_operands(&mut |u| {
            if let OperandUse::Hbm(a, access) = u {
                v.push((a, access == Access::Write));
            }
        });
        v
    }
}
