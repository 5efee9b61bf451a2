//! The crate's error type: trace, validation and simulation failures, each naming its source line.

use crate::contract::ContractViolation;
use crate::loc::SourceLoc;

/// Everything that can go wrong between a kernel call and its result.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum NkiError {
    /// The kernel's arguments break its contract.
    #[error(transparent)]
    Contract(#[from] ContractViolation),
    /// The kernel body did something the tile language rejects while tracing.
    #[error("trace error at {loc}: {message}")]
    Trace {
        /// What went wrong.
        message: String,
        /// The kernel source line.
        loc: SourceLoc,
    },
    /// The traced program breaks a hardware constraint of the target.
    #[error(transparent)]
    Validation(Box<ValidationError>),
    /// Executing the program failed (e.g. an uninitialised read in strict mode).
    #[error("simulation error at {loc} ({instruction}): {message}")]
    Simulation {
        /// What went wrong.
        message: String,
        /// The instruction.
        instruction: &'static str,
        /// The kernel source line.
        loc: SourceLoc,
    },
    /// An integer input holds a value outside the indices its kernel declared
    /// ([`crate::lang::hbm::Hbm::require_indices`]).
    #[error("{}: {param}{position} = {value} is out of range: {}", crate::contract::Qualified(.op), domain_text(*.lo, *.hi, *.except))]
    IndexOutOfRange {
        /// The kernel.
        op: String,
        /// The input.
        param: String,
        /// Where, as `[i, j]`.
        position: String,
        /// The value found.
        value: i64,
        /// Smallest valid index.
        lo: i64,
        /// One past the largest valid index.
        hi: i64,
        /// The other value accepted.
        except: Option<i64>,
    },
    /// Host buffers handed to the simulator do not match the program.
    #[error("{0}")]
    Buffers(String),
    /// A bug in torch-nki or in kernel code (a panic while tracing, an impossible state).
    #[error("internal error: {0}")]
    Internal(String),
}

fn domain_text(lo: i64, hi: i64, except: Option<i64>) -> String {
    match except {
        Some(e) => format!("the kernel takes indices in [{lo}, {hi}) or {e}"),
        None => format!("the kernel takes indices in [{lo}, {hi})"),
    }
}

/// A hardware-constraint violation found by [`crate::validate`].
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error(
    "validation failed [{rule}] at {loc} ({instruction}): {message} (limit {limit}, actual {actual})"
)]
pub struct ValidationError {
    /// The rule's name, e.g. `partition-dim`.
    pub rule: &'static str,
    /// The limit the rule enforces.
    pub limit: String,
    /// The offending value.
    pub actual: String,
    /// The instruction (or `alloc`) that broke it.
    pub instruction: String,
    /// Explanation.
    pub message: String,
    /// The kernel source line.
    pub loc: SourceLoc,
}

/// Something validation could not decide either way (see
/// [`crate::validate::validate_with_warnings`]): the program is accepted, and the warning says
/// what was not proven and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValidationWarning {
    /// The rule that could not decide, e.g. `affine-range-dependence`.
    pub rule: &'static str,
    /// What was not proven, and why.
    pub message: String,
    /// The kernel source line it concerns.
    pub loc: SourceLoc,
}

impl std::fmt::Display for ValidationWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "validation warning [{}] at {}: {}",
            self.rule, self.loc, self.message
        )
    }
}

impl NkiError {
    /// Prefixes trace messages with the kernel's name.
    pub(crate) fn in_kernel(self, name: &str) -> NkiError {
        match self {
            NkiError::Trace { message, loc } => NkiError::Trace {
                message: format!("kernel {name}: {message}"),
                loc,
            },
            other => other,
        }
    }
}
