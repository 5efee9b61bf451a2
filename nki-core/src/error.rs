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
    /// Host buffers handed to the simulator do not match the program.
    #[error("{0}")]
    Buffers(String),
    /// A bug in torch-nki or in kernel code (a panic while tracing, an impossible state).
    #[error("internal error: {0}")]
    Internal(String),
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
