//! Contract violations as data: what went wrong, with the values a caller may need, rendered to
//! words (`Display`) in one place.

use crate::dtype::{DType, HostDType};
use std::fmt;

/// Which Python exception a contract violation maps to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ViolationKind {
    /// A shape, rank or requirement problem (`ValueError`).
    Shape,
    /// A dtype problem (`TypeError`).
    Dtype,
}

/// Where a symbol was bound: the parameter, its pattern and its actual shape (each dimension
/// as text: a number, or a symbolic size's name under `torch.compile(dynamic=True)`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BoundBy {
    /// The parameter whose shape bound the symbol.
    pub param: &'static str,
    /// Its pattern, e.g. `[..B, D]`.
    pub pattern: String,
    /// Its actual shape.
    pub shape: Vec<String>,
}

/// What a contract check found wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Violation {
    /// The call passed a different number of tensors than the kernel takes.
    TensorCount {
        /// Tensor parameters of the kernel.
        expected: usize,
        /// Tensors passed.
        got: usize,
    },
    /// A required tensor was left out (`None`).
    MissingTensor {
        /// The parameter.
        param: &'static str,
    },
    /// A tensor's rank does not fit its pattern.
    Rank {
        /// The parameter.
        param: &'static str,
        /// Its actual shape.
        shape: Vec<String>,
        /// Its pattern.
        pattern: String,
        /// The rank the pattern needs (at least this many with a `..S`).
        rank: usize,
        /// Whether the pattern has a `..S` (so `rank` is a minimum).
        at_least: bool,
    },
    /// A dimension differs from the value an earlier tensor bound its symbol to.
    Dim {
        /// The parameter.
        param: &'static str,
        /// Its actual shape.
        shape: Vec<String>,
        /// Its pattern.
        pattern: String,
        /// The symbol.
        symbol: &'static str,
        /// The value it was bound to.
        expected: String,
        /// Where it was bound.
        bound_by: BoundBy,
    },
    /// A `..S` sequence differs from the one an earlier tensor bound.
    Rest {
        /// The parameter.
        param: &'static str,
        /// Its actual shape.
        shape: Vec<String>,
        /// Its pattern.
        pattern: String,
        /// The sequence symbol.
        symbol: &'static str,
        /// The sequence it was bound to.
        expected: Vec<String>,
        /// Where it was bound.
        bound_by: BoundBy,
    },
    /// A dimension differs from a literal in the pattern.
    Literal {
        /// The parameter.
        param: &'static str,
        /// Its actual shape.
        shape: Vec<String>,
        /// Its pattern.
        pattern: String,
        /// Which dimension.
        axis: usize,
        /// The literal.
        expected: u64,
    },
    /// A dtype outside the allowed set.
    DtypeNotAllowed {
        /// The parameter.
        param: &'static str,
        /// The dtype the caller passed (`f32`, or a host dtype such as `int32`).
        dtype: String,
        /// What the contract allows.
        allowed: &'static [DType],
    },
    /// A dtype that must equal another tensor's does not.
    DtypeMismatch {
        /// The parameter.
        param: &'static str,
        /// The dtype the caller passed.
        dtype: String,
        /// The tensor it must match.
        other: &'static str,
        /// That tensor's dtype as the caller passed it.
        other_dtype: String,
    },
    /// A `require(...)` clause does not hold.
    Requirement {
        /// The clause, e.g. `D <= 16384`.
        requirement: String,
        /// The single-dimension symbols bound, with their values (sizes, or the names of
        /// unknown sizes under symbolic shapes).
        symbols: Vec<(&'static str, String)>,
    },
    /// An output's shape depends on a string parameter the call did not give.
    MissingChoice {
        /// The output's name.
        output: &'static str,
        /// The string parameter.
        param: &'static str,
    },
    /// An output dimension evaluates to no valid size.
    OutputDim {
        /// The output's name.
        output: &'static str,
        /// The expression.
        expr: String,
    },
}

impl Violation {
    /// Shape or dtype.
    pub fn kind(&self) -> ViolationKind {
        match self {
            Violation::DtypeNotAllowed { .. } | Violation::DtypeMismatch { .. } => {
                ViolationKind::Dtype
            }
            _ => ViolationKind::Shape,
        }
    }

    /// The parameter the violation is about, if it is about one.
    pub fn param(&self) -> Option<&'static str> {
        match self {
            Violation::Rank { param, .. }
            | Violation::MissingTensor { param }
            | Violation::Dim { param, .. }
            | Violation::Rest { param, .. }
            | Violation::Literal { param, .. }
            | Violation::DtypeNotAllowed { param, .. }
            | Violation::DtypeMismatch { param, .. } => Some(param),
            _ => None,
        }
    }
}

/// `[8, 1024]` from rendered dimensions.
/// A caller's dtype as a torch user reads it: `torch.int8 (i8)` for a kernel dtype torch has
/// (the contract's own name in parentheses), `torch.int64` for a host dtype or another torch
/// name (`int64`, `torch.complex64`), the kernel name alone where torch has no such dtype
/// (`f8e4m3`). With `short`, the torch name without the kernel's.
pub(crate) fn dtype_text(caller: &str, short: bool) -> String {
    if let Some(d) = DType::from_name(caller) {
        return match d.torch_name() {
            Some(t) if short => format!("torch.{t}"),
            Some(t) => format!("torch.{t} ({caller})"),
            None => caller.to_string(),
        };
    }
    if let Some(h) = HostDType::find(caller) {
        return format!("torch.{}", h.torch);
    }
    let bare = caller.strip_prefix("torch.").unwrap_or(caller);
    format!("torch.{bare}")
}

pub(crate) fn dims_text(dims: &[String]) -> String {
    format!("[{}]", dims.join(", "))
}

impl fmt::Display for BoundBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}{} = {}",
            self.param,
            self.pattern,
            dims_text(&self.shape)
        )
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::TensorCount { expected, got } => {
                write!(f, "expected {expected} tensor arguments, got {got}")
            }
            Violation::MissingTensor { param } => {
                write!(
                    f,
                    "{param} is None, but it is a required tensor (only `Tensor?` parameters may be None)"
                )
            }
            Violation::Rank {
                param,
                shape,
                pattern,
                rank,
                at_least,
            } => {
                let need = if *at_least { "rank >= " } else { "rank " };
                write!(
                    f,
                    "{param} has rank {} (shape {}), but the contract {param}{pattern} needs {need}{rank}",
                    shape.len(),
                    dims_text(shape)
                )
            }
            Violation::Dim {
                param,
                shape,
                pattern,
                symbol,
                expected,
                bound_by,
            } => write!(
                f,
                "{param} has shape {}, but the contract {param}{pattern} needs {symbol} = {expected} (bound by {bound_by})",
                dims_text(shape)
            ),
            Violation::Rest {
                param,
                shape,
                pattern,
                symbol,
                expected,
                bound_by,
            } => write!(
                f,
                "{param} has shape {}, but the contract {param}{pattern} needs ..{symbol} = {} (bound by {bound_by})",
                dims_text(shape),
                dims_text(expected)
            ),
            Violation::Literal {
                param,
                shape,
                pattern,
                axis,
                expected,
            } => write!(
                f,
                "{param} has shape {}, but the contract {param}{pattern} needs dimension {axis} = {expected}",
                dims_text(shape)
            ),
            Violation::DtypeNotAllowed {
                param,
                dtype,
                allowed,
            } => {
                let names: Vec<&str> = allowed.iter().map(|d| d.name()).collect();
                write!(
                    f,
                    "{param} has dtype {}, but the contract allows {param} in {{{}}}",
                    dtype_text(dtype, false),
                    names.join(", ")
                )
            }
            Violation::DtypeMismatch {
                param,
                dtype,
                other,
                other_dtype,
            } => write!(
                f,
                "{param} has dtype {}, but the contract needs {param} = {other} ({other} has dtype {})",
                dtype_text(dtype, true),
                dtype_text(other_dtype, true)
            ),
            Violation::Requirement {
                requirement,
                symbols,
            } => {
                let bound: Vec<String> =
                    symbols.iter().map(|(k, v)| format!("{k} = {v}")).collect();
                write!(
                    f,
                    "the contract requires {requirement}, but {}",
                    bound.join(", ")
                )
            }
            Violation::MissingChoice { output, param } => write!(
                f,
                "output {output} has a shape chosen by {param}, but the call gave no {param}"
            ),
            Violation::OutputDim { output, expr } => write!(
                f,
                "output {output} dimension {expr} is not a valid size for these inputs"
            ),
        }
    }
}

/// A contract violation, worded for the person who called the op.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}: {violation}", crate::Qualified(.op))]
pub struct ContractViolation {
    /// The op's name.
    pub op: String,
    /// What was wrong.
    pub violation: Box<Violation>,
}

impl ContractViolation {
    /// Shape or dtype (`ValueError` or `TypeError` in Python).
    pub fn kind(&self) -> ViolationKind {
        self.violation.kind()
    }
}
