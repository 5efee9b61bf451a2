//! Checks the `#[kernel(...)]` contract against the function signature: every name refers to
//! a parameter of the right kind, every tensor has a shape pattern and a dtype rule, every
//! symbol used in an output or a `require` is bound by an input, and the output counts agree.
//!
//! All problems found are reported together, each spanned at the offending tokens.

use crate::Errors;
use crate::attr::{DimPat, InputPattern, KernelAttr, OutDim};
use crate::dims::DimExpr;
use crate::dtype::{DTypeName, DtypeRule, InputDtype};
use crate::shape_match::check_out_match;
use crate::signature::{KernelFn, ParamKind, unraw};
use proc_macro2::Ident;

/// The contract after checking, with per-tensor entries in parameter order.
#[derive(Debug)]
pub struct Checked<'a> {
    /// One shape pattern per tensor parameter, in parameter order.
    pub inputs: Vec<&'a InputPattern>,
    /// One dtype rule per tensor parameter, in parameter order.
    pub dtypes: Vec<&'a InputDtype>,
    /// The resolved dtype of each output.
    pub output_dtypes: Vec<OutDtype<'a>>,
    /// The name of each output (given, or `out` / `out0`, `out1`, ...).
    pub output_names: Vec<String>,
}

/// A resolved output dtype.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutDtype<'a> {
    /// The dtype of this tensor parameter.
    SameAs(&'a Ident),
    /// A fixed dtype.
    Fixed(DTypeName),
}

/// Whether a symbol names one dimension or a `..S` sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SymKind {
    Dim,
    Seq,
}

/// The symbols bound by the input patterns, in order of first binding.
pub(crate) struct Symbols<'a> {
    bound: Vec<(String, SymKind, &'a Ident)>,
}

impl<'a> Symbols<'a> {
    fn get(&self, name: &Ident) -> Option<(SymKind, &'a Ident)> {
        let name = name.to_string();
        self.bound
            .iter()
            .find(|(n, _, _)| *n == name)
            .map(|(_, k, i)| (*k, *i))
    }

    /// Whether an input pattern binds `name` (a dimension or a sequence).
    pub(crate) fn is_bound(&self, name: &Ident) -> bool {
        self.get(name).is_some()
    }

    /// `N, D, ..S`, for messages.
    pub(crate) fn list(&self) -> String {
        if self.bound.is_empty() {
            return "nothing".to_string();
        }
        let names: Vec<String> = self
            .bound
            .iter()
            .map(|(n, k, _)| {
                if *k == SymKind::Seq {
                    format!("..{n}")
                } else {
                    n.clone()
                }
            })
            .collect();
        names.join(", ")
    }

    /// Checks a single-dimension use (output expression, `require` or `tolerance`).
    pub(crate) fn use_dim(&self, sym: &Ident, clause: Option<&str>, errors: &mut Errors) {
        match self.get(sym) {
            Some((SymKind::Dim, _)) => {}
            Some((SymKind::Seq, _)) => errors.push(syn::Error::new(
                sym.span(),
                format!(
                    "`{sym}` is a sequence bound by `..{sym}`, not a single dimension; \
                     splice it into an output shape as `..{sym}`"
                ),
            )),
            None => {
                let list = self.list();
                let msg = if let Some(clause) = clause {
                    format!(
                        "`{clause}(...)` uses `{sym}`, which is not bound by any input shape (inputs bind: {list})"
                    )
                } else {
                    format!(
                        "output dimension `{sym}` is not bound by any input shape (inputs bind: {list})"
                    )
                };
                errors.push(syn::Error::new(sym.span(), msg));
            }
        }
    }
}

/// Checks `attr` against `f`; on success the contract can be emitted as is.
pub fn check<'a>(attr: &'a KernelAttr, f: &'a KernelFn) -> syn::Result<Checked<'a>> {
    let mut errors = Errors::default();
    let name = f.name();

    // Shape patterns: one per tensor parameter, none for scalars.
    let mut patterns: Vec<&InputPattern> = Vec::new();
    for p in &attr.shape.inputs {
        if known_tensor(f, &p.param, "shape", &name, &mut errors) {
            if patterns.iter().any(|q| q.param == p.param) {
                errors.push(syn::Error::new(
                    p.param.span(),
                    format!(
                        "`{}` has two shape patterns in `shape(...)`; give one",
                        p.param
                    ),
                ));
            } else {
                patterns.push(p);
            }
        }
    }
    let mut inputs = Vec::new();
    for t in f.tensors() {
        match patterns.iter().find(|p| p.param == t.name) {
            Some(p) => inputs.push(*p),
            None => errors.push(syn::Error::new(
                t.name.span(),
                format!(
                    "tensor parameter `{0}` has no shape pattern; add `{0} = [...]` to `shape(...)`",
                    unraw(&t.name)
                ),
            )),
        }
    }

    // Symbols bound by the inputs, in parameter order.
    let mut symbols = Symbols { bound: Vec::new() };
    for p in &inputs {
        for d in &p.dims {
            let (ident, kind) = match d {
                DimPat::Sym(i) => (i, SymKind::Dim),
                DimPat::Rest(i) => (i, SymKind::Seq),
                DimPat::Const { .. } => continue,
            };
            match symbols.get(ident) {
                None => symbols.bound.push((ident.to_string(), kind, ident)),
                Some((k, _)) if k == kind => {}
                Some((SymKind::Seq, _)) => errors.push(syn::Error::new(
                    ident.span(),
                    format!("`{ident}` is already bound as a sequence `..{ident}`; it cannot also be a single dimension"),
                )),
                Some((SymKind::Dim, _)) => errors.push(syn::Error::new(
                    ident.span(),
                    format!("`{ident}` is already bound as a single dimension; it cannot also be a sequence `..{ident}`"),
                )),
            }
        }
    }

    // Dtype rules: one per tensor parameter, `=` chains must end in an `in {...}` rule.
    let mut rules: Vec<&InputDtype> = Vec::new();
    for r in &attr.dtype.inputs {
        if !known_tensor(f, &r.param, "dtype", &name, &mut errors) {
            continue;
        }
        if rules.iter().any(|q| q.param == r.param) {
            errors.push(syn::Error::new(
                r.param.span(),
                format!(
                    "`{}` has two dtype rules in `dtype(...)`; give one",
                    r.param
                ),
            ));
            continue;
        }
        if let DtypeRule::SameAs(other) = &r.rule {
            if *other == r.param {
                errors.push(syn::Error::new(
                    other.span(),
                    format!(
                        "`{0} = {0}` says nothing; give `{0} in {{...}}` or name another tensor",
                        r.param
                    ),
                ));
                continue;
            }
            if !known_tensor(f, other, "dtype", &name, &mut errors) {
                continue;
            }
        }
        rules.push(r);
    }
    let mut dtypes = Vec::new();
    for t in f.tensors() {
        match rules.iter().find(|r| r.param == t.name) {
            Some(r) => dtypes.push(*r),
            None => errors.push(syn::Error::new(
                t.name.span(),
                format!(
                    "tensor parameter `{0}` has no dtype rule; add `{0} in {{f32, ...}}` or `{0} = other_tensor` to `dtype(...)`",
                    unraw(&t.name)
                ),
            )),
        }
    }
    for r in &rules {
        let mut seen = vec![&r.param];
        let mut cur = *r;
        while let DtypeRule::SameAs(next) = &cur.rule {
            if seen.contains(&next) {
                errors.push(syn::Error::new(
                    r.param.span(),
                    format!(
                        "the dtype rules of `{}` form a cycle of `=`; one tensor in it must list its dtypes with `in {{...}}`",
                        r.param
                    ),
                ));
                break;
            }
            seen.push(next);
            match rules.iter().find(|q| q.param == *next) {
                Some(q) => cur = q,
                None => break, // reported above as a missing rule
            }
        }
    }

    // Outputs: counts agree, symbols bound, dtypes resolve.
    let shapes = &attr.shape.outputs;
    if shapes.len() != f.outputs && f.outputs > 0 {
        errors.push(syn::Error::new(
            attr.shape.outputs_span,
            format!(
                "`shape(...)` declares {} but `{name}` returns {}; give one shape per returned tensor",
                count(shapes.len(), "output"),
                count(f.outputs, "tensor")
            ),
        ));
    }
    if attr.dtype.outputs.len() != f.outputs && f.outputs > 0 {
        errors.push(syn::Error::new(
            attr.dtype.outputs_span,
            format!(
                "`dtype(...)` declares {} but `{name}` returns {}; give one dtype per returned tensor",
                count(attr.dtype.outputs.len(), "output"),
                count(f.outputs, "tensor")
            ),
        ));
    }
    // Symbols some required tensor binds: an output cannot depend on a tensor that may be
    // left out.
    let required: Vec<String> = inputs
        .iter()
        .filter(|p| {
            f.param(&p.param)
                .is_some_and(|q| q.kind == ParamKind::Tensor)
        })
        .flat_map(|p| p.dims.iter())
        .filter_map(|d| match d {
            DimPat::Sym(i) | DimPat::Rest(i) => Some(i.to_string()),
            DimPat::Const { .. } => None,
        })
        .collect();
    let only_optional = |s: &Ident, errors: &mut Errors| {
        if symbols.get(s).is_some() && !required.contains(&s.to_string()) {
            errors.push(syn::Error::new(
                s.span(),
                format!(
                    "output dimension `{s}` is bound only by optional tensors, which may be left out; \
                     bind it with a required tensor"
                ),
            ));
        }
    };
    for shape in shapes {
        let arm_dims: Vec<&OutDim> = match &shape.by_choice {
            None => shape.dims.iter().collect(),
            Some(m) => {
                check_out_match(f, m, &mut errors);
                m.arms.iter().flat_map(|a| a.dims.iter()).collect()
            }
        };
        for d in arm_dims {
            match d {
                OutDim::Expr(e) => {
                    for s in expr_symbols(e) {
                        symbols.use_dim(s, None, &mut errors);
                        only_optional(s, &mut errors);
                    }
                }
                OutDim::Rest(s) => match symbols.get(s) {
                    Some((SymKind::Seq, _)) => only_optional(s, &mut errors),
                    Some((SymKind::Dim, _)) => errors.push(syn::Error::new(
                        s.span(),
                        format!("`..{s}` needs a sequence symbol, but `{s}` is a single dimension; write `{s}`"),
                    )),
                    None => errors.push(syn::Error::new(
                        s.span(),
                        format!("output sequence `..{s}` is not bound by any input shape (inputs bind: {})", symbols.list()),
                    )),
                },
            }
        }
    }
    let mut output_dtypes = Vec::new();
    for o in &attr.dtype.outputs {
        match f.param(o).map(|p| p.kind) {
            Some(ParamKind::Tensor) => output_dtypes.push(OutDtype::SameAs(o)),
            Some(ParamKind::OptionalTensor) => errors.push(syn::Error::new(
                o.span(),
                format!("output dtype `{o}` names an optional tensor, which may be left out; name a required tensor or a dtype"),
            )),
            Some(ParamKind::Scalar { .. }) => errors.push(syn::Error::new(
                o.span(),
                format!("output dtype `{o}` names a scalar parameter; name a tensor parameter or a dtype"),
            )),
            None => match DTypeName::from_name(&o.to_string()) {
                Some(d) => output_dtypes.push(OutDtype::Fixed(d)),
                None => errors.push(syn::Error::new(
                    o.span(),
                    format!(
                        "output dtype `{o}` is neither a tensor parameter ({}) nor a dtype ({})",
                        tensor_list(f),
                        crate::dtype::all_names()
                    ),
                )),
            },
        }
    }

    for r in &attr.requires {
        for s in expr_symbols(&r.lhs).into_iter().chain(expr_symbols(&r.rhs)) {
            symbols.use_dim(s, Some("require"), &mut errors);
        }
    }

    let output_names = crate::op_check::check_op_clauses(attr, f, &symbols, &mut errors);
    crate::shard::check(&attr.shard, f, &symbols, &output_names, &mut errors);
    errors.finish()?;
    Ok(Checked {
        inputs,
        dtypes,
        output_dtypes,
        output_names,
    })
}

/// Whether `ident` is a tensor parameter; reports unknown names and scalars otherwise.
fn known_tensor(
    f: &KernelFn,
    ident: &Ident,
    clause: &str,
    fn_name: &str,
    errors: &mut Errors,
) -> bool {
    match f.param(ident).map(|p| p.kind) {
        Some(ParamKind::Tensor | ParamKind::OptionalTensor) => true,
        Some(ParamKind::Scalar { ty, .. }) => {
            errors.push(syn::Error::new(
                ident.span(),
                format!(
                    "`{ident}` is a scalar parameter (`{}`); only `&Hbm` tensor parameters appear in `{clause}(...)`",
                    ty.rust_name()
                ),
            ));
            false
        }
        None => {
            errors.push(syn::Error::new(
                ident.span(),
                format!(
                    "`{clause}(...)` names `{ident}`, but `{fn_name}` has no parameter `{ident}` (parameters: {})",
                    f.param_list()
                ),
            ));
            false
        }
    }
}

fn expr_symbols(e: &DimExpr) -> Vec<&Ident> {
    let mut out = Vec::new();
    e.symbols(&mut out);
    out
}

fn tensor_list(f: &KernelFn) -> String {
    let names: Vec<String> = f.tensors().map(|p| unraw(&p.name)).collect();
    if names.is_empty() {
        "none".to_string()
    } else {
        names.join(", ")
    }
}

fn count(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signature::analyze;

    fn run(attr: &str, item: &str) -> Result<usize, String> {
        let attr: KernelAttr = syn::parse_str(attr).map_err(|e| e.to_string())?;
        let f = analyze(syn::parse_str(item).unwrap()).map_err(|e| e.to_string())?;
        check(&attr, &f).map(|c| c.inputs.len()).map_err(|e| {
            let all: Vec<String> = e.into_iter().map(|e| e.to_string()).collect();
            all.join("\n")
        })
    }

    const RMS: &str =
        "/// D.\nfn rmsnorm(x: &Hbm, weight: &Hbm, #[default(1e-6)] eps: f32) -> Hbm { todo!() }";

    #[test]
    fn accepts_valid_contracts_and_orders_by_parameter() {
        let attr: KernelAttr = syn::parse_str(
            "shape(weight = [D], x = [N, D]) -> [N, D], dtype(weight = x, x in {f32}) -> x",
        )
        .unwrap();
        let f = analyze(syn::parse_str(RMS).unwrap()).unwrap();
        let c = check(&attr, &f).unwrap();
        assert_eq!(c.inputs[0].param, "x");
        assert_eq!(c.dtypes[0].param, "x");
        assert!(matches!(c.output_dtypes[0], OutDtype::SameAs(x) if x == "x"));
        let ok = run(
            "shape(x = [..S, D], y = [..S, 4]) -> ([..S, 2 * D], [..S]), dtype(x in {f32}, y = x) -> (x, f32), require(D % 4 == 0)",
            "/// D.\nfn two(x: &Hbm, y: &Hbm) -> (Hbm, Hbm) { todo!() }",
        );
        assert_eq!(ok, Ok(2));
    }

    #[test]
    fn reports_contract_errors_in_words() {
        for (attr, item, msg) in [
            (
                "shape(x = [N, D], weight = [D]) -> [N, M], dtype(x in {f32}, weight = x) -> x",
                RMS,
                "output dimension `M` is not bound by any input shape (inputs bind: N, D)",
            ),
            (
                "shape(x = [N, D], w = [D]) -> [N, D], dtype(x in {f32}, weight = x) -> x",
                RMS,
                "`shape(...)` names `w`, but `rmsnorm` has no parameter `w` (parameters: x, weight, eps)",
            ),
            (
                "shape(x = [N, D]) -> [N, D], dtype(x in {f32}, weight = x) -> x",
                RMS,
                "tensor parameter `weight` has no shape pattern; add `weight = [...]` to `shape(...)`",
            ),
            (
                "shape(x = [N, D], weight = [D], eps = []) -> [N, D], dtype(x in {f32}, weight = x) -> x",
                RMS,
                "`eps` is a scalar parameter (`f32`); only `&Hbm` tensor parameters appear in `shape(...)`",
            ),
            (
                "shape(x = [N, D], weight = [D]) -> [N, D], dtype(x in {f32}) -> x",
                RMS,
                "tensor parameter `weight` has no dtype rule",
            ),
            (
                "shape(x = [N, D], weight = [D]) -> ([N, D], [N]), dtype(x in {f32}, weight = x) -> x",
                RMS,
                "`shape(...)` declares 2 outputs but `rmsnorm` returns 1 tensor",
            ),
            (
                "shape(x = [N, D], weight = [D]) -> [N, D], dtype(x in {f32}, weight = x) -> (x, x)",
                RMS,
                "`dtype(...)` declares 2 outputs but `rmsnorm` returns 1 tensor",
            ),
            (
                "shape(x = [N, D], weight = [D]) -> [N, D], dtype(x in {f32}, weight = x) -> x, require(K <= 4)",
                RMS,
                "`require(...)` uses `K`, which is not bound by any input shape (inputs bind: N, D)",
            ),
            (
                "shape(x = [N, D], weight = [D]) -> [N, D], dtype(x in {f32}, weight = x) -> y",
                RMS,
                "output dtype `y` is neither a tensor parameter (x, weight) nor a dtype (f32, bf16, f16, tf32, f8e4m3, f8e4m3fn, f8e5m2, f8e8m0, i8, i16, i32, u8, u16, u32, bool, f8e5m2x4, f8e4m3fnx4, f4e2m1fnx4)",
            ),
            (
                "shape(x = [N, D], weight = [D]) -> [N, D], dtype(x in {f32}, weight = x) -> eps",
                RMS,
                "names a scalar parameter",
            ),
            (
                "shape(x = [N, D], weight = [D]) -> [N, D], dtype(x = weight, weight = x) -> x",
                RMS,
                "form a cycle",
            ),
            (
                "shape(x = [N, D], weight = [D]) -> [N, D], dtype(x in {f32}, weight = z) -> x",
                RMS,
                "`dtype(...)` names `z`",
            ),
            (
                "shape(x = [..S], weight = [S]) -> [..S], dtype(x in {f32}, weight = x) -> x",
                RMS,
                "already bound as a sequence",
            ),
            (
                "shape(x = [..S], weight = [D]) -> [S], dtype(x in {f32}, weight = x) -> x",
                RMS,
                "`S` is a sequence bound by `..S`",
            ),
            (
                "shape(x = [N, D], weight = [D]) -> [..N], dtype(x in {f32}, weight = x) -> x",
                RMS,
                "`N` is a single dimension",
            ),
            (
                "shape(x = [N, D], weight = [D]) -> [..R], dtype(x in {f32}, weight = x) -> x",
                RMS,
                "output sequence `..R` is not bound by any input shape (inputs bind: N, D)",
            ),
        ] {
            let e = run(attr, item).unwrap_err();
            assert!(e.contains(msg), "{attr}\n  got: {e}");
        }
    }
}
