//! The `shard(...)` clause: what a kernel declares about splitting its tensors across devices
//! where the contract cannot tell (see `nki_contract::sharding` for the derivation it feeds).
//!
//! ```text
//! shard(whole(D))                                  // the kernel needs every index of D
//! shard(whole(Sk, Dh), whole(S) if causal)         // ... under a bool parameter's value
//! shard(whole(N) if reduction == "mean")           // ... or a string parameter's (`!=`, `"a" | "b"`)
//! shard(together(H, Hkv))                          // related symbols, split together
//! shard(additive(bias))                            // added once to the outputs: a partial sum too
//! shard(reads(grad_bias: grad_out))                // the only inputs an output depends on
//! ```
//!
//! Names are checked here against the function and the contract ([`check`]); [`expand`] emits
//! the `&[nki_core::contract::sharding::ShardDecl]` of the kernel definition.

use crate::Errors;
use crate::check::Symbols;
use crate::scalar::ScalarClass;
use crate::signature::{KernelFn, ParamKind, unraw};
use proc_macro2::{Ident, TokenStream};
use quote::quote;
use syn::parse::ParseStream;
use syn::punctuated::Punctuated;
use syn::{LitStr, Token, parenthesized};

/// A condition on a scalar parameter: `if causal`, `if !causal`, `if reduction == "mean"`.
#[derive(Debug)]
pub enum Condition {
    /// `p` or `!p`.
    Flag {
        /// The parameter.
        param: Ident,
        /// `true` for `p`, `false` for `!p`.
        value: bool,
    },
    /// `p == "a" | "b"` or `p != "a"`.
    Choice {
        /// The parameter.
        param: Ident,
        /// The values.
        values: Vec<LitStr>,
        /// `==` (true) or `!=`.
        equal: bool,
    },
}

/// One item of `shard(...)`.
#[derive(Debug)]
pub enum ShardItem {
    /// `whole(A, B) [if cond]`.
    Whole(Vec<Ident>, Option<Condition>),
    /// `together(A, B)`.
    Together(Ident, Vec<Ident>),
    /// `additive(p)`.
    Additive(Ident),
    /// `reads(output: a, b)`.
    Reads(Ident, Vec<Ident>),
}

const FORMS: &str = "`whole(D)`, `whole(S) if causal`, `together(H, Hkv)`, `additive(bias)` or `reads(output: a, b)`";

/// Parses the inside of `shard(...)`.
pub fn parse_shard(content: ParseStream<'_>) -> syn::Result<Vec<ShardItem>> {
    let mut items = Vec::new();
    while !content.is_empty() {
        let key: Ident = content.parse().map_err(|e| {
            syn::Error::new(e.span(), format!("expected a `shard(...)` item: {FORMS}"))
        })?;
        let inner;
        let form = key.to_string();
        if !["whole", "together", "additive", "reads"].contains(&form.as_str()) {
            return Err(syn::Error::new(
                key.span(),
                format!("unknown `shard(...)` item `{key}`; expected {FORMS}"),
            ));
        }
        parenthesized!(inner in content);
        let item = match form.as_str() {
            "whole" => {
                let symbols = symbols(&key, &inner)?;
                let cond = if content.peek(Token![if]) {
                    content.parse::<Token![if]>()?;
                    Some(parse_condition(content)?)
                } else {
                    None
                };
                ShardItem::Whole(symbols, cond)
            }
            "together" => {
                let mut symbols = symbols(&key, &inner)?;
                if symbols.len() < 2 {
                    return Err(syn::Error::new(
                        key.span(),
                        "`together(...)` names at least two symbols split together, e.g. `together(H, Hkv)`",
                    ));
                }
                let first = symbols.remove(0);
                ShardItem::Together(first, symbols)
            }
            "additive" => ShardItem::Additive(inner.parse()?),
            _ => {
                let output: Ident = inner.parse()?;
                inner.parse::<Token![:]>().map_err(|e| {
                    syn::Error::new(
                        e.span(),
                        format!("expected `reads({output}: a, b)`: the output, a colon and the inputs it reads"),
                    )
                })?;
                let inputs = Punctuated::<Ident, Token![,]>::parse_terminated(&inner)?;
                ShardItem::Reads(output, inputs.into_iter().collect())
            }
        };
        items.push(item);
        if content.is_empty() {
            break;
        }
        content.parse::<Token![,]>()?;
    }
    Ok(items)
}

fn symbols(key: &Ident, inner: ParseStream<'_>) -> syn::Result<Vec<Ident>> {
    let symbols: Vec<Ident> = Punctuated::<Ident, Token![,]>::parse_terminated(inner)?
        .into_iter()
        .collect();
    if symbols.is_empty() {
        return Err(syn::Error::new(
            key.span(),
            format!("`{key}(...)` names the dimension symbols it is about, e.g. `{key}(D)`"),
        ));
    }
    Ok(symbols)
}

fn parse_condition(input: ParseStream<'_>) -> syn::Result<Condition> {
    if input.peek(Token![!]) {
        input.parse::<Token![!]>()?;
        return Ok(Condition::Flag {
            param: input.parse()?,
            value: false,
        });
    }
    let param: Ident = input.parse().map_err(|e| {
        syn::Error::new(
            e.span(),
            "expected a condition on a scalar parameter: `p`, `!p`, `p == \"a\"` or `p != \"a\"`",
        )
    })?;
    let equal = if input.peek(Token![==]) {
        input.parse::<Token![==]>()?;
        true
    } else if input.peek(Token![!=]) {
        input.parse::<Token![!=]>()?;
        false
    } else {
        return Ok(Condition::Flag { param, value: true });
    };
    let mut values = vec![input.parse::<LitStr>()?];
    while input.peek(Token![|]) {
        input.parse::<Token![|]>()?;
        values.push(input.parse()?);
    }
    Ok(Condition::Choice {
        param,
        values,
        equal,
    })
}

/// Checks every name of the clause: symbols bound by an input, tensor parameters, outputs,
/// and conditions on a `bool` or a string parameter with the values among its choices.
pub(crate) fn check(
    items: &[ShardItem],
    f: &KernelFn,
    symbols: &Symbols<'_>,
    outputs: &[String],
    errors: &mut Errors,
) {
    let symbol = |s: &Ident, errors: &mut Errors| {
        if !symbols.is_bound(s) {
            errors.push(syn::Error::new(
                s.span(),
                format!(
                    "`shard(...)` names `{s}`, which is not a dimension symbol of any input shape (inputs bind: {})",
                    symbols.list()
                ),
            ));
        }
    };
    let tensor = |p: &Ident, errors: &mut Errors| {
        if !f.param(p).is_some_and(|q| q.kind.is_tensor()) {
            errors.push(syn::Error::new(
                p.span(),
                format!(
                    "`shard(...)` names `{p}`, which is not a tensor parameter of `{}` (tensors: {})",
                    f.name(),
                    f.tensors().map(|t| unraw(&t.name)).collect::<Vec<_>>().join(", ")
                ),
            ));
        }
    };
    for item in items {
        match item {
            ShardItem::Whole(syms, cond) => {
                for s in syms {
                    symbol(s, errors);
                }
                if let Some(c) = cond {
                    check_condition(c, f, errors);
                }
            }
            ShardItem::Together(first, rest) => {
                for s in std::iter::once(first).chain(rest) {
                    symbol(s, errors);
                }
            }
            ShardItem::Additive(p) => tensor(p, errors),
            ShardItem::Reads(output, inputs) => {
                if !outputs.contains(&unraw(output)) {
                    errors.push(syn::Error::new(
                        output.span(),
                        format!(
                            "`reads({output}: ...)` names no output of `{}` (outputs: {})",
                            f.name(),
                            outputs.join(", ")
                        ),
                    ));
                }
                for p in inputs {
                    tensor(p, errors);
                }
            }
        }
    }
}

fn check_condition(c: &Condition, f: &KernelFn, errors: &mut Errors) {
    let (param, wants_str) = match c {
        Condition::Flag { param, .. } => (param, false),
        Condition::Choice { param, .. } => (param, true),
    };
    let Some(p) = f.param(param) else {
        errors.push(syn::Error::new(
            param.span(),
            format!(
                "the condition names `{param}`, which is not a parameter of `{}` (parameters: {})",
                f.name(),
                f.param_list()
            ),
        ));
        return;
    };
    let class = match p.kind {
        ParamKind::Scalar {
            ty,
            optional: false,
            ..
        } => Some(ty.class()),
        _ => None,
    };
    match (class, wants_str) {
        (Some(ScalarClass::Bool), false) => {}
        (Some(ScalarClass::Str), true) => {
            if let Condition::Choice { values, .. } = c {
                for v in values {
                    if !p.choices.contains(&v.value()) {
                        errors.push(syn::Error::new(
                            v.span(),
                            format!(
                                "{:?} is not a choice of `{param}` (choices: {})",
                                v.value(),
                                p.choices.iter().map(|c| format!("{c:?}")).collect::<Vec<_>>().join(", ")
                            ),
                        ));
                    }
                }
            }
        }
        _ => errors.push(syn::Error::new(
            param.span(),
            format!(
                "a `shard(...)` condition tests a `bool` parameter (`if {param}`, `if !{param}`) or \
                 compares a string parameter with its choices (`if {param} == \"a\"`); `{param}` is neither"
            ),
        )),
    }
}

/// The `shard` field of the kernel definition.
pub fn expand(items: &[ShardItem]) -> TokenStream {
    let s = quote!(::nki_core::contract::sharding);
    let names = |v: &[&Ident]| {
        let v: Vec<String> = v.iter().map(|i| unraw(i)).collect();
        quote!(&[#(#v),*])
    };
    let decls = items.iter().map(|item| match item {
        ShardItem::Whole(syms, cond) => {
            let symbols = names(&syms.iter().collect::<Vec<_>>());
            let when = match cond {
                None => quote!(::core::option::Option::None),
                Some(Condition::Flag { param, value }) => {
                    let param = unraw(param);
                    quote!(::core::option::Option::Some(#s::ShardCondition::Flag { param: #param, value: #value }))
                }
                Some(Condition::Choice {
                    param,
                    values,
                    equal,
                }) => {
                    let param = unraw(param);
                    quote!(::core::option::Option::Some(#s::ShardCondition::Choice { param: #param, values: &[#(#values),*], equal: #equal }))
                }
            };
            quote!(#s::ShardDecl::Whole { symbols: #symbols, when: #when })
        }
        ShardItem::Together(first, rest) => {
            let symbols = names(&std::iter::once(first).chain(rest).collect::<Vec<_>>());
            quote!(#s::ShardDecl::Together { symbols: #symbols })
        }
        ShardItem::Additive(p) => {
            let p = unraw(p);
            quote!(#s::ShardDecl::Additive { param: #p })
        }
        ShardItem::Reads(output, inputs) => {
            let output = unraw(output);
            let inputs = names(&inputs.iter().collect::<Vec<_>>());
            quote!(#s::ShardDecl::Reads { output: #output, inputs: #inputs })
        }
    });
    quote!(&[#(#decls),*])
}

#[cfg(test)]
mod tests {
    use crate::expand_kernel;

    fn expand(shard: &str, item: &str) -> Result<String, String> {
        let attr = format!(
            "shape(x = [N, D], w = [D]) -> y = [N, D], dtype(x in {{f32}}, w = x) -> x, {shard}"
        );
        expand_kernel(attr.parse().unwrap(), item.parse().unwrap())
            .map(|t| t.to_string())
            .map_err(|e| {
                e.into_iter()
                    .map(|e| e.to_string())
                    .collect::<Vec<_>>()
                    .join("\n")
            })
    }

    const ITEM: &str = r#"/// K.
        fn k(x: &Hbm, w: &Hbm, #[default(false)] causal: bool, #[default("a")] #[choices("a", "b")] mode: &str, eps: f32) -> Hbm { todo!() }"#;

    #[test]
    fn emits_every_item() {
        let out = expand(
            r#"shard(whole(D), whole(N) if causal, whole(N) if mode != "b", together(N, D), additive(w), reads(y: x))"#,
            ITEM,
        )
        .unwrap();
        for part in [
            "ShardDecl :: Whole { symbols : & [\"D\"] , when : :: core :: option :: Option :: None }",
            "ShardCondition :: Flag { param : \"causal\" , value : true }",
            "ShardCondition :: Choice { param : \"mode\" , values : & [\"b\"] , equal : false }",
            "ShardDecl :: Together { symbols : & [\"N\" , \"D\"] }",
            "ShardDecl :: Additive { param : \"w\" }",
            "ShardDecl :: Reads { output : \"y\" , inputs : & [\"x\"] }",
        ] {
            assert!(out.contains(part), "missing {part} in {out}");
        }
    }

    #[test]
    fn reports_names_and_conditions_in_words() {
        for (shard, msg) in [
            (
                "shard(whole(Q))",
                "`shard(...)` names `Q`, which is not a dimension symbol of any input shape (inputs bind: N, D)",
            ),
            (
                "shard(whole(D) if eps)",
                "a `shard(...)` condition tests a `bool` parameter",
            ),
            (
                "shard(whole(D) if nope)",
                "the condition names `nope`, which is not a parameter of `k`",
            ),
            (
                r#"shard(whole(D) if mode == "c")"#,
                "\"c\" is not a choice of `mode` (choices: \"a\", \"b\")",
            ),
            (
                "shard(additive(eps))",
                "`shard(...)` names `eps`, which is not a tensor parameter of `k` (tensors: x, w)",
            ),
            (
                "shard(reads(z: x))",
                "`reads(z: ...)` names no output of `k` (outputs: y)",
            ),
            (
                "shard(together(N))",
                "`together(...)` names at least two symbols",
            ),
            ("shard(split(N))", "unknown `shard(...)` item `split`"),
            (
                "shard(whole())",
                "`whole(...)` names the dimension symbols it is about",
            ),
            ("shard(reads(y x))", "expected `reads(y: a, b)`"),
            (
                "shard(whole(D)), shard(whole(N))",
                "`shard(...)` appears twice",
            ),
        ] {
            let e = expand(shard, ITEM).unwrap_err();
            assert!(e.contains(msg), "{shard}\n  got: {e}");
        }
    }
}
