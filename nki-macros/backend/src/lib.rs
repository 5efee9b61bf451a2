//! # nki-macros-backend
//!
//! Everything behind the `#[kernel(...)]` attribute of `nki-macros`, as plain functions over
//! [`proc_macro2::TokenStream`] so it can be unit tested without a compiler round trip.
//!
//! The pipeline, one module per step:
//!
//! 1. [`attr`] parses the attribute arguments (`shape`, `dtype`, `require`, `replaces`);
//!    [`dims`] handles the dimension expressions inside them and [`dtype`] the dtype clause.
//! 2. [`signature`] analyses the function: doc comment, `&Hbm` tensors, scalars (see
//!    [`scalar`]) with `#[default(...)]`, the number of returned tensors.
//! 3. [`check`] checks the contract against the signature (names, bound symbols, counts).
//! 4. [`schema`] renders the torch schema string; [`expand`] emits the function, the
//!    `static <NAME>_KERNEL: nki_core::kernel_def::KernelDef` and its registration.
//!
//! Entry point: [`expand_kernel`]. Errors are [`syn::Error`]s spanned at the offending tokens;
//! [`recover_item`] gives the proc macro something to emit beside them.

#![deny(missing_docs)]

pub mod attr;
pub mod check;
pub mod dims;
pub mod dtype;
pub mod expand;
pub mod op_check;
pub mod op_info;
pub mod scalar;
pub mod schema;
pub mod shape_match;
pub mod shard;
pub mod signature;

use proc_macro2::TokenStream;
use quote::ToTokens;
use syn::ItemFn;

/// Expands `#[kernel(attr)] item`: the function (without its `#[default]` attributes), its
/// `KernelDef` static and its `inventory` registration.
pub fn expand_kernel(attr: TokenStream, item: TokenStream) -> syn::Result<TokenStream> {
    let parsed_attr = syn::parse2::<attr::KernelAttr>(attr);
    let item: ItemFn = syn::parse2(item).map_err(|e| {
        syn::Error::new(e.span(), "`#[kernel(...)]` applies to a documented function, e.g. `pub fn name(x: &Hbm) -> Hbm { ... }`")
    })?;
    let analyzed = signature::analyze(item);
    let (attr, f) = match (parsed_attr, analyzed) {
        (Ok(a), Ok(f)) => (a, f),
        (Err(mut a), Err(f)) => {
            a.combine(f);
            return Err(a);
        }
        (Err(e), _) | (_, Err(e)) => return Err(e),
    };
    let checked = check::check(&attr, &f)?;
    Ok(expand::expand(&f, &attr, &checked))
}

/// What to emit beside a compile error so that only the real problem is reported: the item
/// with its `#[default(...)]` attributes removed (or unchanged if it is not a function).
pub fn recover_item(item: TokenStream) -> TokenStream {
    match syn::parse2::<ItemFn>(item.clone()) {
        Ok(mut f) => {
            signature::strip_defaults(&mut f);
            f.into_token_stream()
        }
        Err(_) => item,
    }
}

/// Collects several errors and reports them together.
#[derive(Default)]
pub struct Errors(Option<syn::Error>);

impl Errors {
    /// Adds an error.
    pub fn push(&mut self, e: syn::Error) {
        match &mut self.0 {
            Some(all) => all.combine(e),
            None => self.0 = Some(e),
        }
    }

    /// `Err` with every collected error, or `Ok(())`.
    pub fn finish(self) -> syn::Result<()> {
        self.0.map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_attribute_and_signature_errors_together() {
        let e = expand_kernel(
            "shape(x = [N]) -> [N], dtype(x in {f33}) -> x"
                .parse()
                .unwrap(),
            "fn f(x: &Hbm) -> Hbm { todo!() }".parse().unwrap(),
        )
        .unwrap_err();
        let all: Vec<String> = e.into_iter().map(|e| e.to_string()).collect();
        assert_eq!(all.len(), 2, "{all:?}");
        assert!(all[0].contains("unknown dtype `f33`"));
        assert!(all[1].contains("needs a doc comment"));
    }

    #[test]
    fn rejects_non_functions() {
        let e = expand_kernel("".parse().unwrap(), "struct S;".parse().unwrap()).unwrap_err();
        assert!(
            e.to_string().contains("applies to a documented function"),
            "{e}"
        );
    }

    #[test]
    fn recovery_strips_defaults() {
        let out = recover_item("fn f(#[default(1.0)] a: f32) {}".parse().unwrap()).to_string();
        assert_eq!(out, "fn f (a : f32) { }");
        assert_eq!(
            recover_item("struct S;".parse().unwrap()).to_string(),
            "struct S ;"
        );
    }
}
