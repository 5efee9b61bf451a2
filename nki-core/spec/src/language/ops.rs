//! Which `nl` names `nki.isa` instructions take as values: the operators of `op=` / `op0=` /
//! `reduce_op=` (`nki.api.shared.rst`'s "Supported Math Operators" table, `nki-aluop`) and the
//! activation functions of `activation` / `activate2` (its "Supported Activation Functions"
//! table, `nki-act-func`). The frontend's operator and activation vocabulary is derived from
//! these tables.

use serde::Serialize;

use crate::isa::{NcVersion, Targets as T};

/// An operator's family. Instructions that take two operators (`tensor_scalar`) need both
/// from the same family, bitvec or arithmetic (the docs count comparisons as arithmetic).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OpClass {
    /// Works on bit patterns: integer dtypes only, no conversion.
    Bitvec,
    /// Works on numbers: inputs are converted to fp32 first.
    Arithmetic,
    /// An arithmetic comparison, giving 1 or 0.
    Comparison,
    /// `nl.bypass`: a stage that passes its input through (`activate2`'s `op0` / `op1`).
    Bypass,
}

impl OpClass {
    /// Whether the docs count it as arithmetic (comparisons included).
    pub const fn is_arithmetic(self) -> bool {
        matches!(self, OpClass::Arithmetic | OpClass::Comparison)
    }
}

/// How many operands an operator combines.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Arity {
    /// One: the instruction's scalar operand must be `None` or 0.
    Unary,
    /// Two.
    Binary,
}

/// One `nl` name usable as an `nki.isa` operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct OperatorSpec {
    /// The `nl` name (`add`).
    pub name: &'static str,
    /// Its family.
    pub class: OpClass,
    /// Unary or binary.
    pub arity: Arity,
    /// Whether it may be an elementwise `op` (`tensor_tensor`'s `op`, `tensor_scalar`'s `op0`).
    pub elementwise: bool,
    /// Whether it may be a reduction (`tensor_reduce`'s `op`, the `reduce_op=` keywords).
    pub reduce: bool,
    /// The NeuronCore versions where instructions accept it as an operator.
    pub targets: T,
}

impl OperatorSpec {
    /// Whether instructions on `version` accept it.
    pub fn available_on(&self, version: NcVersion) -> bool {
        self.targets.includes(version)
    }
}

const fn op(name: &'static str, class: OpClass, reduce: bool) -> OperatorSpec {
    OperatorSpec {
        name,
        class,
        arity: Arity::Binary,
        elementwise: true,
        reduce,
        targets: T::ALL,
    }
}

const fn unary(name: &'static str, class: OpClass) -> OperatorSpec {
    OperatorSpec {
        arity: Arity::Unary,
        ..op(name, class, false)
    }
}

const fn gen4(spec: OperatorSpec) -> OperatorSpec {
    OperatorSpec {
        targets: T::GEN4,
        ..spec
    }
}

use OpClass::{Arithmetic as A, Bitvec as B, Comparison as C};

/// Every operator, in the order of the docs' table, then the two operator constants it
/// leaves out.
pub static OPERATORS: &[OperatorSpec] = &[
    unary("invert", B),
    op("bitwise_and", B, true),
    op("bitwise_or", B, true),
    op("bitwise_xor", B, true),
    // The table's arithmetic and logical left shifts are both nl.left_shift; an arithmetic
    // right shift is not supported, nl.right_shift is the logical one.
    op("left_shift", B, false),
    op("right_shift", B, false),
    op("add", A, true),
    op("subtract", A, true),
    op("multiply", A, true),
    op("maximum", A, true),
    op("minimum", A, true),
    op("equal", C, false),
    op("not_equal", C, false),
    op("greater_equal", C, false),
    op("greater", C, false),
    op("less_equal", C, false),
    op("less", C, false),
    op("logical_and", A, true),
    op("logical_or", A, true),
    op("logical_xor", A, true),
    op("power", A, false),
    // nl.abs_max / nl.abs_min are NeuronCore-v4 (trn3) only.
    gen4(op("abs_max", A, false)),
    gen4(op("abs_min", A, false)),
    unary("abs", A),
    // The NKI 0.4 release notes: square and relu became op0 values on trn3.
    gen4(unary("square", A)),
    gen4(unary("relu", A)),
    // On GpSimd only, through tensor_scalar (the docs' engine-selection note).
    unary("rsqrt", A),
    unary("reciprocal", A),
    // Not in the table: tensor_partition_reduce lists average among its reductions.
    OperatorSpec {
        elementwise: false,
        reduce: true,
        ..op("average", A, true)
    },
    // Not in the table: activate2's no-op stage.
    unary("bypass", OpClass::Bypass),
];

/// The operator called `name`.
pub fn operator(name: &str) -> Option<&'static OperatorSpec> {
    OPERATORS.iter().find(|o| o.name == name)
}

/// The inputs an activation function is accurate on; outside them the scalar engine's
/// piecewise polynomial gives invalid results (`sin` is not range-reduced: it extrapolates).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(tag = "range", rename_all = "snake_case")]
pub enum InputRange {
    /// Every input.
    Any,
    /// `lo <= x <= hi`.
    Between {
        /// The lowest valid input.
        lo: f64,
        /// The highest valid input.
        hi: f64,
    },
    /// `2^lo <= x <= 2^hi`.
    Pow2 {
        /// The lowest valid power of two.
        lo: i32,
        /// The highest valid power of two.
        hi: i32,
    },
    /// `2^lo <= |x| <= 2^hi`, either sign.
    Pow2Magnitude {
        /// The lowest valid magnitude, as a power of two.
        lo: i32,
        /// The highest valid magnitude, as a power of two.
        hi: i32,
    },
}

impl InputRange {
    /// Whether `x` is a valid input.
    pub fn contains(self, x: f64) -> bool {
        let pow2 = |e: i32| 2f64.powi(e);
        match self {
            InputRange::Any => true,
            InputRange::Between { lo, hi } => (lo..=hi).contains(&x),
            InputRange::Pow2 { lo, hi } => (pow2(lo)..=pow2(hi)).contains(&x),
            InputRange::Pow2Magnitude { lo, hi } => (pow2(lo)..=pow2(hi)).contains(&x.abs()),
        }
    }
}

/// One `nl` name usable as an activation function (`nisa.activation(op=...)`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct ActivationSpec {
    /// The `nl` name (`exp`).
    pub name: &'static str,
    /// The inputs it is accurate on.
    #[serde(flatten)]
    pub range: InputRange,
    /// The NeuronCore versions whose scalar engine has it.
    pub targets: T,
}

const fn act(name: &'static str, range: InputRange) -> ActivationSpec {
    ActivationSpec {
        name,
        range,
        targets: T::ALL,
    }
}

const ANY: InputRange = InputRange::Any;
const PI: f64 = std::f64::consts::PI;

/// Every activation function, in the order of the docs' table.
pub static ACTIVATIONS: &[ActivationSpec] = &[
    act("copy", ANY),
    act("square", ANY),
    act("sigmoid", ANY),
    act("relu", ANY),
    // Its slope is activate2's relu_param (activation has none), and activate2 is
    // NeuronCore-v4 only; nl.prelu came with it (NKI 0.4, trn3).
    ActivationSpec {
        targets: T::GEN4,
        ..act("prelu", ANY)
    },
    act("gelu", ANY),
    act("gelu_dx", ANY),
    act("gelu_apprx_tanh", ANY),
    act("gelu_apprx_sigmoid", ANY),
    act("gelu_apprx_sigmoid_dx", ANY),
    act("silu", ANY),
    act("silu_dx", ANY),
    act("tanh", ANY),
    act("softplus", ANY),
    act("mish", ANY),
    act("erf", ANY),
    act("erf_dx", ANY),
    act("exp", ANY),
    act("log", InputRange::Pow2 { lo: -64, hi: 64 }),
    act("sin", InputRange::Between { lo: -PI, hi: PI }),
    act(
        "arctan",
        InputRange::Between {
            lo: -PI / 2.0,
            hi: PI / 2.0,
        },
    ),
    act("sqrt", InputRange::Pow2 { lo: -116, hi: 118 }),
    act("rsqrt", InputRange::Pow2 { lo: -87, hi: 97 }),
    act("reciprocal", InputRange::Pow2Magnitude { lo: -42, hi: 42 }),
    act("sign", ANY),
    act("abs", ANY),
];

/// The activation function called `name`.
pub fn activation(name: &str) -> Option<&'static ActivationSpec> {
    ACTIVATIONS.iter().find(|a| a.name == name)
}
