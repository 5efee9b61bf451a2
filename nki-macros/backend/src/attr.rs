//! The grammar of the `#[kernel(...)]` attribute arguments, parsed into a syntax tree that
//! keeps every identifier's span.
//!
//! ```text
//! shape(x = [N, D], weight = [D]) -> [N, D],       // required; `-> ([..], [..])` for several outputs
//! dtype(x in {f32, bf16}, weight = x) -> x,        // required; `-> (x, f32)` for several outputs
//! require(D <= 16384, N % 128 == 0),               // optional, may repeat
//! replaces("torch.nn.RMSNorm", "*.LlamaRMSNorm"),  // optional
//! ```
//!
//! This module (with [`crate::dtype`] for the dtype clause) only checks syntax and dtype names;
//! whether the names refer to real parameters
//! and whether symbols are bound is checked in [`crate::check`].

use crate::dims::DimExpr;
use crate::dtype::{DtypeClause, parse_dtype};
use crate::op_info::{
    AutocastClause, BackwardClause, SampleClause, ToleranceClause, parse_autocast, parse_backward,
    parse_reference, parse_sample, parse_tolerance,
};
use proc_macro2::{Ident, Span};
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{BinOp, Expr, LitInt, LitStr, Token, bracketed, parenthesized, token};

/// The parsed arguments of `#[kernel(...)]`.
#[derive(Debug)]
pub struct KernelAttr {
    /// The `shape(...) -> ...` clause.
    pub shape: ShapeClause,
    /// The `dtype(...) -> ...` clause.
    pub dtype: DtypeClause,
    /// Every `require(...)` condition, in order.
    pub requires: Vec<Requirement>,
    /// Every `replaces(...)` string, in order.
    pub replaces: Vec<LitStr>,
    /// The `backward(...)` clause.
    pub backward: Option<BackwardClause>,
    /// The `reference("...")` expression.
    pub reference: Option<LitStr>,
    /// Every `sample(...)`, in order.
    pub samples: Vec<SampleClause>,
    /// The `tolerance(...)` class.
    pub tolerance: Option<ToleranceClause>,
    /// The span of the `backward` key, where backward compatibility errors point.
    pub backward_span: Option<Span>,
    /// The `autocast(...)` policy.
    pub autocast: Option<AutocastClause>,
    /// The `bench(...)` arguments: the representative large shape the op is graded at.
    pub bench: Option<SampleClause>,
    /// The `shard(...)` declarations (empty without the clause).
    pub shard: Vec<crate::shard::ShardItem>,
}

/// `shape(x = [N, D], ...) -> [N, D]`.
#[derive(Debug)]
pub struct ShapeClause {
    /// One pattern per tensor parameter, as written.
    pub inputs: Vec<InputPattern>,
    /// The output shapes.
    pub outputs: Vec<OutShape>,
    /// Span of the whole output part (after `->`).
    pub outputs_span: Span,
}

/// `x = [N, D]`.
#[derive(Debug)]
pub struct InputPattern {
    /// The tensor parameter.
    pub param: Ident,
    /// The dimensions, outermost first.
    pub dims: Vec<DimPat>,
}

/// One dimension of an input pattern.
#[derive(Clone, Debug)]
pub enum DimPat {
    /// A symbol that binds (or must equal) this dimension.
    Sym(Ident),
    /// A literal size.
    Const {
        /// The required size.
        value: u64,
        /// Where it was written.
        span: Span,
    },
    /// `..S`: zero or more dimensions bound as a sequence.
    Rest(Ident),
}

/// One output shape, `[N, 2 * D, ..S]`, optionally named (`y = [N, D]`) and marked `saved`
/// (`saved rstd = [N]`: computed for the backward kernel, not returned by the torch op).
#[derive(Debug)]
pub struct OutShape {
    /// The output's name, if given.
    pub name: Option<Ident>,
    /// The `saved` marker, if given.
    pub saved: Option<Ident>,
    /// The dimensions, outermost first; for a `match` shape, the default arm's (`_`, or the
    /// last arm when the arms name every choice).
    pub dims: Vec<OutDim>,
    /// `match reduction { "none" => [N], _ => [] }`: a shape chosen by a string parameter.
    pub by_choice: Option<OutMatch>,
}

/// An output shape chosen by a string parameter's value.
#[derive(Debug)]
pub struct OutMatch {
    /// The `match` keyword (errors about the whole match point here).
    pub keyword: Token![match],
    /// The string parameter.
    pub param: Ident,
    /// Every arm, in order (the default arm included, last).
    pub arms: Vec<OutArm>,
}

/// One arm of an [`OutMatch`]: `"a" | "b" => [N]`, or `_ => []`.
#[derive(Debug)]
pub struct OutArm {
    /// The values it matches; empty for `_`.
    pub values: Vec<LitStr>,
    /// The `_` of a wildcard arm.
    pub wildcard: Option<Token![_]>,
    /// Its shape.
    pub dims: Vec<OutDim>,
}

/// One dimension of an output shape.
#[derive(Clone, Debug)]
pub enum OutDim {
    /// A single dimension computed from symbols.
    Expr(DimExpr),
    /// `..S`: the whole sequence bound by an input.
    Rest(Ident),
}

/// A comparison operator of `require(...)` (the shared vocabulary's).
pub use nki_contract::CmpOp;

/// One `require(...)` condition, `lhs op rhs`.
#[derive(Debug)]
pub struct Requirement {
    /// Left side.
    pub lhs: DimExpr,
    /// The comparison.
    pub op: CmpOp,
    /// Right side.
    pub rhs: DimExpr,
}

impl Requirement {
    /// The condition as the contract renders it, e.g. `D <= 16384`.
    pub fn text(&self) -> String {
        nki_contract::Requirement {
            lhs: self.lhs.to_contract(),
            op: self.op,
            rhs: self.rhs.to_contract(),
        }
        .to_string()
    }
}

const KEYS: &str = "`shape`, `dtype`, `require`, `replaces`, `backward`, `reference`, `sample`, `tolerance`, `autocast`, `bench` or `shard`";
const KEY_NAMES: [&str; 11] = [
    "shape",
    "dtype",
    "require",
    "replaces",
    "backward",
    "reference",
    "sample",
    "tolerance",
    "autocast",
    "bench",
    "shard",
];

impl Parse for KernelAttr {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let mut shape = None;
        let mut dtype = None;
        let mut requires = Vec::new();
        let mut replaces = Vec::new();
        let mut backward = None;
        let mut backward_span = None;
        let mut reference = None;
        let mut samples = Vec::new();
        let mut tolerance = None;
        let mut autocast = None;
        let mut bench = None;
        let mut shard = None;
        while !input.is_empty() {
            let key: Ident = input.parse().map_err(|e| {
                syn::Error::new(
                    e.span(),
                    format!("expected a `#[kernel(...)]` clause: {KEYS}"),
                )
            })?;
            let content;
            let name = key.to_string();
            if !KEY_NAMES.contains(&name.as_str()) {
                return Err(syn::Error::new(
                    key.span(),
                    format!("unknown key `{key}` in `#[kernel(...)]`; expected {KEYS}"),
                ));
            }
            if !input.peek(token::Paren) {
                return Err(syn::Error::new(
                    key.span(),
                    format!("expected `{key}(...)`"),
                ));
            }
            parenthesized!(content in input);
            match name.as_str() {
                "shape" => {
                    if shape.is_some() {
                        return Err(duplicate(&key));
                    }
                    shape = Some(parse_shape(&key, &content, input)?);
                }
                "dtype" => {
                    if dtype.is_some() {
                        return Err(duplicate(&key));
                    }
                    dtype = Some(parse_dtype(&key, &content, input)?);
                }
                "require" => {
                    for e in Punctuated::<Expr, Token![,]>::parse_terminated(&content)? {
                        requires.push(parse_requirement(&e)?);
                    }
                }
                "backward" => {
                    if backward.is_some() {
                        return Err(duplicate(&key));
                    }
                    backward = Some(parse_backward(&content)?);
                    backward_span = Some(key.span());
                }
                "reference" => {
                    if reference.is_some() {
                        return Err(duplicate(&key));
                    }
                    reference = Some(parse_reference(&key, &content)?);
                }
                "sample" => samples.push(parse_sample(&key, &content)?),
                "bench" => {
                    if bench.is_some() {
                        return Err(duplicate(&key));
                    }
                    bench = Some(parse_sample(&key, &content)?);
                }
                "shard" => {
                    if shard.is_some() {
                        return Err(duplicate(&key));
                    }
                    shard = Some(crate::shard::parse_shard(&content)?);
                }
                "autocast" => {
                    if autocast.is_some() {
                        return Err(duplicate(&key));
                    }
                    autocast = Some(parse_autocast(&content)?);
                }
                "tolerance" => {
                    if tolerance.is_some() {
                        return Err(duplicate(&key));
                    }
                    tolerance = Some(parse_tolerance(&content)?);
                }
                _ => replaces.extend(Punctuated::<LitStr, Token![,]>::parse_terminated(&content)?),
            }
            if input.is_empty() {
                break;
            }
            input.parse::<Token![,]>()?;
        }
        let shape = shape.ok_or_else(|| {
            syn::Error::new(
                Span::call_site(),
                "`#[kernel(...)]` needs a `shape(...)` clause giving every tensor parameter's shape \
                 and the output shape, e.g. `shape(x = [N, D]) -> [N, D]`",
            )
        })?;
        let dtype = dtype.ok_or_else(|| {
            syn::Error::new(
                Span::call_site(),
                "`#[kernel(...)]` needs a `dtype(...)` clause giving every tensor parameter's dtype \
                 rule and the output dtype, e.g. `dtype(x in {f32, bf16}) -> x`",
            )
        })?;
        Ok(KernelAttr {
            shape,
            dtype,
            requires,
            replaces,
            backward,
            reference,
            samples,
            tolerance,
            backward_span,
            autocast,
            bench,
            shard: shard.unwrap_or_default(),
        })
    }
}

fn duplicate(key: &Ident) -> syn::Error {
    syn::Error::new(
        key.span(),
        format!("`{key}(...)` appears twice; give all of it in one `{key}(...)` clause"),
    )
}

/// Parses the `->` after a clause, with a message naming the clause if it is missing.
pub(crate) fn parse_arrow(key: &Ident, input: ParseStream<'_>, example: &str) -> syn::Result<()> {
    if input.peek(Token![->]) {
        input.parse::<Token![->]>()?;
        Ok(())
    } else {
        Err(syn::Error::new(
            key.span(),
            format!("`{key}(...)` must be followed by `->` and the output(s), e.g. `{example}`"),
        ))
    }
}

fn parse_shape(
    key: &Ident,
    content: ParseStream<'_>,
    input: ParseStream<'_>,
) -> syn::Result<ShapeClause> {
    let inputs: Vec<InputPattern> =
        Punctuated::<InputPattern, Token![,]>::parse_terminated(content)?
            .into_iter()
            .collect();
    parse_arrow(key, input, "shape(x = [N, D]) -> [N, D]")?;
    let (outputs, outputs_span) = if input.peek(token::Paren) {
        let inner;
        let paren = parenthesized!(inner in input);
        let shapes = Punctuated::<OutShape, Token![,]>::parse_terminated(&inner)?;
        if shapes.is_empty() {
            return Err(syn::Error::new(
                paren.span.join(),
                "expected at least one output shape",
            ));
        }
        (shapes.into_iter().collect(), paren.span.join())
    } else if input.peek(token::Bracket) || input.peek(syn::Ident) || input.peek(Token![match]) {
        let span = input.span();
        let out: OutShape = input.parse()?;
        (vec![out], span)
    } else {
        return Err(input.error(
            "expected the output shape, e.g. `[N, D]`, or a tuple of shapes `([N, D], [N])`",
        ));
    };
    Ok(ShapeClause {
        inputs,
        outputs,
        outputs_span,
    })
}

impl Parse for InputPattern {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let param: Ident = input.parse()?;
        if !input.peek(Token![=]) {
            return Err(input.error(format!(
                "expected `{param} = [...]`: a tensor parameter and its shape pattern"
            )));
        }
        input.parse::<Token![=]>()?;
        if !input.peek(token::Bracket) {
            return Err(input.error(format!(
                "expected the shape pattern of `{param}` in brackets, e.g. `[N, D]`"
            )));
        }
        let content;
        bracketed!(content in input);
        let mut dims = Vec::new();
        let mut rest_seen = false;
        while !content.is_empty() {
            let dim = if content.peek(Token![..]) {
                content.parse::<Token![..]>()?;
                let name: Ident = content.parse()?;
                if rest_seen {
                    return Err(syn::Error::new(
                        name.span(),
                        format!(
                            "the shape pattern of `{param}` has a second sequence `..{name}`; at most one is allowed"
                        ),
                    ));
                }
                rest_seen = true;
                DimPat::Rest(name)
            } else if content.peek(LitInt) {
                let lit: LitInt = content.parse()?;
                DimPat::Const {
                    value: lit.base10_parse()?,
                    span: lit.span(),
                }
            } else if content.peek(syn::Ident) {
                DimPat::Sym(content.parse()?)
            } else {
                return Err(content.error(
                    "expected a dimension: a symbol such as `N`, a size such as `128`, or `..S` for any number of dimensions",
                ));
            };
            dims.push(dim);
            if content.is_empty() {
                break;
            }
            if !content.peek(Token![,]) {
                return Err(content.error(
                    "an input shape pattern lists symbols, sizes and `..S` separated by commas; \
                     compute derived sizes in the output shape or check them with `require(...)`",
                ));
            }
            content.parse::<Token![,]>()?;
        }
        Ok(InputPattern { param, dims })
    }
}

impl Parse for OutShape {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let mut saved = None;
        let mut name = None;
        if input.peek(syn::Ident) && input.peek2(syn::Ident) {
            let marker: Ident = input.parse()?;
            if marker != "saved" {
                return Err(syn::Error::new(
                    marker.span(),
                    format!("expected `saved` or an output name before `=`, found `{marker}`"),
                ));
            }
            saved = Some(marker);
        }
        if input.peek(syn::Ident) {
            let ident: Ident = input.parse()?;
            if !input.peek(Token![=]) {
                return Err(syn::Error::new(
                    ident.span(),
                    format!(
                        "expected the output shape, e.g. `[N, D]`, a named output `{ident} = [...]`, \
                         or a tuple of shapes `([N, D], [N])`"
                    ),
                ));
            }
            input.parse::<Token![=]>()?;
            name = Some(ident);
        } else if let Some(marker) = &saved {
            return Err(syn::Error::new(
                marker.span(),
                "a `saved` output needs a name, e.g. `saved rstd = [N]`",
            ));
        }
        if input.peek(Token![match]) {
            let m = parse_out_match(input)?;
            // Arms are non-empty: the parser requires at least one.
            let dims = m.arms.last().map(|a| a.dims.clone()).unwrap_or_default();
            return Ok(OutShape {
                name,
                saved,
                dims,
                by_choice: Some(m),
            });
        }
        let dims = parse_out_dims(input)?;
        Ok(OutShape {
            name,
            saved,
            dims,
            by_choice: None,
        })
    }
}

/// `[N, 2 * D, ..S]`.
fn parse_out_dims(input: ParseStream<'_>) -> syn::Result<Vec<OutDim>> {
    if !input.peek(token::Bracket) {
        return Err(input.error("expected an output shape in brackets, e.g. `[N, D]`"));
    }
    let content;
    bracketed!(content in input);
    let mut dims = Vec::new();
    while !content.is_empty() {
        if content.peek(Token![..]) {
            content.parse::<Token![..]>()?;
            dims.push(OutDim::Rest(content.parse()?));
        } else {
            let e: Expr = content.parse()?;
            dims.push(OutDim::Expr(DimExpr::from_expr(&e)?));
        }
        if content.is_empty() {
            break;
        }
        content.parse::<Token![,]>()?;
    }
    Ok(dims)
}

/// `match reduction { "none" => [N], "sum" | "mean" => [] }` (a `_` arm may end it).
fn parse_out_match(input: ParseStream<'_>) -> syn::Result<OutMatch> {
    let keyword: Token![match] = input.parse()?;
    let param: Ident = input.parse()?;
    let body;
    syn::braced!(body in input);
    let mut arms = Vec::new();
    while !body.is_empty() {
        let mut values = Vec::new();
        let mut wildcard = None;
        if body.peek(Token![_]) {
            wildcard = Some(body.parse::<Token![_]>()?);
        } else {
            loop {
                if !body.peek(LitStr) {
                    return Err(body.error(
                        "expected a string value of the parameter, e.g. `\"none\" => [N]`, or `_`",
                    ));
                }
                values.push(body.parse::<LitStr>()?);
                if !body.peek(Token![|]) {
                    break;
                }
                body.parse::<Token![|]>()?;
            }
        }
        body.parse::<Token![=>]>()?;
        let dims = parse_out_dims(&body)?;
        arms.push(OutArm {
            values,
            wildcard,
            dims,
        });
        if body.is_empty() {
            break;
        }
        body.parse::<Token![,]>()?;
    }
    if arms.is_empty() {
        return Err(syn::Error::new(
            keyword.span,
            "a `match` output shape needs at least one arm, e.g. `\"none\" => [N], _ => []`",
        ));
    }
    Ok(OutMatch {
        keyword,
        param,
        arms,
    })
}

fn parse_requirement(e: &Expr) -> syn::Result<Requirement> {
    let not_cmp = || {
        syn::Error::new(
            e.span(),
            "expected a comparison between dimension expressions, such as `D <= 16384` \
             (operators: == != < <= > >=)",
        )
    };
    let Expr::Binary(b) = e else {
        return Err(not_cmp());
    };
    let op = match b.op {
        BinOp::Eq(_) => CmpOp::Eq,
        BinOp::Ne(_) => CmpOp::Ne,
        BinOp::Lt(_) => CmpOp::Lt,
        BinOp::Le(_) => CmpOp::Le,
        BinOp::Gt(_) => CmpOp::Gt,
        BinOp::Ge(_) => CmpOp::Ge,
        _ => return Err(not_cmp()),
    };
    Ok(Requirement {
        lhs: DimExpr::from_expr(&b.left)?,
        op,
        rhs: DimExpr::from_expr(&b.right)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::{DTypeName, DtypeRule};

    fn parse(src: &str) -> syn::Result<KernelAttr> {
        syn::parse_str(src)
    }

    fn err(src: &str) -> String {
        parse(src).unwrap_err().to_string()
    }

    #[test]
    fn parses_the_full_grammar() {
        let a = parse(
            r#"shape(x = [N, D], weight = [D]) -> [N, D],
               dtype(x in {f32, bf16, f16}, weight = x) -> x,
               require(D <= 16384),
               require(N % 128 == 0, 2 * D > N - 1),
               require(N < 4096, D >= 1, N != D, (D + 1) / 2 <= 8192),
               replaces("torch.nn.RMSNorm", "*.LlamaRMSNorm"),"#,
        )
        .unwrap();
        assert_eq!(a.shape.inputs.len(), 2);
        assert_eq!(a.shape.inputs[1].param, "weight");
        assert!(
            matches!(&a.shape.inputs[0].dims[..], [DimPat::Sym(n), DimPat::Sym(d)] if n == "N" && d == "D")
        );
        assert_eq!(a.shape.outputs.len(), 1);
        assert!(
            matches!(&a.dtype.inputs[0].rule, DtypeRule::OneOf(v) if v == &[DTypeName::F32, DTypeName::BF16, DTypeName::F16])
        );
        assert!(matches!(&a.dtype.inputs[1].rule, DtypeRule::SameAs(x) if x == "x"));
        assert_eq!(a.dtype.outputs.len(), 1);
        let texts: Vec<String> = a.requires.iter().map(Requirement::text).collect();
        assert_eq!(
            texts,
            [
                "D <= 16384",
                "N % 128 == 0",
                "2 * D > N - 1",
                "N < 4096",
                "D >= 1",
                "N != D",
                "(D + 1) / 2 <= 8192"
            ]
        );
        let replaces: Vec<String> = a.replaces.iter().map(LitStr::value).collect();
        assert_eq!(replaces, ["torch.nn.RMSNorm", "*.LlamaRMSNorm"]);
    }

    #[test]
    fn parses_rest_constants_and_tuples() {
        let a = parse("shape(x = [..S, 128], y = [..S, D]) -> ([..S, D / 2], [..S]), dtype(x in {f8e4m3}, y in {f32}) -> (y, bf16)")
            .unwrap();
        assert!(
            matches!(&a.shape.inputs[0].dims[..], [DimPat::Rest(s), DimPat::Const { value: 128, .. }] if s == "S")
        );
        assert_eq!(a.shape.outputs.len(), 2);
        assert!(
            matches!(&a.shape.outputs[0].dims[..], [OutDim::Rest(_), OutDim::Expr(e)] if e.to_string() == "D / 2")
        );
        let outs: Vec<String> = a.dtype.outputs.iter().map(ToString::to_string).collect();
        assert_eq!(outs, ["y", "bf16"]);
        assert!(a.requires.is_empty() && a.replaces.is_empty());
    }

    #[test]
    fn reports_grammar_errors_in_words() {
        for (src, msg) in [
            (
                "shape(x = [N]) -> [N], dtype(x in {f32}) -> x, speed(3)",
                "unknown key `speed` in `#[kernel(...)]`",
            ),
            (
                "shape(x = [N]) -> [N], dtype(x in {f33}) -> x",
                "unknown dtype `f33`; expected one of f32, bf16, f16, tf32, f8e4m3, f8e4m3fn, f8e5m2, f8e8m0, i8, i16, i32, u8, u16, u32, bool",
            ),
            ("shape(x = [N]) -> [N]", "needs a `dtype(...)` clause"),
            ("dtype(x in {f32}) -> x", "needs a `shape(...)` clause"),
            (
                "shape(x = [N]), dtype(x in {f32}) -> x",
                "`shape(...)` must be followed by `->`",
            ),
            (
                "shape(x = [N]) -> [N], shape(y = [N]) -> [N]",
                "`shape(...)` appears twice",
            ),
            (
                "shape(x = [..A, ..B]) -> [N], dtype(x in {f32}) -> x",
                "second sequence `..B`",
            ),
            (
                "shape(x = [N]) -> [N], dtype(x in {}) -> x",
                "allows no dtype",
            ),
            (
                "shape(x = [N]) -> [N], dtype(x: f32) -> x",
                "expected `x in {f32, bf16, ...}` or `x = other_tensor`",
            ),
            (
                "shape(x = [N]) -> [N], dtype(x in {f32}) -> x, require(N)",
                "expected a comparison",
            ),
            (
                "shape(x = [N]) -> [N << 1], dtype(x in {f32}) -> x",
                "only the operators",
            ),
            (
                "shape(x: [N]) -> [N], dtype(x in {f32}) -> x",
                "expected `x = [...]`",
            ),
            (
                "shape(x = [N]) -> N, dtype(x in {f32}) -> x",
                "expected the output shape",
            ),
            (
                "shape(x = [2 * N]) -> [N], dtype(x in {f32}) -> x",
                "an input shape pattern lists symbols",
            ),
        ] {
            let e = err(src);
            assert!(e.contains(msg), "{src}\n  got: {e}");
        }
    }
}
