//! Checks of the op-level clauses against the function: output names and `saved` outputs,
//! `backward(..., saves(...))`, `reference`, `sample(...)` and `tolerance(...)`. Errors are
//! collected with the contract's (see [`crate::check`]) and reported together.
//!
//! Whether the backward kernel's own contract fits the forward is checked by the compiler:
//! the expansion evaluates `nki_core::autodiff::check_backward` in a `const`.

use crate::Errors;
use crate::attr::KernelAttr;
use crate::check::Symbols;
use crate::op_info::{SampleValue, ToleranceClause};
use crate::scalar::{ScalarClass, ScalarValue};
use crate::signature::{KernelFn, ParamKind, unraw};

/// Checks the op-level clauses; returns every output's name.
pub(crate) fn check_op_clauses(
    attr: &KernelAttr,
    f: &KernelFn,
    symbols: &Symbols<'_>,
    errors: &mut Errors,
) -> Vec<String> {
    let names = output_names(attr, f, errors);
    check_backward(attr, f, &names, errors);
    check_samples(attr, f, errors);
    if let Some(ToleranceClause::Reduction(e)) = &attr.tolerance {
        let mut syms = Vec::new();
        e.symbols(&mut syms);
        for s in syms {
            symbols.use_dim(s, Some("tolerance"), errors);
        }
    }
    names
}

/// The output names: as written, or `out` (one output) / `out0`, `out1`, ... Names must be
/// unique and differ from the parameters.
fn output_names(attr: &KernelAttr, f: &KernelFn, errors: &mut Errors) -> Vec<String> {
    let outs = &attr.shape.outputs;
    let mut names: Vec<String> = Vec::new();
    for (i, o) in outs.iter().enumerate() {
        let name = match &o.name {
            Some(n) => {
                let s = unraw(n);
                if f.params.iter().any(|p| unraw(&p.name) == s) {
                    errors.push(syn::Error::new(
                        n.span(),
                        format!("output `{s}` has the name of a parameter; give it its own name"),
                    ));
                } else if names.contains(&s) {
                    errors.push(syn::Error::new(
                        n.span(),
                        format!("two outputs are named `{s}`"),
                    ));
                }
                s
            }
            None if outs.len() == 1 => "out".to_string(),
            None => format!("out{i}"),
        };
        names.push(name);
    }
    let public = outs.iter().filter(|o| o.saved.is_none()).count();
    if public == 0 && !outs.is_empty() {
        errors.push(syn::Error::new(
            attr.shape.outputs_span,
            "every output is `saved`; the torch op must return at least one",
        ));
    }
    names
}

fn check_backward(attr: &KernelAttr, f: &KernelFn, outputs: &[String], errors: &mut Errors) {
    let saved: Vec<(&proc_macro2::Ident, String)> = attr
        .shape
        .outputs
        .iter()
        .zip(outputs)
        .filter_map(|(o, n)| o.saved.as_ref().map(|m| (m, n.clone())))
        .collect();
    let Some(b) = &attr.backward else {
        for (marker, name) in saved {
            errors.push(syn::Error::new(
                marker.span(),
                format!(
                    "output `{name}` is `saved` for a backward kernel, but there is no \
                     `backward(kernel, saves({name}))` clause"
                ),
            ));
        }
        return;
    };
    if b.kernel.get_ident().is_some_and(|i| *i == f.item.sig.ident) {
        errors.push(syn::Error::new_spanned(
            &b.kernel,
            "a kernel cannot be its own backward",
        ));
    }
    let mut seen: Vec<String> = Vec::new();
    for s in &b.saves {
        let name = unraw(s);
        let is_tensor = f.tensors().any(|p| unraw(&p.name) == name);
        let is_output = outputs.contains(&name);
        if seen.contains(&name) {
            errors.push(syn::Error::new(
                s.span(),
                format!("`saves(...)` lists `{name}` twice"),
            ));
        } else if f
            .params
            .iter()
            .any(|p| unraw(&p.name) == name && !p.kind.is_tensor())
        {
            errors.push(syn::Error::new(
                s.span(),
                format!(
                    "`{name}` is a scalar; scalars reach the backward kernel by name without being saved"
                ),
            ));
        } else if !is_tensor && !is_output {
            errors.push(syn::Error::new(
                s.span(),
                format!(
                    "`saves(...)` names `{name}`, which is neither a tensor parameter ({}) nor an output ({})",
                    f.tensors()
                        .map(|p| unraw(&p.name))
                        .collect::<Vec<_>>()
                        .join(", "),
                    outputs.join(", ")
                ),
            ));
        }
        seen.push(name);
    }
    for (marker, name) in saved {
        if !seen.contains(&name) {
            errors.push(syn::Error::new(
                marker.span(),
                format!(
                    "output `{name}` is `saved`, but `saves(...)` does not list it; add it or drop `saved`"
                ),
            ));
        }
    }
}

fn check_samples(attr: &KernelAttr, f: &KernelFn, errors: &mut Errors) {
    if let Some(r) = &attr.reference
        && attr.samples.is_empty()
    {
        errors.push(syn::Error::new(
            r.span(),
            "`reference(...)` needs at least one `sample(...)` to compare on, e.g. `sample(x = [130, 96])`",
        ));
    }
    if !attr.samples.is_empty() && attr.reference.is_none() {
        errors.push(syn::Error::new(
            attr.samples[0].span,
            "`sample(...)` needs a `reference(\"...\")`: the ATen expression the samples are compared with",
        ));
    }
    if let Some(b) = &attr.bench
        && attr.reference.is_none()
    {
        errors.push(syn::Error::new(
            b.span,
            "`bench(...)` needs a `reference(\"...\")`: the ATen expression it is timed against",
        ));
    }
    for sample in attr.samples.iter().chain(&attr.bench) {
        let mut given: Vec<String> = Vec::new();
        for (name, value) in &sample.args {
            let n = unraw(name);
            if given.contains(&n) {
                errors.push(syn::Error::new(
                    name.span(),
                    format!("`{n}` is given twice in this sample"),
                ));
                continue;
            }
            given.push(n.clone());
            let Some(p) = f.param(name) else {
                errors.push(syn::Error::new(
                    name.span(),
                    format!(
                        "`sample(...)` names `{n}`, but `{}` has no parameter `{n}` (parameters: {})",
                        f.name(),
                        f.param_list()
                    ),
                ));
                continue;
            };
            let ok = match (p.kind, value) {
                (ParamKind::Tensor | ParamKind::OptionalTensor, SampleValue::Shape(_)) => true,
                (ParamKind::OptionalTensor, SampleValue::Absent(_)) => true,
                (ParamKind::Scalar { optional, .. }, SampleValue::Absent(_)) => optional,
                (ParamKind::Scalar { ty, .. }, SampleValue::Scalar(v, _)) => matches!(
                    (ty.class(), v),
                    (
                        ScalarClass::Float,
                        ScalarValue::Float(_) | ScalarValue::Int(_)
                    ) | (ScalarClass::Int, ScalarValue::Int(_))
                        | (ScalarClass::Bool, ScalarValue::Bool(_))
                ),
                (ParamKind::Scalar { ty, .. }, SampleValue::Str(v, _)) => {
                    ty.class() == ScalarClass::Str && p.choices.contains(v)
                }
                _ => false,
            };
            if !ok {
                let want = match p.kind {
                    ParamKind::Tensor => "a shape such as `[2, 64]`".to_string(),
                    ParamKind::OptionalTensor => "a shape such as `[2, 64]` or `None`".to_string(),
                    ParamKind::Scalar { ty, .. } if ty.class() == ScalarClass::Str => {
                        format!("one of {}", crate::signature::quoted_list(&p.choices))
                    }
                    ParamKind::Scalar { ty, optional, .. } => format!(
                        "a `{}` literal{}",
                        ty.class().schema_type(),
                        if optional { " or `None`" } else { "" }
                    ),
                };
                let span = match value {
                    SampleValue::Shape(_) => name.span(),
                    SampleValue::Absent(s) | SampleValue::Scalar(_, s) | SampleValue::Str(_, s) => {
                        *s
                    }
                };
                errors.push(syn::Error::new(
                    span,
                    format!("`{n}` takes {want} in a sample"),
                ));
            }
        }
        for p in &f.params {
            let n = unraw(&p.name);
            let needed = match p.kind {
                ParamKind::Tensor | ParamKind::OptionalTensor => true,
                kind => !kind.has_default(),
            };
            if needed && !given.contains(&n) {
                errors.push(syn::Error::new(
                    sample.span,
                    format!(
                        "this `{}(...)` does not give `{n}`, which has no default",
                        sample.key
                    ),
                ));
            }
        }
    }
}
