//! [`check_backward`]: whether a backward kernel's contract accepts everything its forward can
//! give it, decided symbolically on the two contracts in `const` evaluation (so a mismatch is a
//! compile error at the forward's `backward(...)` clause).
//!
//! Shapes are unified: each backward pattern is matched against the forward's pattern (for a
//! saved input) or output shape (for a saved output or an output's gradient), binding backward
//! symbols to forward dimensions; a backward literal must meet the same literal, and a fixed-rank
//! backward pattern cannot take a forward `..S` of any rank. Each `grad_<input>` output must have
//! exactly that input's pattern after substitution. Dtypes are compared through the forward's
//! rules: a backward `p in {..}` must admit every dtype the forward allows there, and `p = q`
//! must hold for every forward call. `require(...)` clauses of the backward are not proven here;
//! the test suite traces every kernel at the extreme shapes its contract admits.

// Errors are `ConstMsg` buffers by value: `const` evaluation cannot allocate, so they cannot be
// boxed, and they only exist at compile time.
#![allow(clippy::result_large_err)]

mod dtypes;
mod unify;

use super::GRAD_PREFIX;
use super::msg::{ConstMsg, str_eq, strip_prefix};
use super::plan::{self, BackwardArg, Ctx, SavedTensor};
use crate::contract::{Contract, DimExpr, DimPattern, DtypeRule, OutDim, OutputDtype, OutputSpec};
use crate::kernel_def::{KernelDef, ParamKind};
use dtypes::{Root, input_root, push_dtypes, push_root, root_eq, root_within, source_root};
use unify::{Binds, Dims, Term, push_dims, term_eq, unify};

/// Most symbols a contract check tracks.
const MAX_SYMS: usize = 32;
/// Most dimensions a spliced shape may have.
const MAX_DIMS: usize = 64;

/// Where a backward tensor parameter's value comes from, for shapes and dtypes.
#[derive(Clone, Copy)]
enum Source {
    /// Forward tensor input (index into `contract.inputs`).
    Input(usize),
    /// Forward output, or the gradient of one (same shape and dtype).
    Output(usize),
}

/// Name and dimension list of a source, for messages and unification.
const fn source_dims(fwd: &Contract, s: Source, variant: Variant) -> (&'static str, Dims) {
    match s {
        Source::Input(i) => (fwd.inputs[i].param, Dims::In(fwd.inputs[i].dims)),
        Source::Output(o) => (
            fwd.outputs[o].name,
            Dims::Out(output_dims(&fwd.outputs[o], variant)),
        ),
    }
}

/// An output's shape when `variant` chooses it.
const fn output_dims(o: &OutputSpec, variant: Variant) -> &'static [OutDim] {
    if let (Some(m), Some((param, value))) = (o.by_choice, variant)
        && str_eq(m.param, param)
    {
        let mut c = 0;
        while c < m.cases.len() {
            if contains(m.cases[c].values, value) {
                return m.cases[c].shape;
            }
            c += 1;
        }
    }
    o.shape
}

const fn find_input(c: &Contract, name: &str) -> Option<usize> {
    let mut i = 0;
    while i < c.inputs.len() {
        if str_eq(c.inputs[i].param, name) {
            return Some(i);
        }
        i += 1;
    }
    None
}

/// Where backward tensor parameter `name` comes from (the plan's rule,
/// [`plan::tensor_arg`]), as the forward tensor whose shape and dtype it has.
const fn resolve(ctx: Ctx, saves: &[&str], name: &str) -> Result<Source, ConstMsg> {
    let saved = match plan::tensor_arg(ctx, saves, name) {
        Ok(BackwardArg::Grad { output }) => return Ok(Source::Output(output)),
        Ok(BackwardArg::Saved { slot }) => plan::saved_tensor(ctx, saves, slot),
        Ok(BackwardArg::Scalar { .. }) => {
            return Err(ctx
                .msg()
                .push("internal: a tensor parameter resolved to a scalar"));
        }
        Err(e) => return Err(e),
    };
    match saved {
        Ok(SavedTensor::Output { output }) => Ok(Source::Output(output)),
        Ok(SavedTensor::Input { param }) => match forward_input(ctx, param) {
            Ok(i) => Ok(Source::Input(i)),
            Err(e) => Err(e),
        },
        Err(e) => Err(e),
    }
}

/// Forward parameter `param` (a tensor) as an index into the forward's `contract.inputs`.
const fn forward_input(ctx: Ctx, param: usize) -> Result<usize, ConstMsg> {
    match find_input(&ctx.fwd.contract, ctx.fwd.params[param].name) {
        Some(i) => Ok(i),
        None => Err(ctx
            .msg()
            .push("internal: a tensor parameter outside the contract")),
    }
}

const fn contains(list: &[&str], name: &str) -> bool {
    let mut i = 0;
    while i < list.len() {
        if str_eq(list[i], name) {
            return true;
        }
        i += 1;
    }
    false
}

/// Whether `name` is an optional tensor parameter (`Option<&Hbm>`) of `def`.
const fn is_optional(def: &KernelDef, name: &str) -> bool {
    let mut i = 0;
    while i < def.params.len() {
        if str_eq(def.params[i].name, name) {
            return matches!(def.params[i].kind, ParamKind::OptionalTensor);
        }
        i += 1;
    }
    false
}

/// The source of every backward tensor parameter, in `contract.inputs` order.
struct Sources {
    of: [Option<Source>; MAX_SYMS],
}

const fn bwd_source(srcs: &Sources, bwd: &Contract, name: &str) -> Option<Source> {
    match find_input(bwd, name) {
        Some(i) => srcs.of[i],
        None => None,
    }
}

/// Checks that backward kernel `bwd` accepts everything forward kernel `fwd` (whose
/// `backward(...)` clause saves `saves`) gives it. The error is the compile-time message.
pub const fn check_backward(
    fwd: &'static KernelDef,
    bwd: &'static KernelDef,
    saves: &'static [&'static str],
) -> Result<(), ConstMsg> {
    let ctx = Ctx { fwd, bwd };
    let (fc, bc) = (&fwd.contract, &bwd.contract);
    if bc.inputs.len() > MAX_SYMS {
        return Err(ctx.msg().push("too many tensor parameters to check"));
    }
    // Scalars: a forward scalar of the same name and kind.
    let mut i = 0;
    while i < bwd.params.len() {
        let p = bwd.params[i];
        if !p.kind.is_tensor()
            && let Err(e) = plan::arg(ctx, saves, p)
        {
            return Err(e);
        }
        i += 1;
    }
    // Tensor parameters, once per shape an output can have: outputs whose shape a string
    // parameter chooses (`match reduction { .. }`) are checked with each arm.
    if let Err(e) = check_tensors(ctx, saves, None) {
        return Err(e);
    }
    let mut o = 0;
    while o < fc.outputs.len() {
        if let Some(m) = fc.outputs[o].by_choice {
            let mut c = 0;
            while c < m.cases.len() {
                let mut v = 0;
                while v < m.cases[c].values.len() {
                    if let Err(e) = check_tensors(ctx, saves, Some((m.param, m.cases[c].values[v])))
                    {
                        return Err(e);
                    }
                    v += 1;
                }
                c += 1;
            }
        }
        o += 1;
    }
    Ok(())
}

/// A string parameter's value that chooses output shapes (`None`: every default arm).
type Variant = Option<(&'static str, &'static str)>;

/// The shapes of the backward's tensor parameters and outputs against the forward's, with the
/// forward's `match` outputs taking their shape for `variant`; then the dtypes.
const fn check_tensors(
    ctx: Ctx,
    saves: &'static [&'static str],
    variant: Variant,
) -> Result<(), ConstMsg> {
    let (fwd, bwd) = (ctx.fwd, ctx.bwd);
    let (fc, bc) = (&fwd.contract, &bwd.contract);
    let mut i;
    let mut srcs = Sources {
        of: [None; MAX_SYMS],
    };
    let mut b = Binds::new();
    i = 0;
    while i < bc.inputs.len() {
        let inp = bc.inputs[i];
        let src = match resolve(ctx, saves, inp.param) {
            Ok(s) => s,
            Err(e) => return Err(e),
        };
        srcs.of[i] = Some(src);
        if let Source::Input(fi) = src
            && is_optional(fwd, fc.inputs[fi].param)
            && !is_optional(bwd, inp.param)
        {
            return Err(ctx
                .msg()
                .push("tensor parameter `")
                .push(inp.param)
                .push("` receives the forward's optional `")
                .push(fc.inputs[fi].param)
                .push("`, which may be None: declare it `Option<&Hbm>`"));
        }
        b = match unify(ctx, b, inp.param, inp.dims, source_dims(fc, src, variant)) {
            Ok(b) => b,
            Err(e) => return Err(e),
        };
        i += 1;
    }
    i = 0;
    while i < bc.dtypes.len() {
        let rule = bc.dtypes[i];
        let Some(src) = bwd_source(&srcs, bc, rule.param) else {
            return Err(ctx
                .msg()
                .push("internal: dtype rule of an unknown parameter"));
        };
        let root = source_root(fc, src);
        match rule.rule {
            DtypeRule::OneOf { allowed } => {
                if !root_within(root, allowed) {
                    let m = ctx.msg().push("`").push(rule.param).push("` allows ");
                    let m = push_dtypes(m, allowed).push(", but the forward gives it ");
                    return Err(push_root(m, root));
                }
            }
            DtypeRule::SameAs { param } => {
                let Some(other) = bwd_source(&srcs, bc, param) else {
                    return Err(ctx
                        .msg()
                        .push("internal: dtype rule names an unknown parameter"));
                };
                if !root_eq(root, source_root(fc, other)) {
                    let m = ctx.msg().push("`").push(rule.param).push(" = ").push(param);
                    return Err(m.push("` does not hold for every forward call: they come from tensors whose dtypes may differ"));
                }
            }
        }
        i += 1;
    }
    // Outputs: `grad_<input>`, with that input's shape and dtype.
    i = 0;
    while i < bc.outputs.len() {
        let out = bc.outputs[i];
        let (input, fi) = match plan::grad_of(ctx, out.name) {
            Ok(param) => match forward_input(ctx, param) {
                Ok(fi) => (fwd.params[param].name, fi),
                Err(e) => return Err(e),
            },
            Err(e) => return Err(e),
        };
        if let Err(e) = same_shape(ctx, &b, out.name, out.shape, fc.inputs[fi].dims) {
            return Err(e);
        }
        let want = input_root(fc, fc.inputs[fi].param);
        let got = match out.dtype {
            OutputDtype::SameAs { param } => match bwd_source(&srcs, bc, param) {
                Some(s) => source_root(fc, s),
                None => {
                    return Err(ctx
                        .msg()
                        .push("internal: output dtype of an unknown parameter"));
                }
            },
            OutputDtype::Fixed { dtype } => Root::Fixed(dtype),
        };
        if !root_eq(got, want) {
            let m = ctx.msg().push("output `").push(out.name).push("` has ");
            let m = push_root(m, got)
                .push(", but forward ")
                .push(input)
                .push(" has ");
            return Err(push_root(m, want));
        }
        i += 1;
    }
    Ok(())
}

/// Whether backward output shape `out` is forward input pattern `want` once backward symbols are
/// replaced by the forward dimensions they were bound to.
const fn same_shape(
    ctx: Ctx,
    b: &Binds,
    name: &'static str,
    out: &'static [OutDim],
    want: &'static [DimPattern],
) -> Result<(), ConstMsg> {
    let mut terms = [Term::Const(0); MAX_DIMS];
    let mut n = 0;
    let mut i = 0;
    let mut ok = true;
    while ok && i < out.len() {
        match &out[i] {
            OutDim::Expr { expr } => {
                let t = match expr {
                    DimExpr::Sym { name } => b.dim(name),
                    DimExpr::Const { value } => Some(Term::Const(*value)),
                    DimExpr::Binary { .. } => None,
                };
                match t {
                    Some(t) if n < MAX_DIMS => {
                        terms[n] = t;
                        n += 1;
                    }
                    _ => ok = false,
                }
            }
            OutDim::Rest { name } => match b.rest(name) {
                Some((d, s, l)) if n + l <= MAX_DIMS => {
                    let mut k = 0;
                    while k < l {
                        terms[n] = d.term(s + k);
                        n += 1;
                        k += 1;
                    }
                }
                _ => ok = false,
            },
        }
        i += 1;
    }
    let w = Dims::In(want);
    ok = ok && n == w.len();
    i = 0;
    while ok && i < n {
        ok = term_eq(terms[i], w.term(i));
        i += 1;
    }
    if ok {
        return Ok(());
    }
    let m = ctx
        .msg()
        .push("output `")
        .push(name)
        .push("` has the shape ");
    let m = push_dims(m, Dims::Out(out)).push(", which is not always the forward's ");
    let input = match strip_prefix(name, GRAD_PREFIX) {
        Some(s) => s,
        None => name,
    };
    Err(push_dims(m.push(input), w))
}
