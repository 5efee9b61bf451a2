//! The arithmetic of the engines: the binary operators and comparisons (`BinOp`) and the
//! activation functions (`ActFn`), with their fp32 semantics.

use serde::Serialize;

/// Binary arithmetic and comparisons of the vector engine (`nl.add`, `nl.greater`, ...).
///
/// Comparisons compute in fp32 and produce `1.0` when true and `0.0` when false, with IEEE
/// semantics for NaN: every comparison with a NaN is false except [`BinOp::NotEqual`], which is
/// true.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BinOp {
    /// `a + b`
    Add,
    /// `a - b`
    Subtract,
    /// `a * b`
    Multiply,
    /// `max(a, b)`
    Maximum,
    /// `min(a, b)`
    Minimum,
    /// `a / b` (exact division; NKI kernels usually multiply by a reciprocal instead)
    Divide,
    /// `a == b` (1.0 or 0.0)
    Equal,
    /// `a != b` (1.0 or 0.0; true when either side is NaN)
    NotEqual,
    /// `a > b` (1.0 or 0.0)
    Greater,
    /// `a >= b` (1.0 or 0.0)
    GreaterEqual,
    /// `a < b` (1.0 or 0.0)
    Less,
    /// `a <= b` (1.0 or 0.0)
    LessEqual,
}

impl BinOp {
    /// Every operator.
    pub const ALL: [BinOp; 12] = [
        BinOp::Add,
        BinOp::Subtract,
        BinOp::Multiply,
        BinOp::Maximum,
        BinOp::Minimum,
        BinOp::Divide,
        BinOp::Equal,
        BinOp::NotEqual,
        BinOp::Greater,
        BinOp::GreaterEqual,
        BinOp::Less,
        BinOp::LessEqual,
    ];

    /// The operator spelled `nl.<name>` (`"add"` → `Add`).
    pub fn from_nki_name(name: &str) -> Option<BinOp> {
        BinOp::ALL
            .into_iter()
            .find(|o| o.nki_name().strip_prefix("nl.") == Some(name))
    }

    /// Applies the operator in fp32.
    #[inline]
    pub fn apply(self, a: f32, b: f32) -> f32 {
        match self {
            BinOp::Add => a + b,
            BinOp::Subtract => a - b,
            BinOp::Multiply => a * b,
            BinOp::Maximum => a.max(b),
            BinOp::Minimum => a.min(b),
            BinOp::Divide => a / b,
            BinOp::Equal => f32::from(u8::from(a == b)),
            BinOp::NotEqual => f32::from(u8::from(a != b)),
            BinOp::Greater => f32::from(u8::from(a > b)),
            BinOp::GreaterEqual => f32::from(u8::from(a >= b)),
            BinOp::Less => f32::from(u8::from(a < b)),
            BinOp::LessEqual => f32::from(u8::from(a <= b)),
        }
    }

    /// Whether the operator is a comparison (`Equal` ... `LessEqual`), producing 1.0 or 0.0.
    pub const fn is_comparison(self) -> bool {
        matches!(
            self,
            BinOp::Equal
                | BinOp::NotEqual
                | BinOp::Greater
                | BinOp::GreaterEqual
                | BinOp::Less
                | BinOp::LessEqual
        )
    }

    /// The identity element when used as a reduction (`Add` → 0, `Maximum` → -inf, ...).
    pub fn reduce_identity(self) -> Option<f32> {
        match self {
            BinOp::Add => Some(0.0),
            BinOp::Multiply => Some(1.0),
            BinOp::Maximum => Some(f32::NEG_INFINITY),
            BinOp::Minimum => Some(f32::INFINITY),
            BinOp::Subtract
            | BinOp::Divide
            | BinOp::Equal
            | BinOp::NotEqual
            | BinOp::Greater
            | BinOp::GreaterEqual
            | BinOp::Less
            | BinOp::LessEqual => None,
        }
    }

    /// The `nl.*` spelling used by code generation.
    pub const fn nki_name(self) -> &'static str {
        match self {
            BinOp::Add => "nl.add",
            BinOp::Subtract => "nl.subtract",
            BinOp::Multiply => "nl.multiply",
            BinOp::Maximum => "nl.maximum",
            BinOp::Minimum => "nl.minimum",
            BinOp::Divide => "nl.divide",
            BinOp::Equal => "nl.equal",
            BinOp::NotEqual => "nl.not_equal",
            BinOp::Greater => "nl.greater",
            BinOp::GreaterEqual => "nl.greater_equal",
            BinOp::Less => "nl.less",
            BinOp::LessEqual => "nl.less_equal",
        }
    }
}

/// Scalar-engine activation functions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ActFn {
    /// `x`
    Identity,
    /// `eˣ`
    Exp,
    /// `1/√x`
    Rsqrt,
    /// `√x`
    Sqrt,
    /// `x·σ(x)`
    Silu,
    /// `x²`
    Square,
    /// `max(x, 0)`
    Relu,
    /// `tanh x`
    Tanh,
    /// `σ(x)`
    Sigmoid,
    /// `1/x`
    Reciprocal,
    /// GELU, tanh approximation.
    GeluTanh,
    /// `ln x`
    Log,
    /// GELU: `x · Φ(x) = x/2 · (1 + erf(x/√2))`.
    Gelu,
    /// The derivative of [`ActFn::Gelu`]: `Φ(x) + x · φ(x)`.
    GeluDx,
    /// The derivative of [`ActFn::Silu`]: `σ(x) · (1 + x · (1 − σ(x)))`.
    SiluDx,
}

impl ActFn {
    /// Every activation function.
    pub const ALL: [ActFn; 15] = [
        ActFn::Identity,
        ActFn::Exp,
        ActFn::Rsqrt,
        ActFn::Sqrt,
        ActFn::Silu,
        ActFn::Square,
        ActFn::Relu,
        ActFn::Tanh,
        ActFn::Sigmoid,
        ActFn::Reciprocal,
        ActFn::GeluTanh,
        ActFn::Log,
        ActFn::Gelu,
        ActFn::GeluDx,
        ActFn::SiluDx,
    ];

    /// The function spelled `nl.<name>` (`"exp"` → `Exp`, `"copy"` → `Identity`).
    pub fn from_nki_name(name: &str) -> Option<ActFn> {
        ActFn::ALL
            .into_iter()
            .find(|f| f.nki_name().strip_prefix("nl.") == Some(name))
    }

    /// Applies the function in fp32.
    #[inline]
    pub fn apply(self, x: f32) -> f32 {
        match self {
            ActFn::Identity => x,
            ActFn::Exp => crate::engine_math::exp(x),
            ActFn::Rsqrt => 1.0 / x.sqrt(),
            ActFn::Sqrt => x.sqrt(),
            ActFn::Silu => x / (1.0 + crate::engine_math::exp(-x)),
            ActFn::Square => x * x,
            ActFn::Relu => x.max(0.0),
            ActFn::Tanh => x.tanh(),
            ActFn::Sigmoid => 1.0 / (1.0 + crate::engine_math::exp(-x)),
            ActFn::Reciprocal => 1.0 / x,
            ActFn::GeluTanh => {
                let c = (2.0f32 / std::f32::consts::PI).sqrt();
                0.5 * x * (1.0 + (c * (x + 0.044_715 * x * x * x)).tanh())
            }
            ActFn::Log => x.ln(),
            ActFn::Gelu => {
                (0.5 * x as f64 * (1.0 + libm::erf(x as f64 * std::f64::consts::FRAC_1_SQRT_2)))
                    as f32
            }
            ActFn::GeluDx => {
                let x = x as f64;
                let cdf = 0.5 * (1.0 + libm::erf(x * std::f64::consts::FRAC_1_SQRT_2));
                let pdf = (-0.5 * x * x).exp() / (2.0 * std::f64::consts::PI).sqrt();
                (cdf + x * pdf) as f32
            }
            ActFn::SiluDx => {
                let s = 1.0 / (1.0 + crate::engine_math::exp(-x));
                s * (1.0 + x * (1.0 - s))
            }
        }
    }

    /// The `nl.*` spelling used by code generation.
    pub const fn nki_name(self) -> &'static str {
        match self {
            ActFn::Identity => "nl.copy",
            ActFn::Exp => "nl.exp",
            ActFn::Rsqrt => "nl.rsqrt",
            ActFn::Sqrt => "nl.sqrt",
            ActFn::Silu => "nl.silu",
            ActFn::Square => "nl.square",
            ActFn::Relu => "nl.relu",
            ActFn::Tanh => "nl.tanh",
            ActFn::Sigmoid => "nl.sigmoid",
            ActFn::Reciprocal => "nl.reciprocal",
            ActFn::GeluTanh => "nl.gelu_apprx_tanh",
            ActFn::Log => "nl.log",
            ActFn::Gelu => "nl.gelu",
            ActFn::GeluDx => "nl.gelu_dx",
            ActFn::SiluDx => "nl.silu_dx",
        }
    }
}
