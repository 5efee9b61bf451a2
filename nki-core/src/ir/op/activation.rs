//! Scalar-engine instructions: `activation` (and `activation_reduce`) and `activate2`.
//!
//! Declared here, expanded by [`super::instructions`]: each variant's operands (their roles)
//! and the NKI keyword(s) each field is spelled as.

/// Appends this family's variants to the declaration and hands it to the next family macro.
#[rustfmt::skip]
macro_rules! activation_instructions {
    ([$next:ident $(, $rest:ident)*] $($acc:tt)*) => { $next! { [$($rest),*] $($acc)*

    /// Scalar engine: `dst = f(data·scale + bias)`, optionally reducing each row into `reduce_res`.
    Activation = "activation" {
        /// Destination.
        write dst: TileRegion => dst,
        /// Function.
        param func: ActFn => op,
        /// Input.
        read data: TileRegion => data,
        /// Multiplier applied before the function.
        read scale: ScalarOperand => scale,
        /// Optional `(P, 1)` bias added before the function.
        read bias: Option<TileRegion> => bias,
        /// Optional free-dim reduction of the result: operator and `(P, 1)` destination.
        write reduce: Option<(BinOp, TileRegion)> => (reduce_op, reduce_res),
    },
    /// Scalar engine (NeuronCore-v4+): `dst = f((data <op0> imm0) <op1> imm1)`, each stage an
    /// operator and its operand (an immediate or a `(P, 1)` column) or `None` for `nl.bypass`,
    /// either stage's operands swapped when its `reverse` flag is set (`imm0 <op0> data`);
    /// `relu_param` is the function's parameter ([`ActFn::apply_with`]: `nl.prelu`'s slope).
    /// Computed in fp32, rounded once to `dst`; optionally reducing each row of the fp32
    /// results into `reduce_res` (NKI's `reduce_cmd=reset_reduce`).
    Activate2 = "activate2" {
        /// Destination, `data`'s shape.
        write dst: TileRegion => dst,
        /// Function.
        param func: ActFn => op,
        /// Input.
        read data: TileRegion => data,
        /// The first tensor-scalar stage: `op0` and `imm0` (`None`: `nl.bypass`).
        read stage0: Option<(BinOp, ScalarOperand)> => (op0, imm0),
        /// `imm0 <op0> data` instead of `data <op0> imm0`.
        param reverse0: bool => reverse0,
        /// The second tensor-scalar stage: `op1` and `imm1` (`None`: `nl.bypass`).
        read stage1: Option<(BinOp, ScalarOperand)> => (op1, imm1),
        /// `imm1 <op1> x` instead of `x <op1> imm1`.
        param reverse1: bool => reverse1,
        /// The function's parameter: an immediate or a `(P, 1)` column.
        read relu_param: ScalarOperand => relu_param,
        /// Optional free-dim reduction of the result: operator and `(P, 1)` destination.
        write reduce: Option<(BinOp, TileRegion)>
            => (reduce_op, reduce_res, reduce_cmd) via reset_reduce,
    },

    } };
}

pub(super) use activation_instructions;
