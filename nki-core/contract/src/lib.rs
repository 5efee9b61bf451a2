//! # nki-contract
//!
//! The kernel contract vocabulary, in one place: element types ([`DType`]), dimension patterns
//! and expressions, dtype rules, requirements, and the whole [`Contract`]; the runtime check
//! that binds dimension symbols from actual inputs and computes output shapes and dtypes
//! ([`bind`]); and their rendering to text (`Display`). The `#[kernel]` macro parses into these
//! types, `nki-core` checks calls with them, and the registry manifest exports them.
//!
//! Everything here is `'static` data built in constant context, so a contract lives in the
//! kernel's `static` definition and is exported as JSON unchanged.

#![warn(missing_docs)]

pub mod dtype;

pub use dtype::DType;
use serde::Serialize;

pub mod bind;
pub mod namespace;
pub mod sharding;
pub mod symbolic;
mod text;
pub mod violation;

pub use bind::{Bindings, CallerDtype, OutputMeta, TensorMeta};
pub use namespace::{Qualified, namespace, set_namespace};
pub use violation::{BoundBy, ContractViolation, Violation, ViolationKind};

/// An integer expression over dimension symbols, e.g. `N`, `2 * D`, `(K + 127) / 128`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum DimExpr {
    /// A dimension symbol bound by an input shape.
    Sym {
        /// The symbol's name.
        name: &'static str,
    },
    /// An integer literal.
    Const {
        /// The literal's value.
        value: i64,
    },
    /// A binary operation.
    Binary {
        /// The operator.
        op: DimOp,
        /// Left operand.
        lhs: &'static DimExpr,
        /// Right operand.
        rhs: &'static DimExpr,
    },
}

/// Operators allowed in [`DimExpr`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DimOp {
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/` (floor division)
    Div,
    /// `%`
    Rem,
}

impl DimOp {
    /// Binding strength when printed: `*`, `/`, `%` bind tighter than `+`, `-`.
    pub const fn precedence(self) -> u8 {
        match self {
            DimOp::Add | DimOp::Sub => 1,
            DimOp::Mul | DimOp::Div | DimOp::Rem => 2,
        }
    }

    /// The operator as written in source.
    pub const fn symbol(self) -> &'static str {
        match self {
            DimOp::Add => "+",
            DimOp::Sub => "-",
            DimOp::Mul => "*",
            DimOp::Div => "/",
            DimOp::Rem => "%",
        }
    }
}

impl DimExpr {
    /// Evaluates with bound symbols; `None` if a symbol is unbound or the result is not a valid
    /// dimension (division by zero, overflow).
    pub fn eval(&self, bindings: &Bindings) -> Option<i64> {
        match *self {
            DimExpr::Sym { name } => bindings.dims.get(name).map(|&v| v as i64),
            DimExpr::Const { value } => Some(value),
            DimExpr::Binary { op, lhs, rhs } => {
                let (a, b) = (lhs.eval(bindings)?, rhs.eval(bindings)?);
                match op {
                    DimOp::Add => a.checked_add(b),
                    DimOp::Sub => a.checked_sub(b),
                    DimOp::Mul => a.checked_mul(b),
                    DimOp::Div => (b != 0).then(|| a.div_euclid(b)),
                    DimOp::Rem => (b != 0).then(|| a.rem_euclid(b)),
                }
            }
        }
    }
}

/// One dimension of an input shape pattern.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum DimPattern {
    /// Binds (or must equal) a symbol.
    Sym {
        /// The symbol's name.
        name: &'static str,
    },
    /// Must equal a literal.
    Const {
        /// The required size.
        value: u64,
    },
    /// `..S`: zero or more dimensions, bound as a whole sequence.
    Rest {
        /// The sequence symbol's name.
        name: &'static str,
    },
}

/// One dimension of an output shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum OutDim {
    /// A single dimension computed from bound symbols.
    Expr {
        /// The expression.
        expr: DimExpr,
    },
    /// The whole sequence bound by an input's `..S`.
    Rest {
        /// The sequence symbol's name.
        name: &'static str,
    },
}

/// The shape pattern of one tensor parameter, e.g. `x = [N, D]`.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct InputShape {
    /// The parameter's name.
    pub param: &'static str,
    /// The pattern, outermost dimension first.
    pub dims: &'static [DimPattern],
}

/// How a tensor parameter's dtype is constrained.
#[derive(Clone, Copy, Debug, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum DtypeRule {
    /// `x in {f32, bf16}`.
    OneOf {
        /// The allowed dtypes.
        allowed: &'static [DType],
    },
    /// `w = x`: the same dtype as another tensor parameter.
    SameAs {
        /// The other parameter.
        param: &'static str,
    },
}

/// The dtype rule of one tensor parameter.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct InputDtype {
    /// The parameter's name.
    pub param: &'static str,
    /// Its rule.
    pub rule: DtypeRule,
}

/// How an output's dtype is chosen.
#[derive(Clone, Copy, Debug, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum OutputDtype {
    /// The dtype of a tensor parameter.
    SameAs {
        /// The parameter.
        param: &'static str,
    },
    /// A fixed dtype.
    Fixed {
        /// The dtype.
        dtype: DType,
    },
}

/// One output: its name, shape and dtype.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct OutputSpec {
    /// The output's name (`y = [N, D]` in the contract; `out` or `out0`, `out1`, ... when
    /// unnamed). Backward kernels name the gradient of output `y` as `grad_y`.
    pub name: &'static str,
    /// A `saved` output: computed for the backward kernel only, not returned by the torch op
    /// (rmsnorm's `rstd`).
    pub saved: bool,
    /// The shape, outermost dimension first; with [`OutputSpec::by_choice`], the shape for
    /// every value no case names (the `_` arm).
    pub shape: &'static [OutDim],
    /// A shape chosen by a string parameter's value, if the contract writes one
    /// (`loss = match reduction { "none" => [N], _ => [] }`).
    pub by_choice: Option<ShapeMatch>,
    /// The dtype.
    pub dtype: OutputDtype,
}

/// An output shape chosen by the value of a string parameter (declared with `#[choices(..)]`).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct ShapeMatch {
    /// The string parameter.
    pub param: &'static str,
    /// The arms other than the default, in order; the first naming the value wins.
    pub cases: &'static [ShapeCase],
}

/// One arm of a [`ShapeMatch`]: `"none" => [N]`.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct ShapeCase {
    /// The values that select this arm (`"a" | "b" => ...`).
    pub values: &'static [&'static str],
    /// The shape.
    pub shape: &'static [OutDim],
}

impl Contract {
    /// The one dtype tensor parameter `param` allows (`target in {i32}`), if its rule allows one
    /// only: samples give it that dtype whatever dtype the case runs in.
    pub fn fixed_dtype(&self, param: &str) -> Option<DType> {
        self.dtypes
            .iter()
            .find(|d| d.param == param)
            .and_then(|d| match d.rule {
                DtypeRule::OneOf { allowed: [only] } => Some(*only),
                _ => None,
            })
    }
}

impl OutputSpec {
    /// The shape for a call whose string parameter `param` is `value` (`None`: not given,
    /// which only a shape without [`OutputSpec::by_choice`] allows).
    pub fn shape_for(&self, value: Option<&str>) -> Option<&'static [OutDim]> {
        let Some(m) = &self.by_choice else {
            return Some(self.shape);
        };
        let value = value?;
        Some(
            m.cases
                .iter()
                .find(|c| c.values.contains(&value))
                .map_or(self.shape, |c| c.shape),
        )
    }
}

/// Comparison operators of `require(...)` clauses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CmpOp {
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
}

impl CmpOp {
    /// The operator as written in source.
    pub const fn symbol(self) -> &'static str {
        match self {
            CmpOp::Eq => "==",
            CmpOp::Ne => "!=",
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
        }
    }

    /// Whether `a op b` holds.
    pub fn holds(self, a: i64, b: i64) -> bool {
        match self {
            CmpOp::Eq => a == b,
            CmpOp::Ne => a != b,
            CmpOp::Lt => a < b,
            CmpOp::Le => a <= b,
            CmpOp::Gt => a > b,
            CmpOp::Ge => a >= b,
        }
    }
}

/// A `require(D <= 16384)` clause.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Requirement {
    /// Left side.
    pub lhs: DimExpr,
    /// Comparison.
    pub op: CmpOp,
    /// Right side.
    pub rhs: DimExpr,
}

/// A kernel's whole contract.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Contract {
    /// Shape patterns of the tensor parameters, in parameter order.
    pub inputs: &'static [InputShape],
    /// Dtype rules of the tensor parameters.
    pub dtypes: &'static [InputDtype],
    /// The outputs, in return order.
    pub outputs: &'static [OutputSpec],
    /// Extra conditions over bound symbols.
    pub requires: &'static [Requirement],
}
