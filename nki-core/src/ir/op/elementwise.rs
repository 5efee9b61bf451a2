//! Elementwise vector-engine instructions: tile-tile and tile-scalar arithmetic, copies, fills and
//! the exponential.
//!
//! Declared here, expanded by [`super::instructions`]: each variant's operands (their roles)
//! and the NKI keyword(s) each field is spelled as.

/// Appends this family's variants to the declaration and hands it to the next family macro.
#[rustfmt::skip]
macro_rules! elementwise_instructions {
    ([$next:ident $(, $rest:ident)*] $($acc:tt)*) => { $next! { [$($rest),*] $($acc)*

    /// Vector (or GpSimd) engine: `dst = a <op> b` elementwise.
    TensorTensor = "tensor_tensor" {
        /// Destination.
        write dst: TileRegion => dst,
        /// First input.
        read a: TileRegion => data1,
        /// Second input.
        read b: TileRegion => data2,
        /// Operator.
        param op: BinOp => op,
        /// The engine that runs it (NKI's `engine=`).
        param engine: ElementwiseEngine => engine,
    },
    /// Vector engine: `dst = (data <op0> operand0) <op1> operand1`.
    TensorScalar = "tensor_scalar" {
        /// Destination.
        write dst: TileRegion => dst,
        /// Input.
        read data: TileRegion => data,
        /// First operator and operand.
        param op0: BinOp => op0,
        /// First operand.
        read operand0: ScalarOperand => operand0,
        /// `operand0 <op0> data` instead of `data <op0> operand0`.
        param reverse0: bool => reverse0,
        /// Optional second operator and operand.
        read op1: Option<(BinOp, ScalarOperand)> => (op1, operand1),
        /// `operand1 <op1> first` instead of `first <op1> operand1`.
        param reverse1: bool => reverse1,
    },
    /// Vector engine: `dst = (data <op0> operand0) <op1> operand1`, a [`Op::TensorScalar`]
    /// whose second operand is a full tile: `operand0` broadcasts along the free dim,
    /// `operand1` has `data`'s shape. Computed in fp32 (the intermediate too), rounded once to
    /// `dst`'s dtype; optionally reducing each row of the fp32 result into `reduce_res`.
    /// `data` and `operand1` cannot both be in PSUM.
    ScalarTensorTensor = "scalar_tensor_tensor" {
        /// Destination, `data`'s shape.
        write dst: TileRegion => dst,
        /// Input.
        read data: TileRegion => data,
        /// First operator, applied to `data` and `operand0`.
        param op0: BinOp => op0,
        /// First operand: an immediate or a `(P, 1)` column.
        read operand0: ScalarOperand => operand0,
        /// `operand0 <op0> data` instead of `data <op0> operand0`.
        param reverse0: bool => reverse0,
        /// Second operator, applied to the first result and `operand1`.
        param op1: BinOp => op1,
        /// Second operand, `data`'s shape.
        read operand1: TileRegion => operand1,
        /// `operand1 <op1> first` instead of `first <op1> operand1`.
        param reverse1: bool => reverse1,
        /// Optional free-dim reduction of the result: operator and `(P, 1)` destination.
        write reduce: Option<(BinOp, TileRegion)>
            => (reduce_op, reduce_res, reduce_cmd) via reset_reduce,
    },
    /// Copy with a dtype cast (e.g. PSUM fp32 → SBUF bf16).
    TensorCopy = "tensor_copy" {
        /// Destination.
        write dst: TileRegion => dst,
        /// Source.
        read src: TileRegion => src,
    },
    /// Vector engine: `dst[p, f] = src[p, f]` (or the immediate `imm` without `src`) where
    /// `predicate[p, f]` is nonzero (zero with `reverse`); `dst` keeps its value elsewhere.
    TensorCopyPredicated = "tensor_copy_predicated" {
        /// Destination, written where the predicate holds.
        write dst: TileRegion => dst,
        /// The values copied, `dst`'s shape and dtype; `None` copies `imm`.
        read src: Option<TileRegion> => src,
        /// The value copied without `src`.
        param imm: f32 => _,
        /// The predicate, `dst`'s shape.
        read predicate: TileRegion => predicate,
        /// Copy where the predicate is zero instead (NKI's `reverse_pred`).
        param reverse: bool => reverse_pred,
    } keeps dst,
    /// Fill with a constant.
    Memset = "memset" {
        /// Destination.
        write dst: TileRegion => dst,
        /// The value.
        param value: f32 => value,
    },
    /// Vector engine: `dst = 1 / data` elementwise, in fp32, rounded to `dst`'s dtype.
    Reciprocal = "reciprocal" {
        /// Destination, `data`'s shape.
        write dst: TileRegion => dst,
        /// Input.
        read data: TileRegion => data,
    },
    /// Vector engine (NeuronCore-v4 and newer): `dst = exp(src − max_value)` elementwise, in
    /// fp32, rounded to `dst`'s dtype; with `reduce_res`, each row's fp32 exponentials are also
    /// summed on top of `reduce_init` into it.
    Exponential = "exponential" {
        /// Destination, `src`'s shape.
        write dst: TileRegion => dst,
        /// Input.
        read src: TileRegion => src,
        /// Subtracted before the exponential: an immediate or a `(P, 1)` column.
        read max_value: ScalarOperand => max_value,
        /// Optional `(P, 1)` destination of the row sums.
        write reduce_res: Option<TileRegion> => (reduce_res, reduce_cmd) via reset_reduce,
        /// Where each row sum starts (0 for NKI's `reset_reduce`, `reduce_init` for
        /// `load_reduce`): an immediate or a `(P, 1)` column.
        read reduce_init: ScalarOperand => reduce_init,
    },

    } };
}

pub(super) use elementwise_instructions;
