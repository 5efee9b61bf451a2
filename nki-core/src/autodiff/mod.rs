//! Backward kernels: how a forward kernel declares the kernel that computes its gradients, and
//! the compile-time check that the two contracts fit together.
//!
//! A forward declares `backward(rmsnorm_backward, saves(x, weight, rstd))`. The backward is a
//! `#[kernel]` of its own whose parameters are named after what it receives:
//!
//! - `grad_<out>`: the gradient of forward output `<out>` (only outputs that are not `saved`);
//! - a name in `saves(...)`: that forward input or output, kept from the forward call;
//! - a scalar parameter of the forward, by the same name and kind.
//!
//! Its outputs are named `grad_<input>` for the forward tensor inputs it differentiates; inputs
//! without a `grad_` output get no gradient. The `#[kernel]` expansion of the forward evaluates
//! [`check_backward`] in a `const`, so a backward that cannot accept what the forward gives it is
//! a compile error at the `backward(...)` clause.
//!
//! The same rule, evaluated at run time, is the [`BackwardPlan`]: each backward argument and
//! output by position. The backward signature, the manifest and the Python autograd, test and
//! bench layers all follow the plan instead of matching names themselves.

mod check;
mod msg;
mod plan;

pub use check::check_backward;
pub use msg::ConstMsg;
pub use plan::{BackwardArg, BackwardMismatch, BackwardPlan, SavedTensor};

use crate::kernel_def::KernelDef;
use serde::Serialize;
use serde::ser::{SerializeStruct, Serializer};

/// A forward kernel's backward declaration.
#[derive(Debug)]
pub struct BackwardDef {
    /// The backward kernel.
    pub kernel: &'static KernelDef,
    /// Forward inputs and outputs kept for the backward, by name.
    pub saves: &'static [&'static str],
}

impl Serialize for BackwardDef {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("BackwardDef", 2)?;
        st.serialize_field("kernel", self.kernel.name)?;
        st.serialize_field("saves", self.saves)?;
        st.end()
    }
}

impl BackwardDef {
    /// The plan of this declaration of forward kernel `fwd`.
    pub fn plan(&self, fwd: &KernelDef) -> Result<BackwardPlan, BackwardMismatch> {
        BackwardPlan::new(fwd, self)
    }
}

/// The prefix of gradient names: `grad_y` is the gradient of `y`.
pub const GRAD_PREFIX: &str = "grad_";
