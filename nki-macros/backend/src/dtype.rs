//! The `dtype(...) -> ...` clause: per-tensor dtype rules (`x in {f32, bf16}`, `w = x`), the
//! output dtypes, and the dtype names a contract may use.

use proc_macro2::{Ident, Span};
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{Token, braced, parenthesized, token};

/// `dtype(x in {f32, bf16}, w = x) -> x`.
#[derive(Debug)]
pub struct DtypeClause {
    /// One rule per tensor parameter, as written.
    pub inputs: Vec<InputDtype>,
    /// The output dtypes: each a tensor parameter or a dtype name, resolved later.
    pub outputs: Vec<Ident>,
    /// Span of the whole output part (after `->`).
    pub outputs_span: Span,
}

/// The dtype rule of one tensor parameter.
#[derive(Debug)]
pub struct InputDtype {
    /// The tensor parameter.
    pub param: Ident,
    /// Its rule.
    pub rule: DtypeRule,
}

/// `in {f32, bf16}` or `= other`.
#[derive(Debug)]
pub enum DtypeRule {
    /// The dtype must be one of these.
    OneOf(Vec<DTypeName>),
    /// The dtype must equal that of another tensor parameter.
    SameAs(Ident),
}

/// An element type as written in a contract: the shared vocabulary's [`nki_contract::DType`].
pub use nki_contract::DType as DTypeName;

/// `f32, bf16, f16, tf32, f8e4m3, f8e4m3fn, f8e5m2, f8e8m0, i8, i16, i32, u8, u16, u32, bool`, for messages.
pub fn all_names() -> String {
    let names: Vec<&str> = DTypeName::ALL.iter().map(|d| d.name()).collect();
    names.join(", ")
}

fn parse_ident(ident: &Ident) -> syn::Result<DTypeName> {
    DTypeName::from_name(&ident.to_string()).ok_or_else(|| {
        syn::Error::new(
            ident.span(),
            format!("unknown dtype `{ident}`; expected one of {}", all_names()),
        )
    })
}

/// Parses a dtype name such as `bf16`, with an error listing the known names.
pub(crate) fn parse_dtype_name(ident: &Ident) -> syn::Result<DTypeName> {
    parse_ident(ident)
}

/// Parses the clause after its keyword: `content` is inside the parentheses, `input` continues
/// with `-> outputs`.
pub(crate) fn parse_dtype(
    key: &Ident,
    content: ParseStream<'_>,
    input: ParseStream<'_>,
) -> syn::Result<DtypeClause> {
    let inputs: Vec<InputDtype> = Punctuated::<InputDtype, Token![,]>::parse_terminated(content)?
        .into_iter()
        .collect();
    crate::attr::parse_arrow(key, input, "dtype(x in {f32, bf16}) -> x")?;
    let (outputs, outputs_span) = if input.peek(token::Paren) {
        let inner;
        let paren = parenthesized!(inner in input);
        let names = Punctuated::<Ident, Token![,]>::parse_terminated(&inner)?;
        if names.is_empty() {
            return Err(syn::Error::new(
                paren.span.join(),
                "expected at least one output dtype",
            ));
        }
        (names.into_iter().collect(), paren.span.join())
    } else if input.peek(syn::Ident) {
        let ident: Ident = input.parse()?;
        let span = ident.span();
        (vec![ident], span)
    } else {
        return Err(input.error(
            "expected the output dtype: a tensor parameter such as `x` or a dtype such as `f32`, or a tuple `(x, f32)`",
        ));
    };
    Ok(DtypeClause {
        inputs,
        outputs,
        outputs_span,
    })
}

impl Parse for InputDtype {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let param: Ident = input.parse()?;
        let rule = if input.peek(Token![in]) {
            input.parse::<Token![in]>()?;
            if !input.peek(token::Brace) {
                return Err(input.error(format!(
                    "expected a set of dtypes, e.g. `{param} in {{f32, bf16}}`"
                )));
            }
            let content;
            let brace = braced!(content in input);
            let names = Punctuated::<Ident, Token![,]>::parse_terminated(&content)?;
            if names.is_empty() {
                return Err(syn::Error::new(
                    brace.span.join(),
                    format!(
                        "`{param} in {{}}` allows no dtype; list at least one of {}",
                        all_names()
                    ),
                ));
            }
            DtypeRule::OneOf(names.iter().map(parse_ident).collect::<syn::Result<_>>()?)
        } else if input.peek(Token![=]) {
            input.parse::<Token![=]>()?;
            DtypeRule::SameAs(input.parse()?)
        } else {
            return Err(input.error(format!(
                "expected `{param} in {{f32, bf16, ...}}` or `{param} = other_tensor` in `dtype(...)`"
            )));
        };
        Ok(InputDtype { param, rule })
    }
}
