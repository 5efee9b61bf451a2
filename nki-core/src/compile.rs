//! The compile step every driver goes through: [`KernelDef::check`] turns a signature into a
//! [`CheckedSignature`] (the contract is checked once, here), [`CheckedSignature::trace`] traces
//! the kernel body, and [`compile`] adds validation and the simulator's execution plan. The
//! torch ops (through the registry's cache), the test runner, [`crate::run_kernel`] and the
//! examples all call [`compile`].

use crate::contract::OutputMeta;
use crate::error::NkiError;
use crate::ir::Program;
use crate::kernel_def::{KernelDef, Signature};
use crate::sim::{ExecPlan, HostTensor, HostTensorMut, Placement, Plan, simulate_planned, to_vecs};
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
/// Only [`compile`] makes one, so its plan is always its own program's (which is what lets
/// [`Compiled::simulate`] skip the analysis):
///
/// ```compile_fail,E0451
/// fn pair(program: nki_core::ir::Program, plan: nki_core::sim::ExecPlan) -> nki_core::Compiled {
///     nki_core::Compiled { program, outputs: Vec::new(), plan }
/// }
/// ```
#[derive(Debug)]
pub struct Compiled {
    program: Program,
    outputs: Vec<OutputMeta>,
    plan: ExecPlan,
}

impl Compiled {
    /// The validated program.
    pub fn program(&self) -> &Program {
        &self.program
    }

    /// Output shapes and dtypes, in return order.
    pub fn outputs(&self) -> &[OutputMeta] {
        &self.outputs
    }

    /// What the simulator derived from the program once (parallel loops, poison elision,
    /// banded runs).
    pub fn plan(&self) -> &ExecPlan {
        &self.plan
    }

    /// Simulates the program on caller buffers, as [`crate::sim::simulate`] does, with the
    /// plan made at compile time instead of a fresh analysis. With `parallel`, a run large
    /// enough to pay for it goes to the simulator's threads while a core is free for them, and
    /// runs with the host's other threads asleep while none is ([`ExecPlan::placement`]);
    /// otherwise it runs on the calling thread (the bits are the same either way).
    pub fn simulate(
        &self,
        inputs: &[HostTensor<'_>],
        outputs: &mut [HostTensorMut<'_>],
        parallel: bool,
    ) -> Result<(), NkiError> {
        let placement = if parallel {
            self.plan.placement()
        } else {
            Placement::Calling
        };
        let mut run = |parallel: bool| {
            simulate_planned(
                &self.program,
                Plan::Made(&self.plan),
                inputs,
                outputs,
                crate::sim::Run {
                    parallel,
                    order: crate::sim::IterationOrder::Program,
                    trap: false,
                    forward: true,
                },
            )
        };
        match placement {
            Placement::Calling => run(false),
            Placement::Split => run(true),
            Placement::Alone => crate::sim::threads::alone(|| run(false)),
        }
    }

    /// [`Compiled::simulate`] into freshly allocated output buffers, as
    /// [`crate::sim::simulate_to_vecs`] does.
    pub fn simulate_to_vecs(
        &self,
        inputs: &[&[u8]],
        parallel: bool,
    ) -> Result<Vec<Vec<u8>>, NkiError> {
        to_vecs(&self.program, inputs, |host_in, host_out| {
            self.simulate(host_in, host_out, parallel)
        })
    }
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
