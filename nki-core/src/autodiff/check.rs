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

use super::GRAD_PREFIX;
use super::msg::{ConstMsg, str_eq, strip_prefix};
use crate::contract::{Contract, DimExpr, DimPattern, DtypeRule, OutDim, OutputDtype, OutputSpec};
use crate::dtype::DType;
use crate::kernel_def::{KernelDef, ParamKind};

/// Most symbols a contract check tracks.
const MAX_SYMS: usize = 32;
/// Most dimensions a spliced shape may have.
const MAX_DIMS: usize = 64;

/// Where a backward tensor parameter's value comes from.
#[derive(Clone, Copy)]
enum Source {
    /// Forward tensor input (index into `contract.inputs`).
    Input(usize),
    /// Forward output, or the gradient of one (same shape and dtype).
    Output(usize),
}

/// A forward dimension list.
#[derive(Clone, Copy)]
enum Dims {
    In(&'static [DimPattern]),
    Out(&'static [OutDim]),
}

/// One forward dimension.
#[derive(Clone, Copy)]
enum Term {
    Sym(&'static str),
    Const(i64),
    Rest(&'static str),
    Expr(&'static DimExpr),
}

impl Dims {
    const fn len(self) -> usize {
        match self {
            Dims::In(d) => d.len(),
            Dims::Out(d) => d.len(),
        }
    }

    const fn term(self, i: usize) -> Term {
        match self {
            Dims::In(d) => match d[i] {
                DimPattern::Sym { name } => Term::Sym(name),
                DimPattern::Const { value } => Term::Const(value as i64),
                DimPattern::Rest { name } => Term::Rest(name),
            },
            Dims::Out(d) => match &d[i] {
                OutDim::Expr { expr } => match expr {
                    DimExpr::Sym { name } => Term::Sym(name),
                    DimExpr::Const { value } => Term::Const(*value),
                    other => Term::Expr(other),
                },
                OutDim::Rest { name } => Term::Rest(name),
            },
        }
    }
}

const fn expr_eq(a: &DimExpr, b: &DimExpr) -> bool {
    match (a, b) {
        (DimExpr::Sym { name: x }, DimExpr::Sym { name: y }) => str_eq(x, y),
        (DimExpr::Const { value: x }, DimExpr::Const { value: y }) => *x == *y,
        (
            DimExpr::Binary {
                op: o1,
                lhs: l1,
                rhs: r1,
            },
            DimExpr::Binary {
                op: o2,
                lhs: l2,
                rhs: r2,
            },
        ) => *o1 as u8 == *o2 as u8 && expr_eq(l1, l2) && expr_eq(r1, r2),
        _ => false,
    }
}

const fn term_eq(a: Term, b: Term) -> bool {
    match (a, b) {
        (Term::Sym(x), Term::Sym(y)) | (Term::Rest(x), Term::Rest(y)) => str_eq(x, y),
        (Term::Const(x), Term::Const(y)) => x == y,
        (Term::Expr(x), Term::Expr(y)) => expr_eq(x, y),
        _ => false,
    }
}

const fn push_i64(m: ConstMsg, v: i64) -> ConstMsg {
    let mut digits = [0u8; 20];
    let mut n = v.unsigned_abs();
    let mut len = 0;
    loop {
        digits[len] = b'0' + (n % 10) as u8;
        len += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let mut m = if v < 0 { m.push("-") } else { m };
    while len > 0 {
        len -= 1;
        let d = [digits[len]];
        m = match core::str::from_utf8(&d) {
            Ok(s) => m.push(s),
            Err(_) => m,
        };
    }
    m
}

const fn push_expr(m: ConstMsg, e: &DimExpr) -> ConstMsg {
    match e {
        DimExpr::Sym { name } => m.push(name),
        DimExpr::Const { value } => push_i64(m, *value),
        DimExpr::Binary { op, lhs, rhs } => {
            let m = push_expr(m.push("("), lhs)
                .push(" ")
                .push(op.symbol())
                .push(" ");
            push_expr(m, rhs).push(")")
        }
    }
}

const fn push_term(m: ConstMsg, t: Term) -> ConstMsg {
    match t {
        Term::Sym(s) => m.push(s),
        Term::Const(v) => push_i64(m, v),
        Term::Rest(s) => m.push("..").push(s),
        Term::Expr(e) => push_expr(m, e),
    }
}

const fn push_dims(mut m: ConstMsg, d: Dims) -> ConstMsg {
    m = m.push("[");
    let mut i = 0;
    while i < d.len() {
        if i > 0 {
            m = m.push(", ");
        }
        m = push_term(m, d.term(i));
        i += 1;
    }
    m.push("]")
}

const fn push_dtypes(mut m: ConstMsg, ds: &[DType]) -> ConstMsg {
    m = m.push("{");
    let mut i = 0;
    while i < ds.len() {
        if i > 0 {
            m = m.push(", ");
        }
        m = m.push(ds[i].name());
        i += 1;
    }
    m.push("}")
}

/// Backward symbols bound to forward dimensions.
struct Binds {
    dims: [(&'static str, Term); MAX_SYMS],
    n_dims: usize,
    /// `..S` → a slice `start..start + len` of a forward dimension list.
    rests: [(&'static str, Dims, usize, usize); MAX_SYMS],
    n_rests: usize,
}

impl Binds {
    const fn new() -> Binds {
        Binds {
            dims: [("", Term::Const(0)); MAX_SYMS],
            n_dims: 0,
            rests: [("", Dims::In(&[]), 0, 0); MAX_SYMS],
            n_rests: 0,
        }
    }

    const fn dim(&self, name: &str) -> Option<Term> {
        let mut i = 0;
        while i < self.n_dims {
            if str_eq(self.dims[i].0, name) {
                return Some(self.dims[i].1);
            }
            i += 1;
        }
        None
    }

    const fn rest(&self, name: &str) -> Option<(Dims, usize, usize)> {
        let mut i = 0;
        while i < self.n_rests {
            if str_eq(self.rests[i].0, name) {
                let (_, d, s, l) = self.rests[i];
                return Some((d, s, l));
            }
            i += 1;
        }
        None
    }
}

/// What the check reports against: the two kernels, for message prefixes.
#[derive(Clone, Copy)]
struct Ctx {
    fwd: &'static KernelDef,
    bwd: &'static KernelDef,
}

impl Ctx {
    const fn msg(self) -> ConstMsg {
        ConstMsg::new()
            .push("backward kernel `")
            .push(self.bwd.name)
            .push("` of `")
            .push(self.fwd.name)
            .push("`: ")
    }
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

const fn find_output(c: &Contract, name: &str) -> Option<usize> {
    let mut i = 0;
    while i < c.outputs.len() {
        if str_eq(c.outputs[i].name, name) {
            return Some(i);
        }
        i += 1;
    }
    None
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

/// Where backward tensor parameter `name` comes from, or an error naming what it could be.
const fn resolve(ctx: Ctx, saves: &[&str], name: &'static str) -> Result<Source, ConstMsg> {
    let fwd = &ctx.fwd.contract;
    if let Some(out) = strip_prefix(name, GRAD_PREFIX)
        && let Some(o) = find_output(fwd, out)
    {
        if fwd.outputs[o].saved {
            return Err(ctx
                .msg()
                .push("parameter `")
                .push(name)
                .push("` is the gradient of `")
                .push(out)
                .push("`, a `saved` output the torch op does not return; it has no gradient"));
        }
        return Ok(Source::Output(o));
    }
    if contains(saves, name) {
        if let Some(i) = find_input(fwd, name) {
            return Ok(Source::Input(i));
        }
        if let Some(o) = find_output(fwd, name) {
            return Ok(Source::Output(o));
        }
    }
    Err(ctx
        .msg()
        .push("tensor parameter `")
        .push(name)
        .push("` is neither the gradient of a forward output (`grad_<output>`) nor a saved tensor (saves: ")
        .push_list(saves)
        .push(")"))
}

const fn match_dim(
    ctx: Ctx,
    mut b: Binds,
    param: &str,
    pat: DimPattern,
    t: Term,
    what: (&'static str, Dims),
) -> Result<Binds, ConstMsg> {
    match pat {
        DimPattern::Sym { name } => match b.dim(name) {
            Some(prev) if !term_eq(prev, t) => {
                let m = ctx
                    .msg()
                    .push("`")
                    .push(param)
                    .push("` binds `")
                    .push(name)
                    .push("` to ");
                let m = push_term(m, t).push(" of forward ").push(what.0);
                let m = push_dims(m, what.1).push(", but it is already bound to ");
                Err(push_term(m, prev).push("; the two are not always equal"))
            }
            Some(_) => Ok(b),
            None => {
                if b.n_dims == MAX_SYMS {
                    return Err(ctx.msg().push("too many symbols to check"));
                }
                b.dims[b.n_dims] = (name, t);
                b.n_dims += 1;
                Ok(b)
            }
        },
        DimPattern::Const { value } => match t {
            Term::Const(v) if v == value as i64 => Ok(b),
            _ => {
                let m = ctx
                    .msg()
                    .push("`")
                    .push(param)
                    .push("` needs a dimension of ");
                let m = push_i64(m, value as i64)
                    .push(" where forward ")
                    .push(what.0);
                let m = push_dims(m, what.1).push(" has ");
                Err(push_term(m, t).push(", which can be any size"))
            }
        },
        DimPattern::Rest { .. } => Err(ctx.msg().push("internal: rest handled by unify")),
    }
}

/// Matches backward pattern `pat` of `param` against forward dims `f`.
const fn unify(
    ctx: Ctx,
    mut b: Binds,
    param: &'static str,
    pat: &'static [DimPattern],
    what: (&'static str, Dims),
) -> Result<Binds, ConstMsg> {
    let f = what.1;
    let n = f.len();
    let mut rest_at = None;
    let mut forward_rest = false;
    let mut i = 0;
    while i < pat.len() {
        if let DimPattern::Rest { .. } = pat[i] {
            rest_at = Some(i);
        }
        i += 1;
    }
    i = 0;
    while i < n {
        if let Term::Rest(_) = f.term(i) {
            forward_rest = true;
        }
        i += 1;
    }
    let (before, after) = match rest_at {
        Some(r) => (r, pat.len() - 1 - r),
        None => (pat.len(), 0),
    };
    let fits = match rest_at {
        None => !forward_rest && n == pat.len(),
        Some(_) => n >= before + after,
    };
    if !fits {
        let m = ctx.msg().push("`").push(param).push("` has the pattern ");
        let m = push_dims(m, Dims::In(pat)).push(", which cannot take every shape of forward ");
        let m = push_dims(m.push(what.0), f);
        return Err(m.push(" (the ranks differ)"));
    }
    i = 0;
    while i < before {
        let t = f.term(i);
        if let Term::Rest(_) = t {
            let m = ctx.msg().push("`").push(param).push("` has the pattern ");
            let m = push_dims(m, Dims::In(pat)).push(", which cannot take every shape of forward ");
            return Err(push_dims(m.push(what.0), f).push(" (the ranks differ)"));
        }
        b = match match_dim(ctx, b, param, pat[i], t, what) {
            Ok(b) => b,
            Err(e) => return Err(e),
        };
        i += 1;
    }
    if let Some(r) = rest_at {
        let mut j = 0;
        while j < after {
            let t = f.term(n - after + j);
            if let Term::Rest(_) = t {
                let m = ctx.msg().push("`").push(param).push("` has the pattern ");
                let m =
                    push_dims(m, Dims::In(pat)).push(", which cannot take every shape of forward ");
                return Err(push_dims(m.push(what.0), f).push(" (the ranks differ)"));
            }
            b = match match_dim(ctx, b, param, pat[r + 1 + j], t, what) {
                Ok(b) => b,
                Err(e) => return Err(e),
            };
            j += 1;
        }
        let DimPattern::Rest { name } = pat[r] else {
            return Err(ctx.msg().push("internal: rest position"));
        };
        let len = n - after - before;
        match b.rest(name) {
            Some((d, s, l)) => {
                let mut same = l == len;
                let mut k = 0;
                while same && k < len {
                    same = term_eq(d.term(s + k), f.term(before + k));
                    k += 1;
                }
                if !same {
                    let m = ctx
                        .msg()
                        .push("`")
                        .push(param)
                        .push("` binds `..")
                        .push(name);
                    let m = m.push("` to a part of forward ").push(what.0);
                    let m =
                        push_dims(m, f).push(" that is not always equal to its earlier binding");
                    return Err(m);
                }
            }
            None => {
                if b.n_rests == MAX_SYMS {
                    return Err(ctx.msg().push("too many symbols to check"));
                }
                b.rests[b.n_rests] = (name, f, before, len);
                b.n_rests += 1;
            }
        }
    }
    Ok(b)
}

/// A forward tensor's dtype, resolved through `=` rules.
#[derive(Clone, Copy)]
enum Root {
    /// The dtype of this forward tensor parameter, one of its `in {..}` set.
    Param(&'static str, &'static [DType]),
    /// A fixed dtype.
    Fixed(DType),
}

const fn input_root(c: &Contract, param: &'static str) -> Root {
    let mut cur = param;
    let mut steps = 0;
    while steps <= c.dtypes.len() {
        let mut i = 0;
        while i < c.dtypes.len() {
            if str_eq(c.dtypes[i].param, cur) {
                match c.dtypes[i].rule {
                    DtypeRule::OneOf { allowed } => return Root::Param(cur, allowed),
                    DtypeRule::SameAs { param } => cur = param,
                }
                break;
            }
            i += 1;
        }
        steps += 1;
    }
    // The macro rejects `=` cycles and missing rules; an empty set admits nothing.
    Root::Param(cur, &[])
}

const fn source_root(c: &Contract, s: Source) -> Root {
    match s {
        Source::Input(i) => input_root(c, c.inputs[i].param),
        Source::Output(o) => match c.outputs[o].dtype {
            OutputDtype::SameAs { param } => input_root(c, param),
            OutputDtype::Fixed { dtype } => Root::Fixed(dtype),
        },
    }
}

const fn root_eq(a: Root, b: Root) -> bool {
    match (a, b) {
        (Root::Param(x, _), Root::Param(y, _)) => str_eq(x, y),
        (Root::Fixed(x), Root::Fixed(y)) => x as u8 == y as u8,
        (Root::Param(_, set), Root::Fixed(d)) | (Root::Fixed(d), Root::Param(_, set)) => {
            set.len() == 1 && set[0] as u8 == d as u8
        }
    }
}

const fn dtype_in(d: DType, set: &[DType]) -> bool {
    let mut i = 0;
    while i < set.len() {
        if set[i] as u8 == d as u8 {
            return true;
        }
        i += 1;
    }
    false
}

const fn root_within(r: Root, allowed: &[DType]) -> bool {
    match r {
        Root::Fixed(d) => dtype_in(d, allowed),
        Root::Param(_, set) => {
            let mut i = 0;
            while i < set.len() {
                if !dtype_in(set[i], allowed) {
                    return false;
                }
                i += 1;
            }
            true
        }
    }
}

const fn push_root(m: ConstMsg, r: Root) -> ConstMsg {
    match r {
        Root::Param(p, set) => push_dtypes(m.push("the dtype of ").push(p).push(" "), set),
        Root::Fixed(d) => m.push(d.name()),
    }
}

/// Whether `kind` is a scalar declared `Option<_>`.
const fn optional_scalar(kind: ParamKind) -> bool {
    matches!(
        kind,
        ParamKind::Float { optional: true, .. }
            | ParamKind::Int { optional: true, .. }
            | ParamKind::Bool { optional: true, .. }
    )
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
        if !matches!(p.kind, ParamKind::Tensor | ParamKind::OptionalTensor) {
            let mut found = false;
            let mut j = 0;
            while j < fwd.params.len() {
                let q = fwd.params[j];
                if str_eq(q.name, p.name) {
                    found = matches!(
                        (p.kind, q.kind),
                        (ParamKind::Float { .. }, ParamKind::Float { .. })
                            | (ParamKind::Int { .. }, ParamKind::Int { .. })
                            | (ParamKind::Bool { .. }, ParamKind::Bool { .. })
                            | (ParamKind::Str { .. }, ParamKind::Str { .. })
                    );
                    if found && optional_scalar(q.kind) && !optional_scalar(p.kind) {
                        return Err(ctx
                            .msg()
                            .push("scalar parameter `")
                            .push(p.name)
                            .push("` receives the forward's optional `")
                            .push(q.name)
                            .push("`, which may be None: declare it `Option<_>`"));
                    }
                }
                j += 1;
            }
            if !found {
                return Err(ctx
                    .msg()
                    .push("scalar parameter `")
                    .push(p.name)
                    .push("` is not a scalar parameter of the forward of the same kind"));
            }
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
        let Some(input) = strip_prefix(out.name, GRAD_PREFIX) else {
            return Err(ctx
                .msg()
                .push("output `")
                .push(out.name)
                .push("` must be named `grad_<input>` after the forward tensor input it is the gradient of"));
        };
        let Some(fi) = find_input(fc, input) else {
            return Err(ctx
                .msg()
                .push("output `")
                .push(out.name)
                .push("` is the gradient of `")
                .push(input)
                .push("`, which is not a tensor parameter of the forward"));
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
