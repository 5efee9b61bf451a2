//! Analysis of the kernel function itself: its doc comment, its parameters (tensors `&Hbm` and
//! scalars with optional `#[default(...)]` values) and how many tensors it returns.
//!
//! [`analyze`] also removes the `#[default(...)]` helper attributes, which are not real Rust
//! attributes, so the function can be emitted unchanged otherwise.

use crate::Errors;
use crate::scalar::{ScalarType, ScalarValue, parse_default};
use proc_macro2::{Ident, Span};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Attribute, Expr, FnArg, ItemFn, Lit, LitStr, Pat, ReturnType, Token, Type};

/// The analysed kernel function.
#[derive(Debug)]
pub struct KernelFn {
    /// The function, with `#[default]` attributes removed.
    pub item: ItemFn,
    /// The doc comment, one leading space trimmed from each line.
    pub doc: String,
    /// Parameters in declaration order.
    pub params: Vec<Param>,
    /// How many tensors the function returns (1 to 3).
    pub outputs: usize,
    /// Span of the return type, for output-count errors.
    pub return_span: Span,
}

impl KernelFn {
    /// The op name: the function name without any `r#`.
    pub fn name(&self) -> String {
        unraw(&self.item.sig.ident)
    }

    /// Looks up a parameter by name.
    pub fn param(&self, name: &Ident) -> Option<&Param> {
        self.params.iter().find(|p| p.name == *name)
    }

    /// The tensor parameters (optional ones included), in order.
    pub fn tensors(&self) -> impl Iterator<Item = &Param> {
        self.params.iter().filter(|p| p.kind.is_tensor())
    }

    /// `x, weight, eps`, for messages.
    pub fn param_list(&self) -> String {
        let names: Vec<String> = self.params.iter().map(|p| unraw(&p.name)).collect();
        if names.is_empty() {
            "none".to_string()
        } else {
            names.join(", ")
        }
    }
}

impl ParamKind {
    /// Whether the parameter is a tensor (optional or not).
    pub fn is_tensor(self) -> bool {
        matches!(self, ParamKind::Tensor | ParamKind::OptionalTensor)
    }
}

/// One kernel parameter.
#[derive(Debug)]
pub struct Param {
    /// Its name.
    pub name: Ident,
    /// Tensor or scalar.
    pub kind: ParamKind,
    /// The accepted values of a `&str` parameter (`#[choices(..)]`); empty otherwise.
    pub choices: Vec<String>,
}

/// What a parameter takes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ParamKind {
    /// `&Hbm`.
    Tensor,
    /// `Option<&Hbm>`: schema `Tensor?`.
    OptionalTensor,
    /// A scalar of a supported primitive type.
    Scalar {
        /// Its declared type.
        ty: ScalarType,
        /// Its `#[default(...)]` value.
        default: Option<ScalarValue>,
        /// Declared `Option<T>`: schema `T?`, default `None`.
        optional: bool,
    },
}

impl ParamKind {
    /// Whether a call may leave the parameter out (a default, or `None` for optional ones).
    pub fn has_default(self) -> bool {
        match self {
            ParamKind::Tensor => false,
            ParamKind::OptionalTensor => true,
            ParamKind::Scalar {
                default, optional, ..
            } => optional || default.is_some(),
        }
    }
}

const SUPPORTED: &str = "`&Hbm` (a tensor), `Option<&Hbm>` (an optional tensor) or a scalar: f32, f64, i32, i64, u32, u64, usize, isize, bool (or `Option<T>` of one)";

/// The identifier without a leading `r#`.
pub fn unraw(ident: &Ident) -> String {
    let s = ident.to_string();
    s.strip_prefix("r#").map(str::to_string).unwrap_or(s)
}

/// Removes every `#[default(...)]` and `#[choices(...)]` attribute from the parameters of
/// `item` and returns them per parameter position.
pub fn strip_defaults(item: &mut ItemFn) -> Vec<Vec<Attribute>> {
    item.sig
        .inputs
        .iter_mut()
        .map(|arg| match arg {
            FnArg::Typed(pt) => {
                let (defaults, keep) = std::mem::take(&mut pt.attrs)
                    .into_iter()
                    .partition(|a| a.path().is_ident("default") || a.path().is_ident("choices"));
                pt.attrs = keep;
                defaults
            }
            FnArg::Receiver(_) => Vec::new(),
        })
        .collect()
}

/// Checks the function and extracts what the expansion needs. Errors for all parameters are
/// reported together.
pub fn analyze(mut item: ItemFn) -> syn::Result<KernelFn> {
    let mut errors = Errors::default();
    let defaults = strip_defaults(&mut item);
    let sig = &item.sig;
    if !sig.generics.params.is_empty() {
        errors.push(syn::Error::new_spanned(
            &sig.generics,
            "kernel functions cannot be generic: the registry calls them with concrete `&Hbm` and scalar arguments",
        ));
    } else if let Some(w) = &sig.generics.where_clause {
        errors.push(syn::Error::new_spanned(
            w,
            "kernel functions cannot have a `where` clause",
        ));
    }
    if let Some(a) = &sig.asyncness {
        errors.push(syn::Error::new(
            a.span,
            "kernel functions cannot be `async`",
        ));
    }
    if let syn::Safety::Unsafe(u) = &sig.safety {
        errors.push(syn::Error::new(
            u.span,
            "kernel functions cannot be `unsafe`: the registry calls them from safe code",
        ));
    }
    if let Some(v) = &sig.variadic {
        errors.push(syn::Error::new_spanned(
            v,
            "kernel functions cannot be variadic",
        ));
    }
    let doc = doc_comment(&item.attrs);
    if doc.trim().is_empty() {
        errors.push(syn::Error::new(
            sig.ident.span(),
            format!(
                "kernel `{}` needs a doc comment (`/// what it computes`) above the function; \
                 it becomes the op's documentation",
                unraw(&sig.ident)
            ),
        ));
    }
    let mut params = Vec::new();
    for (arg, defaults) in sig.inputs.iter().zip(defaults) {
        match analyze_param(arg, &defaults) {
            Ok(p) => params.push(p),
            Err(e) => errors.push(e),
        }
    }
    let (outputs, return_span) = match return_count(&sig.output, &sig.ident) {
        Ok(v) => v,
        Err(e) => {
            errors.push(e);
            (0, Span::call_site())
        }
    };
    errors.finish()?;
    Ok(KernelFn {
        item,
        doc,
        params,
        outputs,
        return_span,
    })
}

/// Joins the `///` lines, trimming one leading space from each and surrounding blank lines.
fn doc_comment(attrs: &[Attribute]) -> String {
    let mut lines = Vec::new();
    for attr in attrs {
        if !attr.path().is_ident("doc") {
            continue;
        }
        let syn::Meta::NameValue(nv) = &attr.meta else {
            continue;
        };
        let Expr::Lit(l) = &nv.value else { continue };
        let Lit::Str(s) = &l.lit else { continue };
        for line in s.value().split('\n') {
            let line = line.strip_suffix('\r').unwrap_or(line);
            lines.push(
                line.strip_prefix(' ')
                    .unwrap_or(line)
                    .trim_end()
                    .to_string(),
            );
        }
    }
    while lines.first().is_some_and(|l| l.trim().is_empty()) {
        lines.remove(0);
    }
    while lines.last().is_some_and(|l| l.trim().is_empty()) {
        lines.pop();
    }
    lines.join("\n")
}

fn analyze_param(arg: &FnArg, attrs: &[Attribute]) -> syn::Result<Param> {
    let (choices_attrs, defaults): (Vec<&Attribute>, Vec<&Attribute>) =
        attrs.iter().partition(|a| a.path().is_ident("choices"));
    let defaults: Vec<Attribute> = defaults.into_iter().cloned().collect();
    let pt = match arg {
        FnArg::Typed(pt) => pt,
        FnArg::Receiver(r) => {
            return Err(syn::Error::new_spanned(
                r,
                "kernels are free functions; they cannot take `self`",
            ));
        }
    };
    let name = match &*pt.pat {
        Pat::Ident(pi) if pi.subpat.is_none() && pi.by_ref.is_none() => pi.ident.clone(),
        other => {
            return Err(syn::Error::new_spanned(
                other,
                "kernel parameters must be plain names such as `x`; they become the op's argument names",
            ));
        }
    };
    if let Some(extra) = defaults.get(1) {
        return Err(syn::Error::new_spanned(
            extra,
            format!("parameter `{name}` has more than one `#[default(...)]`"),
        ));
    }
    if is_str_ref(&pt.ty) {
        return analyze_str_param(name, &pt.ty, &choices_attrs, defaults.first());
    }
    if let Some(c) = choices_attrs.first() {
        return Err(syn::Error::new_spanned(
            c,
            format!("`#[choices(...)]` is for `&str` parameters; `{name}` is not one"),
        ));
    }
    if let Some(inner) = optional_inner(&pt.ty) {
        if let Some(ty) = classify(inner, &name)? {
            if let Some(d) = defaults.first() {
                return Err(syn::Error::new_spanned(
                    d,
                    format!(
                        "optional scalar `{name}` cannot have a default; its default is `None`"
                    ),
                ));
            }
            return Ok(Param {
                name,
                kind: ParamKind::Scalar {
                    ty,
                    default: None,
                    optional: true,
                },
                choices: Vec::new(),
            });
        }
        if let Some(d) = defaults.first() {
            return Err(syn::Error::new_spanned(
                d,
                format!("optional tensor `{name}` cannot have a default; `None` leaves it out"),
            ));
        }
        return Ok(Param {
            name,
            kind: ParamKind::OptionalTensor,
            choices: Vec::new(),
        });
    }
    match classify(&pt.ty, &name)? {
        None => {
            if let Some(d) = defaults.first() {
                return Err(syn::Error::new_spanned(
                    d,
                    format!(
                        "tensor parameter `{name}` cannot have a default; only scalar parameters can"
                    ),
                ));
            }
            Ok(Param {
                name,
                kind: ParamKind::Tensor,
                choices: Vec::new(),
            })
        }
        Some(ty) => {
            let default = defaults
                .first()
                .map(|d| parse_default(d, &name, ty))
                .transpose()?;
            Ok(Param {
                name,
                kind: ParamKind::Scalar {
                    ty,
                    default,
                    optional: false,
                },
                choices: Vec::new(),
            })
        }
    }
}

/// Whether `ty` is `&str`.
fn is_str_ref(ty: &Type) -> bool {
    match ty {
        Type::Group(g) => is_str_ref(&g.elem),
        Type::Paren(p) => is_str_ref(&p.elem),
        Type::Reference(r) => {
            matches!(&*r.elem, Type::Path(p) if p.qself.is_none() && p.path.is_ident("str"))
        }
        _ => false,
    }
}

/// A `&str` parameter: its `#[choices("a", "b", ..)]` (required, distinct, non-empty) and an
/// optional `#[default("a")]` among them.
fn analyze_str_param(
    name: Ident,
    ty: &Type,
    choices_attrs: &[&Attribute],
    default: Option<&Attribute>,
) -> syn::Result<Param> {
    let Some(attr) = choices_attrs.first() else {
        return Err(syn::Error::new_spanned(
            ty,
            format!(
                "`{name}: &str` needs the values it accepts: `#[choices(\"a\", \"b\")] {name}: &str`"
            ),
        ));
    };
    if let Some(extra) = choices_attrs.get(1) {
        return Err(syn::Error::new_spanned(
            extra,
            format!("parameter `{name}` has more than one `#[choices(...)]`"),
        ));
    }
    let lits = attr.parse_args_with(Punctuated::<LitStr, Token![,]>::parse_terminated)?;
    if lits.is_empty() {
        return Err(syn::Error::new_spanned(
            attr,
            format!("`#[choices(...)]` of `{name}` lists no values"),
        ));
    }
    let mut choices: Vec<String> = Vec::new();
    for lit in &lits {
        if choices.contains(&lit.value()) {
            return Err(syn::Error::new_spanned(
                lit,
                format!(
                    "`{}` is listed twice in the choices of `{name}`",
                    lit.value()
                ),
            ));
        }
        choices.push(lit.value());
    }
    let default = match default {
        None => None,
        Some(d) => {
            let lit: LitStr = d.parse_args().map_err(|_| {
                syn::Error::new_spanned(
                    d,
                    format!("the default of `{name}: &str` must be a string literal, e.g. `#[default(\"{}\")]`", choices[0]),
                )
            })?;
            let Some(i) = choices.iter().position(|c| *c == lit.value()) else {
                return Err(syn::Error::new_spanned(
                    &lit,
                    format!(
                        "default `{}` of `{name}` is not one of its choices ({})",
                        lit.value(),
                        quoted_list(&choices)
                    ),
                ));
            };
            Some(ScalarValue::Choice(i))
        }
    };
    Ok(Param {
        name,
        kind: ParamKind::Scalar {
            ty: ScalarType::Str,
            default,
            optional: false,
        },
        choices,
    })
}

/// `"a", "b"`.
pub fn quoted_list(choices: &[String]) -> String {
    choices
        .iter()
        .map(|c| format!("{c:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `T` of an `Option<T>` type.
fn optional_inner(ty: &Type) -> Option<&Type> {
    let Type::Path(p) = strip(ty) else {
        return None;
    };
    let last = p.path.segments.last()?;
    if last.ident != "Option" {
        return None;
    }
    let syn::PathArguments::AngleBracketed(args) = &last.arguments else {
        return None;
    };
    match args.args.first()? {
        syn::GenericArgument::Type(t) if args.args.len() == 1 => Some(t),
        _ => None,
    }
}

/// `None` for a tensor (`&Hbm`), the scalar type otherwise.
fn classify(ty: &Type, name: &Ident) -> syn::Result<Option<ScalarType>> {
    match ty {
        Type::Group(g) => classify(&g.elem, name),
        Type::Paren(p) => classify(&p.elem, name),
        Type::Reference(r) if is_hbm(&r.elem) => {
            if let Some(m) = &r.mutability {
                return Err(syn::Error::new(
                    m.span,
                    format!(
                        "tensor parameter `{name}` must be a shared reference: write `&Hbm`, not `&mut Hbm`"
                    ),
                ));
            }
            Ok(None)
        }
        t if is_hbm(t) => Err(syn::Error::new_spanned(
            t,
            format!("tensor parameter `{name}` must be taken by reference: write `{name}: &Hbm`"),
        )),
        Type::Path(p) if p.qself.is_none() => {
            let found = p.path.get_ident().and_then(|i| {
                let s = i.to_string();
                ScalarType::ALL.into_iter().find(|t| t.rust_name() == s)
            });
            found.map(Some).ok_or_else(|| unsupported(ty, name))
        }
        _ => Err(unsupported(ty, name)),
    }
}

fn unsupported(ty: &Type, name: &Ident) -> syn::Error {
    syn::Error::new_spanned(
        ty,
        format!("unsupported type for kernel parameter `{name}`; expected {SUPPORTED}"),
    )
}

/// Whether `ty` is `Hbm` (any path ending in `Hbm`, e.g. `nki_core::lang::Hbm`).
fn is_hbm(ty: &Type) -> bool {
    match ty {
        Type::Group(g) => is_hbm(&g.elem),
        Type::Paren(p) => is_hbm(&p.elem),
        Type::Path(p) => {
            p.qself.is_none()
                && p.path
                    .segments
                    .last()
                    .is_some_and(|s| s.ident == "Hbm" && s.arguments.is_none())
        }
        _ => false,
    }
}

/// The number of returned tensors and the span of the return type.
fn return_count(output: &ReturnType, name: &Ident) -> syn::Result<(usize, Span)> {
    let expected = "`-> Hbm` or a tuple of two to four `Hbm` (`-> (Hbm, Hbm)`, ...)";
    let ty = match output {
        ReturnType::Default => {
            return Err(syn::Error::new(
                name.span(),
                format!(
                    "kernel `{}` must return its output tensors: {expected}",
                    unraw(name)
                ),
            ));
        }
        ReturnType::Type(_, ty) => ty,
    };
    let span = ty.span();
    let count = match strip(ty) {
        t if is_hbm(t) => 1,
        Type::Tuple(t) if (2..=4).contains(&t.elems.len()) && t.elems.iter().all(is_hbm) => {
            t.elems.len()
        }
        _ => {
            return Err(syn::Error::new_spanned(
                ty,
                format!("a kernel returns {expected}"),
            ));
        }
    };
    Ok((count, span))
}

fn strip(ty: &Type) -> &Type {
    match ty {
        Type::Group(g) => strip(&g.elem),
        Type::Paren(p) => strip(&p.elem),
        t => t,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn analyze_src(src: &str) -> syn::Result<KernelFn> {
        analyze(syn::parse_str(src)?)
    }

    fn err(src: &str) -> String {
        analyze_src(src).unwrap_err().to_string()
    }

    #[test]
    fn analyzes_parameters_defaults_and_docs() {
        let f = analyze_src(
            "/// RMSNorm.\n///\n/// Second line.\npub fn rmsnorm(x: &Hbm, w: &nki_core::lang::Hbm, #[default(1e-6)] eps: f32, \
             #[default(-2)] k: i32, #[default(true)] flag: bool, #[default(3)] scale: f64, n: usize) -> Hbm { todo!() }",
        )
        .unwrap();
        assert_eq!(f.name(), "rmsnorm");
        assert_eq!(f.doc, "RMSNorm.\n\nSecond line.");
        assert_eq!(f.outputs, 1);
        let kinds: Vec<ParamKind> = f.params.iter().map(|p| p.kind).collect();
        assert_eq!(
            kinds,
            [
                ParamKind::Tensor,
                ParamKind::Tensor,
                ParamKind::Scalar {
                    ty: ScalarType::F32,
                    default: Some(ScalarValue::Float(1e-6)),
                    optional: false,
                },
                ParamKind::Scalar {
                    ty: ScalarType::I32,
                    default: Some(ScalarValue::Int(-2)),
                    optional: false,
                },
                ParamKind::Scalar {
                    ty: ScalarType::Bool,
                    default: Some(ScalarValue::Bool(true)),
                    optional: false,
                },
                ParamKind::Scalar {
                    ty: ScalarType::F64,
                    default: Some(ScalarValue::Float(3.0)),
                    optional: false,
                },
                ParamKind::Scalar {
                    ty: ScalarType::Usize,
                    default: None,
                    optional: false,
                },
            ]
        );
        let leftover = f
            .item
            .sig
            .inputs
            .iter()
            .any(|a| matches!(a, FnArg::Typed(p) if !p.attrs.is_empty()));
        assert!(!leftover, "#[default] attributes are stripped");
        assert_eq!(f.param_list(), "x, w, eps, k, flag, scale, n");
    }

    #[test]
    fn counts_tuple_outputs() {
        let f = analyze_src("/// Two.\nfn two(x: &Hbm) -> (Hbm, Hbm) { todo!() }").unwrap();
        assert_eq!(f.outputs, 2);
        let f =
            analyze_src("/// Three.\nfn three(x: &Hbm) -> (Hbm, Hbm, Hbm) { todo!() }").unwrap();
        assert_eq!(f.outputs, 3);
    }

    #[test]
    fn reports_signature_errors_in_words() {
        for (src, msg) in [
            (
                "fn f(x: &Hbm) -> Hbm { todo!() }",
                "kernel `f` needs a doc comment",
            ),
            (
                "/// D.\nfn f(x: &Hbm, #[default(0.5)] k: i64) -> Hbm { todo!() }",
                "default `0.5` does not match the type of `k: i64`; expected an integer",
            ),
            (
                "/// D.\nfn f(x: &Hbm, #[default(1)] b: bool) -> Hbm { todo!() }",
                "expected `true` or `false`",
            ),
            (
                "/// D.\nfn f(x: &Hbm, #[default(-1)] k: u32) -> Hbm { todo!() }",
                "default `-1` is out of range for `k: u32`",
            ),
            (
                "/// D.\nfn f(#[default(1)] x: &Hbm) -> Hbm { todo!() }",
                "tensor parameter `x` cannot have a default",
            ),
            (
                "/// D.\nfn f(x: Vec<f32>) -> Hbm { todo!() }",
                "unsupported type for kernel parameter `x`",
            ),
            (
                "/// D.\nfn f(x: Hbm) -> Hbm { todo!() }",
                "must be taken by reference",
            ),
            (
                "/// D.\nfn f(x: &mut Hbm) -> Hbm { todo!() }",
                "not `&mut Hbm`",
            ),
            (
                "/// D.\nfn f(x: &Hbm) { }",
                "must return its output tensors",
            ),
            (
                "/// D.\nfn f(x: &Hbm) -> Vec<Hbm> { todo!() }",
                "a kernel returns `-> Hbm`",
            ),
            (
                "/// D.\nfn f<T>(x: &Hbm) -> Hbm { todo!() }",
                "cannot be generic",
            ),
            (
                "/// D.\nunsafe fn f(x: &Hbm) -> Hbm { todo!() }",
                "cannot be `unsafe`",
            ),
            (
                "/// D.\nfn f((a, b): (f32, f32)) -> Hbm { todo!() }",
                "plain names",
            ),
            (
                "/// D.\nfn f(x: &Hbm, #[default(eps())] e: f32) -> Hbm { todo!() }",
                "must be a literal",
            ),
        ] {
            let e = err(src);
            assert!(e.contains(msg), "{src}\n  got: {e}");
        }
    }

    #[test]
    fn reports_every_bad_parameter_at_once() {
        let e = analyze_src("fn f(x: String, y: char) -> Hbm { todo!() }").unwrap_err();
        assert_eq!(e.into_iter().count(), 3);
    }
}
