//! The compile step every driver goes through: [`KernelDef::check`] turns a signature into a
//! [`CheckedSignature`] (the contract is checked once, here), [`CheckedSignature::trace`] traces
//! the kernel body, and [`compile`] adds validation and the simulator's execution plan. The
//! torch ops (through the registry's cache), the test runner, [`crate::run_kernel`] and the
//! examples all call [`compile`].

use crate::contract::OutputMeta;
use crate::error::NkiError;
use crate::ir::Program;
use crate::kernel_def::{KernelDef, Signature};
use crate::sim::ExecPlan;
use crate::validate::validate;
use std::sync::Arc;

/// A signature its kernel's contract accepted, with the outputs the contract promises for it.
/// Only [`KernelDef::check`] makes one, and tracing needs one.
#[derive(Clone, Debug)]
pub struct CheckedSignature<'k> {
    pub(crate) def: &'k KernelDef,
    pub(crate) sig: Signature,
    pub(crate) outputs: Vec<OutputMeta>,
}

impl<'k> CheckedSignature<'k> {
    /// The kernel.
    pub fn kernel(&self) -> &'k KernelDef {
        self.def
    }

    /// The signature (scalars canonical).
    pub fn signature(&self) -> &Signature {
        &self.sig
    }

    /// Output shapes and dtypes, in return order.
    pub fn outputs(&self) -> &[OutputMeta] {
        &self.outputs
    }

    /// Consumes the check, keeping the outputs.
    pub fn into_outputs(self) -> Vec<OutputMeta> {
        self.outputs
    }
}

/// A kernel compiled for one signature: traced, validated, and analysed for the simulator.
#[derive(Debug)]
pub struct Compiled {
    /// The validated program.
    pub program: Program,
    /// Output shapes and dtypes.
    pub outputs: Vec<OutputMeta>,
    /// What the simulator derived from the program once (parallel loops, poison elision).
    pub plan: ExecPlan,
}

/// Checks `sig` against `def`'s contract, traces the kernel, validates the program for the
/// signature's target and plans its simulation.
pub fn compile(def: &KernelDef, sig: &Signature) -> Result<Arc<Compiled>, NkiError> {
    compile_checked(&def.check(sig)?)
}

/// [`compile`] for a signature already checked.
pub fn compile_checked(checked: &CheckedSignature<'_>) -> Result<Arc<Compiled>, NkiError> {
    let program = checked.trace()?;
    validate(&program)?;
    let plan = ExecPlan::new(&program);
    Ok(Arc::new(Compiled {
        program,
        outputs: checked.outputs.clone(),
        plan,
    }))
}
