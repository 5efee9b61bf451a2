//! Reductions and scans: along the free dim, across partitions, running and batch-norm statistics.
//!
//! Declared here, expanded by [`super::instructions`]: each variant's operands (their roles)
//! and the NKI keyword(s) each field is spelled as.

/// Appends this family's variants to the declaration and hands it to the next family macro.
#[rustfmt::skip]
macro_rules! reduce_instructions {
    ([$next:ident $(, $rest:ident)*] $($acc:tt)*) => { $next! { [$($rest),*] $($acc)*

    /// Vector engine: reduce the free dim of `data` into a `(P, 1)` destination.
    TensorReduce = "tensor_reduce" {
        /// Destination, `nf == 1`.
        write dst: TileRegion => dst,
        /// Operator.
        param op: BinOp => op,
        /// Input.
        read data: TileRegion => data,
        /// Negate the result.
        param negate: bool => negate,
    },
    /// Vector engine: mean and variance statistics of each partition of `data` (free size at
    /// most 512), as two `(count, mean, variance · count)` triples, of its even-indexed and of
    /// its odd-indexed elements: `dst` is `(P, 6)`. Feeds [`Op::BnAggr`].
    BnStats = "bn_stats" {
        /// Destination, `(P, 6)`.
        write dst: TileRegion => dst,
        /// Input.
        read data: TileRegion => data,
    },
    /// Vector engine: combines the `(count, mean, variance · count)` triples of `data`
    /// (`(P, 3k)`, from [`Op::BnStats`]) into `dst` `(P, 2)`: the mean, then the biased
    /// variance.
    BnAggr = "bn_aggr" {
        /// Destination, `(P, 2)`.
        write dst: TileRegion => dst,
        /// The triples.
        read data: TileRegion => data,
    },
    /// Vector engine: `dst = data <op0> operand0` (a one-operator [`Op::TensorScalar`]) and, for
    /// each row, its fp32 results reduced with `reduce_op`, combined with `reduce_init` when
    /// given (NKI's `load_reduce`), negated when `negate`, into `reduce_res`.
    TensorScalarReduce = "tensor_scalar_reduce" {
        /// Destination, `data`'s shape.
        write dst: TileRegion => dst,
        /// Input.
        read data: TileRegion => data,
        /// The operator.
        param op0: BinOp => op0,
        /// Its operand: an immediate or a `(P, 1)` column.
        read operand0: ScalarOperand => operand0,
        /// `operand0 <op0> data` instead of `data <op0> operand0`.
        param reverse0: bool => reverse0,
        /// The reduction operator (add, multiply, maximum, minimum).
        param reduce_op: BinOp => reduce_op,
        /// `(P, 1)` destination of the row reductions.
        write reduce_res: TileRegion => reduce_res,
        /// Where each row's reduction starts instead of `reduce_op`'s identity.
        read reduce_init: Option<ScalarOperand> => (reduce_init, reduce_cmd) via load_reduce,
        /// Negate what is written to `reduce_res` (NKI's `reduce_res_negate`).
        param negate: bool => reduce_res_negate,
    },
    /// Vector engine: a scan along the free dim of each partition, `dst[f] = (data0[f] <op0>
    /// dst[f−1]) <op1> data1[f]` with `initial` (an immediate or a `(P, 1)` column) before the
    /// first element; `reverse0` / `reverse1` swap the operands of `op0` / `op1`. The state is
    /// carried in fp32; each element is rounded once, to `dst`'s dtype, as it is written.
    TensorTensorScan = "tensor_tensor_scan" {
        /// Destination, `data0`'s shape.
        write dst: TileRegion => dst,
        /// First input: `op0`'s left operand (its right one with `reverse0`).
        read data0: TileRegion => data0,
        /// Second input, `data0`'s shape: `op1`'s right operand (its left one with `reverse1`).
        read data1: TileRegion => data1,
        /// The state before the first element.
        read initial: ScalarOperand => initial,
        /// Combines `data0` with the previous state.
        param op0: BinOp => op0,
        /// Combines that with `data1`.
        param op1: BinOp => op1,
        /// `op0(state, data0)` instead of `op0(data0, state)`.
        param reverse0: bool => reverse0,
        /// `op1(data1, x)` instead of `op1(x, data1)`.
        param reverse1: bool => reverse1,
    },
    /// GpSimd engine: `dst[0, f]` = the reduction with `op` (add or maximum) of `data[p, f]` over
    /// its partitions `p`, in fp32 in partition order, rounded once to `dst`'s dtype.
    TensorPartitionReduce = "tensor_partition_reduce" {
        /// Destination, one partition of `data`'s free size, in SBUF.
        write dst: TileRegion => dst,
        /// The reduction operator.
        param op: BinOp => op,
        /// Input, in SBUF.
        read data: TileRegion => data,
    },
    /// Vector engine: a running reduction along each row, `acc = op1(op0(src[f], imm0), acc)`,
    /// every step written to `dst[f]`; `acc` starts at `op1`'s identity (NKI's
    /// `reduce_cmd=reset_reduce`: 0 for add and subtract) or at `imm1` (`load_reduce`). Carried
    /// in fp32, each element rounded once to `dst`'s dtype.
    TensorScalarCumulative = "tensor_scalar_cumulative" {
        /// Destination, `src`'s shape.
        write dst: TileRegion => dst,
        /// Input.
        read src: TileRegion => src,
        /// Applied to each element and `imm0`.
        param op0: BinOp => op0,
        /// The running reduction (add, subtract, multiply, maximum, minimum).
        param op1: BinOp => op1,
        /// `op0`'s operand: an immediate or a `(P, 1)` column.
        read imm0: ScalarOperand => imm0,
        /// Where the reduction starts instead of `op1`'s identity (NKI's `load_reduce`).
        read imm1: Option<ScalarOperand> => (imm1, reduce_cmd) via load_reduce,
    },

    } };
}

pub(super) use reduce_instructions;
