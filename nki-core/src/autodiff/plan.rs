//! The backward plan: which value of a forward call each backward kernel argument is, and which
//! forward input each backward output is the gradient of.
//!
//! The wiring rule is written once, here, as `const fn`s over the two kernels' declarations:
//! [`check_backward`](super::check_backward) evaluates it at compile time (so a parameter that
//! names nothing is a compile error), and [`BackwardPlan::new`] evaluates it at run time into the
//! plan that the backward signature, the manifest and, through it, every Python caller carry
//! out. Nothing else resolves `grad_<out>` or saved names.

// Errors are `ConstMsg` buffers by value: the rule runs in `const` evaluation, which cannot
// allocate.
#![allow(clippy::result_large_err)]

use super::msg::{ConstMsg, str_eq, strip_prefix};
use super::{BackwardDef, GRAD_PREFIX};
use crate::contract::Contract;
use crate::kernel_def::{KernelDef, ParamDef, ParamKind};
use serde::Serialize;

/// What the rule reports against: the two kernels, for message prefixes.
#[derive(Clone, Copy)]
pub(super) struct Ctx<'a> {
    /// The forward kernel.
    pub fwd: &'a KernelDef,
    /// Its backward kernel.
    pub bwd: &'a KernelDef,
}

impl Ctx<'_> {
    /// `backward kernel `b` of `f`: `, the start of every message.
    pub const fn msg(self) -> ConstMsg {
        ConstMsg::new()
            .push("backward kernel `")
            .push(self.bwd.name)
            .push("` of `")
            .push(self.fwd.name)
            .push("`: ")
    }
}

/// A forward tensor the forward call keeps for the backward (one per `saves(...)` name, in
/// that order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SavedTensor {
    /// The forward argument at position `param` of the forward's parameters (all of them,
    /// scalars included: the op's argument position).
    Input {
        /// Index into the forward's `params`.
        param: usize,
    },
    /// Forward output `output` (saved outputs included, as the `<name>_fwd` op returns them).
    Output {
        /// Index into the forward contract's `outputs`.
        output: usize,
    },
}

/// Where one backward kernel argument comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum BackwardArg {
    /// The gradient of forward output `output` (`grad_<output>`; never a `saved` output).
    Grad {
        /// Index into the forward contract's `outputs`.
        output: usize,
    },
    /// The saved tensor `slot` ([`BackwardPlan::saved`]).
    Saved {
        /// Index into [`BackwardPlan::saved`] (and the `saves(...)` list).
        slot: usize,
    },
    /// The forward's scalar argument at position `param`, by the same name.
    Scalar {
        /// Index into the forward's `params`.
        param: usize,
    },
}

/// How a forward call feeds its backward kernel, by position: what the forward saves, what
/// each backward parameter receives, and what each backward output is the gradient of.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BackwardPlan {
    /// What the forward keeps, one per `saves(...)` name, in that order.
    pub saved: Vec<SavedTensor>,
    /// One per backward parameter, in the backward's parameter order.
    pub args: Vec<BackwardArg>,
    /// One per backward output: the forward parameter position (a tensor input) whose
    /// gradient it is.
    pub grads: Vec<usize>,
}

/// The error of a backward declaration whose kernel does not fit its forward: the message the
/// compile-time check reports (reached at run time only by kernels not built by `#[kernel]`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BackwardMismatch(pub String);

impl BackwardMismatch {
    fn from_msg(m: ConstMsg) -> BackwardMismatch {
        BackwardMismatch(m.as_str().to_string())
    }
}

impl BackwardPlan {
    /// The plan of `fwd`'s backward declaration `bwd`.
    pub fn new(fwd: &KernelDef, bwd: &BackwardDef) -> Result<BackwardPlan, BackwardMismatch> {
        let ctx = Ctx {
            fwd,
            bwd: bwd.kernel,
        };
        let err = BackwardMismatch::from_msg;
        let saved = (0..bwd.saves.len())
            .map(|slot| saved_tensor(ctx, bwd.saves, slot).map_err(err))
            .collect::<Result<_, _>>()?;
        let args = bwd
            .kernel
            .params
            .iter()
            .map(|&p| arg(ctx, bwd.saves, p).map_err(err))
            .collect::<Result<_, _>>()?;
        let grads = bwd
            .kernel
            .contract
            .outputs
            .iter()
            .map(|o| grad_of(ctx, o.name).map_err(err))
            .collect::<Result<_, _>>()?;
        Ok(BackwardPlan { saved, args, grads })
    }
}

/// Position of the tensor parameter `name` of `def`.
const fn tensor_param(def: &KernelDef, name: &str) -> Option<usize> {
    let mut i = 0;
    while i < def.params.len() {
        if str_eq(def.params[i].name, name) && def.params[i].kind.is_tensor() {
            return Some(i);
        }
        i += 1;
    }
    None
}

/// Index of output `name` of `c`.
pub(super) const fn find_output(c: &Contract, name: &str) -> Option<usize> {
    let mut i = 0;
    while i < c.outputs.len() {
        if str_eq(c.outputs[i].name, name) {
            return Some(i);
        }
        i += 1;
    }
    None
}

/// Position of `name` in `list`.
const fn position(list: &[&str], name: &str) -> Option<usize> {
    let mut i = 0;
    while i < list.len() {
        if str_eq(list[i], name) {
            return Some(i);
        }
        i += 1;
    }
    None
}

/// What `saves[slot]` names: a forward tensor input, else a forward output.
pub(super) const fn saved_tensor(
    ctx: Ctx,
    saves: &[&str],
    slot: usize,
) -> Result<SavedTensor, ConstMsg> {
    let name = saves[slot];
    if let Some(param) = tensor_param(ctx.fwd, name) {
        return Ok(SavedTensor::Input { param });
    }
    if let Some(output) = find_output(&ctx.fwd.contract, name) {
        return Ok(SavedTensor::Output { output });
    }
    Err(ctx
        .msg()
        .push("`saves(...)` names `")
        .push(name)
        .push("`, which is neither a tensor parameter nor an output of the forward"))
}

/// What backward parameter `p` receives: for a tensor, the gradient of a forward output
/// (`grad_<output>`) or a saved tensor (by name); for a scalar, the forward scalar of the same
/// name and kind.
pub(super) const fn arg(ctx: Ctx, saves: &[&str], p: ParamDef) -> Result<BackwardArg, ConstMsg> {
    if p.kind.is_tensor() {
        tensor_arg(ctx, saves, p.name)
    } else {
        scalar_arg(ctx, p)
    }
}

/// Where backward tensor parameter `name` comes from, or an error naming what it could be.
pub(super) const fn tensor_arg(
    ctx: Ctx,
    saves: &[&str],
    name: &str,
) -> Result<BackwardArg, ConstMsg> {
    let fwd = &ctx.fwd.contract;
    if let Some(out) = strip_prefix(name, GRAD_PREFIX)
        && let Some(output) = find_output(fwd, out)
    {
        if fwd.outputs[output].saved {
            return Err(ctx
                .msg()
                .push("parameter `")
                .push(name)
                .push("` is the gradient of `")
                .push(out)
                .push("`, a `saved` output the torch op does not return; it has no gradient"));
        }
        return Ok(BackwardArg::Grad { output });
    }
    if let Some(slot) = position(saves, name)
        && saved_tensor(ctx, saves, slot).is_ok()
    {
        return Ok(BackwardArg::Saved { slot });
    }
    Err(ctx
        .msg()
        .push("tensor parameter `")
        .push(name)
        .push("` is neither the gradient of a forward output (`grad_<output>`) nor a saved tensor (saves: ")
        .push_list(saves)
        .push(")"))
}

/// The forward scalar backward scalar parameter `p` receives: the one of the same name and
/// kind (an optional one only into an optional one).
const fn scalar_arg(ctx: Ctx, p: ParamDef) -> Result<BackwardArg, ConstMsg> {
    let fwd = ctx.fwd;
    let mut j = 0;
    while j < fwd.params.len() {
        let q = fwd.params[j];
        if str_eq(q.name, p.name)
            && matches!(
                (p.kind, q.kind),
                (ParamKind::Float { .. }, ParamKind::Float { .. })
                    | (ParamKind::Int { .. }, ParamKind::Int { .. })
                    | (ParamKind::Bool { .. }, ParamKind::Bool { .. })
                    | (ParamKind::Str { .. }, ParamKind::Str { .. })
            )
        {
            if q.kind.is_optional_scalar() && !p.kind.is_optional_scalar() {
                return Err(ctx
                    .msg()
                    .push("scalar parameter `")
                    .push(p.name)
                    .push("` receives the forward's optional `")
                    .push(q.name)
                    .push("`, which may be None: declare it `Option<_>`"));
            }
            return Ok(BackwardArg::Scalar { param: j });
        }
        j += 1;
    }
    Err(ctx
        .msg()
        .push("scalar parameter `")
        .push(p.name)
        .push("` is not a scalar parameter of the forward of the same kind"))
}

/// The forward parameter position whose gradient backward output `name` (`grad_<input>`) is.
pub(super) const fn grad_of(ctx: Ctx, name: &str) -> Result<usize, ConstMsg> {
    let Some(input) = strip_prefix(name, GRAD_PREFIX) else {
        return Err(ctx.msg().push("output `").push(name).push(
            "` must be named `grad_<input>` after the forward tensor input it is the gradient of",
        ));
    };
    match tensor_param(ctx.fwd, input) {
        Some(param) => Ok(param),
        None => Err(ctx
            .msg()
            .push("output `")
            .push(name)
            .push("` is the gradient of `")
            .push(input)
            .push("`, which is not a tensor parameter of the forward")),
    }
}
