//! The clauses that declare everything else the project knows about an op, beside its contract:
//!
//! ```text
//! backward(rmsnorm_backward, saves(x, weight, rstd)),   // the backward kernel and what it keeps
//! reference("F.rms_norm(x, (x.shape[-1],), weight, eps)"), // the ATen expression tests compare with
//! sample(x = [130, 96], weight = [96]),                 // sample arguments (repeatable)
//! sample(x = [1, 1], weight = [1], eps = 1e-5, dtypes = {f32}),
//! tolerance(reduction(D)),                              // elementwise | reduction(expr) | matmul
//! bench(x = [8192, 4096], weight = [4096]),            // the representative large shape to grade
//! ```
//!
//! Names are checked against the function in [`crate::check`].

use crate::dims::DimExpr;
use crate::dtype::DTypeName;
use crate::scalar::ScalarValue;
use proc_macro2::{Ident, Span};
use syn::parse::ParseStream;
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Expr, Lit, LitInt, LitStr, Path, Token, UnOp, braced, bracketed, parenthesized, token};

/// `backward(path::to::kernel, saves(a, b))`.
#[derive(Debug)]
pub struct BackwardClause {
    /// The backward kernel function (its `<NAME>_KERNEL` static sits beside it).
    pub kernel: Path,
    /// What the forward keeps for it: tensor parameters and outputs, by name.
    pub saves: Vec<Ident>,
}

/// One `sample(...)`.
#[derive(Debug)]
pub struct SampleClause {
    /// `(parameter, value)` in the order written.
    pub args: Vec<(Ident, SampleValue)>,
    /// `dtypes = {f32, bf16}`, if given.
    pub dtypes: Option<Vec<DTypeName>>,
    /// The clause's key (`sample` or `bench`), for errors about what is missing.
    pub key: String,
    /// Where the key was written.
    pub span: Span,
}

/// A value in a `sample(...)`.
#[derive(Debug)]
pub enum SampleValue {
    /// `[2, 150, 1000]`: a tensor shape.
    Shape(Vec<u64>),
    /// `None`: an optional tensor left out.
    Absent(Span),
    /// A scalar literal.
    Scalar(ScalarValue, Span),
    /// A string literal, for a `&str` parameter.
    Str(String, Span),
}

/// `autocast(...)`: the op's policy under `torch.autocast`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AutocastClause {
    /// `keep`.
    Keep,
    /// `lower`.
    Lower,
    /// `fp32`.
    Fp32,
    /// `promote`.
    Promote,
}

impl AutocastClause {
    /// The `nki_core::op_info::AutocastPolicy` variant name.
    pub fn variant(self) -> &'static str {
        match self {
            AutocastClause::Keep => "Keep",
            AutocastClause::Lower => "Lower",
            AutocastClause::Fp32 => "Fp32",
            AutocastClause::Promote => "Promote",
        }
    }
}

/// Parses the inside of `autocast(...)`.
pub(crate) fn parse_autocast(content: ParseStream<'_>) -> syn::Result<AutocastClause> {
    let expected = "expected an autocast policy: `lower` (matmul-like: inputs to the autocast dtype), \
                    `fp32`, `promote` (mixed inputs to the widest dtype) or `keep`";
    let policy: Ident = content
        .parse()
        .map_err(|e| syn::Error::new(e.span(), expected))?;
    let clause = match policy.to_string().as_str() {
        "keep" => AutocastClause::Keep,
        "lower" => AutocastClause::Lower,
        "fp32" => AutocastClause::Fp32,
        "promote" => AutocastClause::Promote,
        _ => return Err(syn::Error::new(policy.span(), expected)),
    };
    if !content.is_empty() {
        return Err(content.error("`autocast(...)` takes one policy"));
    }
    Ok(clause)
}

/// `tolerance(...)`.
#[derive(Debug)]
pub enum ToleranceClause {
    /// `elementwise`.
    Elementwise,
    /// `reduction(D)`.
    Reduction(DimExpr),
    /// `matmul`.
    Matmul,
}

/// Parses the inside of `backward(...)`.
pub(crate) fn parse_backward(content: ParseStream<'_>) -> syn::Result<BackwardClause> {
    let kernel: Path = content.parse().map_err(|e| {
        syn::Error::new(
            e.span(),
            "expected the backward kernel function, e.g. `backward(rmsnorm_backward, saves(x, weight))`",
        )
    })?;
    let mut saves = Vec::new();
    while content.peek(Token![,]) {
        content.parse::<Token![,]>()?;
        if content.is_empty() {
            break;
        }
        let key: Ident = content.parse()?;
        if key != "saves" || !content.peek(token::Paren) {
            return Err(syn::Error::new(
                key.span(),
                "expected `saves(...)`: the forward inputs and outputs the backward kernel takes",
            ));
        }
        let inner;
        parenthesized!(inner in content);
        saves.extend(Punctuated::<Ident, Token![,]>::parse_terminated(&inner)?);
    }
    if !content.is_empty() {
        return Err(content.error("expected `, saves(...)` or the end of `backward(...)`"));
    }
    Ok(BackwardClause { kernel, saves })
}

/// Parses the inside of `reference(...)`.
pub(crate) fn parse_reference(key: &Ident, content: ParseStream<'_>) -> syn::Result<LitStr> {
    let lit: LitStr = content.parse().map_err(|e| {
        syn::Error::new(
            e.span(),
            format!(
                "`{key}(...)` takes a string: a Python expression over the parameter names, \
                 e.g. `reference(\"x + y\")`"
            ),
        )
    })?;
    if lit.value().trim().is_empty() {
        return Err(syn::Error::new(
            lit.span(),
            "the reference expression is empty",
        ));
    }
    if !content.is_empty() {
        return Err(content.error("`reference(...)` takes one string"));
    }
    Ok(lit)
}

/// Parses the inside of `sample(...)`.
pub(crate) fn parse_sample(key: &Ident, content: ParseStream<'_>) -> syn::Result<SampleClause> {
    let mut args = Vec::new();
    let mut dtypes = None;
    while !content.is_empty() {
        let name: Ident = content.parse()?;
        if !content.peek(Token![=]) {
            return Err(content.error(format!(
                "expected `{name} = ...`: a shape `[2, 64]`, `None` or a scalar value"
            )));
        }
        content.parse::<Token![=]>()?;
        if name == "dtypes" {
            let inner;
            let brace = braced!(inner in content);
            let names = Punctuated::<Ident, Token![,]>::parse_terminated(&inner)?;
            if names.is_empty() {
                return Err(syn::Error::new(
                    brace.span.join(),
                    "`dtypes = {}` lists no dtype",
                ));
            }
            dtypes = Some(
                names
                    .iter()
                    .map(crate::dtype::parse_dtype_name)
                    .collect::<syn::Result<_>>()?,
            );
        } else if content.peek(token::Bracket) {
            let inner;
            bracketed!(inner in content);
            let dims = Punctuated::<LitInt, Token![,]>::parse_terminated(&inner)?
                .iter()
                .map(LitInt::base10_parse::<u64>)
                .collect::<syn::Result<Vec<_>>>()?;
            args.push((name, SampleValue::Shape(dims)));
        } else if content.peek(syn::Ident) && content.fork().parse::<Ident>()? == "None" {
            let none: Ident = content.parse()?;
            args.push((name, SampleValue::Absent(none.span())));
        } else if content.peek(LitStr) {
            let s: LitStr = content.parse()?;
            args.push((name, SampleValue::Str(s.value(), s.span())));
        } else {
            let e: Expr = content.parse()?;
            let v = scalar_literal(&e)?;
            args.push((name, SampleValue::Scalar(v, e.span())));
        }
        if content.is_empty() {
            break;
        }
        content.parse::<Token![,]>()?;
    }
    if args.is_empty() {
        return Err(syn::Error::new(
            key.span(),
            "`sample(...)` needs the shape of every tensor parameter, e.g. `sample(x = [130, 96])`",
        ));
    }
    Ok(SampleClause {
        args,
        dtypes,
        key: key.to_string(),
        span: key.span(),
    })
}

fn scalar_literal(e: &Expr) -> syn::Result<ScalarValue> {
    let bad = || {
        syn::Error::new_spanned(
            e,
            "a sample value is a shape `[2, 64]`, `None`, or a literal number, bool or string",
        )
    };
    match e {
        Expr::Lit(l) => match &l.lit {
            Lit::Int(i) => Ok(ScalarValue::Int(i.base10_parse()?)),
            Lit::Float(f) => Ok(ScalarValue::Float(f.base10_parse()?)),
            Lit::Bool(b) => Ok(ScalarValue::Bool(b.value)),
            _ => Err(bad()),
        },
        Expr::Unary(u) if matches!(u.op, UnOp::Neg(_)) => match scalar_literal(&u.expr)? {
            ScalarValue::Int(i) => Ok(ScalarValue::Int(-i)),
            ScalarValue::Float(x) => Ok(ScalarValue::Float(-x)),
            ScalarValue::Bool(_) | ScalarValue::Choice(_) => Err(bad()),
        },
        _ => Err(bad()),
    }
}

/// Parses the inside of `tolerance(...)`.
pub(crate) fn parse_tolerance(content: ParseStream<'_>) -> syn::Result<ToleranceClause> {
    let expected = "expected a tolerance class: `elementwise`, `reduction(D)` (the reduced length) or `matmul`";
    let class: Ident = content
        .parse()
        .map_err(|e| syn::Error::new(e.span(), expected))?;
    let clause = match class.to_string().as_str() {
        "elementwise" => ToleranceClause::Elementwise,
        "matmul" => ToleranceClause::Matmul,
        "reduction" => {
            if !content.peek(token::Paren) {
                return Err(syn::Error::new(
                    class.span(),
                    "`reduction` names the reduced length: `reduction(D)`",
                ));
            }
            let inner;
            parenthesized!(inner in content);
            let e: Expr = inner.parse()?;
            ToleranceClause::Reduction(DimExpr::from_expr(&e)?)
        }
        _ => return Err(syn::Error::new(class.span(), expected)),
    };
    if !content.is_empty() {
        return Err(content.error("`tolerance(...)` takes one class"));
    }
    Ok(clause)
}

#[cfg(test)]
mod tests {
    use crate::attr::KernelAttr;

    fn parse(src: &str) -> syn::Result<KernelAttr> {
        syn::parse_str(src)
    }

    const BASE: &str = "shape(x = [N, D]) -> [N, D], dtype(x in {f32}) -> x";

    #[test]
    fn parses_backward_reference_samples_and_tolerance() {
        let a = parse(&format!(
            r#"{BASE}, backward(grads::f_backward, saves(x, y)), reference("x * 2"),
               sample(x = [3, 4]), sample(x = [1, 1], eps = -1e-5, k = 3, b = true, w = None, dtypes = {{f32, bf16}}),
               tolerance(reduction(D + 1))"#
        ))
        .unwrap();
        let b = a.backward.unwrap();
        let path = quote::ToTokens::to_token_stream(&b.kernel).to_string();
        assert_eq!(path.replace(' ', ""), "grads::f_backward");
        assert_eq!(b.saves.len(), 2);
        assert_eq!(a.reference.unwrap().value(), "x * 2");
        assert_eq!(a.samples.len(), 2);
        assert_eq!(a.samples[1].args.len(), 5);
        assert_eq!(a.samples[1].dtypes.as_ref().map(Vec::len), Some(2));
        assert!(matches!(
            a.tolerance,
            Some(super::ToleranceClause::Reduction(_))
        ));
    }

    #[test]
    fn reports_clause_errors_in_words() {
        for (extra, msg) in [
            ("backward(f, keeps(x))", "expected `saves(...)`"),
            ("reference(3)", "takes a string"),
            ("reference(\"  \")", "is empty"),
            ("sample()", "needs the shape of every tensor parameter"),
            ("sample(x)", "expected `x = ...`"),
            ("sample(x = 'a')", "a sample value is a shape"),
            ("sample(x = [2], dtypes = {f33})", "unknown dtype `f33`"),
            ("tolerance(loose)", "expected a tolerance class"),
            ("tolerance(reduction)", "names the reduced length"),
            ("autocast(fast)", "expected an autocast policy"),
        ] {
            let e = parse(&format!("{BASE}, {extra}")).unwrap_err().to_string();
            assert!(e.contains(msg), "{extra}\n  got: {e}");
        }
    }
}
