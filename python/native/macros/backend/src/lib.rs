//! # nki-python-macros-backend
//!
//! The expansion behind `#[entry_point]` (crate `nki-python-macros`), as plain functions over
//! [`proc_macro2::TokenStream`] so it is unit tested without a compiler round trip.
//!
//! An entry point is declared once, where it is written; everything else is derived from that
//! declaration:
//!
//! - on a function, `#[entry_point] fn name(..) -> PyResult<T> { body }` becomes a
//!   `#[pyfunction]` whose body runs inside `crate::guard::guard("name", || body)`, and an
//!   `inventory` submission of a `crate::guard::Export` that adds the function to the module
//!   and lists `name` among the entry points. A body that cannot fail (`-> T`, or no return
//!   type) is guarded too: the function returns `PyResult<T>` and the body becomes `Ok(body)`;
//! - on an inherent impl block, `#[entry_point] impl Class { .. }` becomes `#[pymethods]`, each
//!   method's body runs inside the guard as `Class.method` (`Class.__new__` for the `#[new]`
//!   constructor), and one `Export` adds the class and lists its methods.
//!
//! So the panic guard, the module registration, the list `_force_panic` accepts and the list
//! the panic test iterates cannot disagree. The expansion names `crate::guard`, `::pyo3` and
//! `::inventory`: it is meant for the `nki-python` crate, which has all three.

#![deny(missing_docs)]

use proc_macro2::TokenStream;
use quote::quote;
use syn::{Block, ImplItem, Item, ItemFn, ItemImpl, ReturnType, Signature, Type};

/// Expands `#[entry_point(attr)] item` (see the crate documentation).
pub fn expand_entry_point(attr: TokenStream, item: TokenStream) -> syn::Result<TokenStream> {
    if !attr.is_empty() {
        return Err(syn::Error::new_spanned(
            attr,
            "`#[entry_point]` takes no arguments: the entry point is named after the function \
             (or `Class.method`)",
        ));
    }
    match syn::parse2::<Item>(item)? {
        Item::Fn(f) => Ok(function(f)?),
        Item::Impl(i) => Ok(class(i)?),
        other => Err(syn::Error::new_spanned(
            other,
            "`#[entry_point]` applies to a function (`fn name(..) -> PyResult<T>`) or to a \
             class's inherent impl block (`impl Class { .. }`)",
        )),
    }
}

/// A `#[pyfunction]` entry point and its registration.
fn function(mut f: ItemFn) -> syn::Result<TokenStream> {
    refuse_attr(&f.attrs, "pyfunction", "#[pyfunction]")?;
    let ident = f.sig.ident.clone();
    let name = unraw(&ident.to_string());
    *f.block = guarded(&name, &mut f.sig, &f.block);
    Ok(quote! {
        #[::pyo3::pyfunction]
        #f
        ::inventory::submit! {
            crate::guard::Export {
                add: |m| ::pyo3::types::PyModuleMethods::add_function(
                    m,
                    ::pyo3::wrap_pyfunction!(#ident, m)?,
                ),
                entry_points: &[#name],
            }
        }
    })
}

/// A class's `#[pymethods]`, every method guarded, and the class's registration.
fn class(mut i: ItemImpl) -> syn::Result<TokenStream> {
    refuse_attr(&i.attrs, "pymethods", "#[pymethods]")?;
    if let Some((path, _)) = &i.trait_ {
        return Err(syn::Error::new_spanned(
            path,
            "`#[entry_point]` applies to a class's inherent impl block, not a trait impl",
        ));
    }
    if !i.generics.params.is_empty() {
        return Err(syn::Error::new_spanned(
            &i.generics,
            "a Python class's impl block cannot be generic",
        ));
    }
    let class = match &*i.self_ty {
        Type::Path(p) if p.qself.is_none() => {
            p.path.segments.last().map(|s| unraw(&s.ident.to_string()))
        }
        _ => None,
    }
    .ok_or_else(|| syn::Error::new_spanned(&i.self_ty, "expected the class's name"))?;
    let mut names = Vec::new();
    for item in &mut i.items {
        let ImplItem::Fn(m) = item else { continue };
        let method = if m.attrs.iter().any(|a| a.path().is_ident("new")) {
            "__new__".to_string()
        } else {
            unraw(&m.sig.ident.to_string())
        };
        let name = format!("{class}.{method}");
        m.block = guarded(&name, &mut m.sig, &m.block);
        names.push(name);
    }
    let self_ty = &i.self_ty;
    Ok(quote! {
        #[::pyo3::pymethods]
        #i
        ::inventory::submit! {
            crate::guard::Export {
                add: |m| ::pyo3::types::PyModuleMethods::add_class::<#self_ty>(m),
                entry_points: &[#(#names),*],
            }
        }
    })
}

/// `{ crate::guard::guard(name, || body) }`, with `sig` returning `PyResult<T>`: a body of
/// another type `T` (or `()`) becomes `Ok(body)`.
fn guarded(name: &str, sig: &mut Signature, body: &Block) -> Block {
    if returns_py_result(sig) {
        return syn::parse_quote!({ crate::guard::guard(#name, || #body) });
    }
    let ty: Type = match &sig.output {
        ReturnType::Type(_, ty) => (**ty).clone(),
        ReturnType::Default => syn::parse_quote!(()),
    };
    sig.output = syn::parse_quote!(-> ::pyo3::PyResult<#ty>);
    syn::parse_quote!({ crate::guard::guard(#name, || ::std::result::Result::Ok(#body)) })
}

/// An error if `attrs` already hold the attribute `#[entry_point]` adds.
fn refuse_attr(attrs: &[syn::Attribute], ident: &str, spelled: &str) -> syn::Result<()> {
    match attrs
        .iter()
        .find(|a| a.path().segments.last().is_some_and(|s| s.ident == ident))
    {
        Some(a) => Err(syn::Error::new_spanned(
            a,
            format!("`#[entry_point]` adds `{spelled}` itself: remove this one"),
        )),
        None => Ok(()),
    }
}

/// Whether the function returns `PyResult<T>` (what the guard returns: a panic becomes its
/// `Err`).
fn returns_py_result(sig: &Signature) -> bool {
    match &sig.output {
        ReturnType::Type(_, ty) => match &**ty {
            Type::Path(p) => p
                .path
                .segments
                .last()
                .is_some_and(|s| s.ident == "PyResult"),
            _ => false,
        },
        ReturnType::Default => false,
    }
}

/// `r#type` → `type`.
fn unraw(ident: &str) -> String {
    ident.strip_prefix("r#").unwrap_or(ident).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Token text without whitespace, so that spacing (`| |` or `||`) does not matter.
    fn squash(tokens: impl ToString) -> String {
        tokens.to_string().split_whitespace().collect()
    }

    fn expand(attr: &str, item: &str) -> syn::Result<String> {
        expand_entry_point(attr.parse().unwrap(), item.parse().unwrap()).map(squash)
    }

    fn error(attr: &str, item: &str) -> String {
        expand(attr, item).unwrap_err().to_string()
    }

    #[test]
    fn a_function_is_guarded_registered_and_listed_under_its_name() {
        let out = expand(
            "",
            "/// Doc.\n#[pyo3(signature = (n=None))] fn cache_capacity(n: Option<usize>) -> PyResult<usize> { Ok(1) }",
        )
        .unwrap();
        assert_eq!(
            out,
            squash(quote! {
                #[::pyo3::pyfunction]
                #[doc = " Doc."]
                #[pyo3(signature = (n=None))]
                fn cache_capacity(n: Option<usize>) -> PyResult<usize> {
                    crate::guard::guard("cache_capacity", || { Ok(1) })
                }
                ::inventory::submit! {
                    crate::guard::Export {
                        add: |m| ::pyo3::types::PyModuleMethods::add_function(
                            m,
                            ::pyo3::wrap_pyfunction!(cache_capacity, m)?,
                        ),
                        entry_points: &["cache_capacity"],
                    }
                }
            })
        );
    }

    #[test]
    fn a_class_guards_each_method_as_class_dot_method_and_registers_the_class() {
        let out = expand(
            "",
            "impl Tracer {
                #[new] fn new(name: &str) -> PyResult<Self> { todo!() }
                fn r#finish(&mut self) -> PyResult<()> { Ok(()) }
                const N: usize = 1;
            }",
        )
        .unwrap();
        assert!(out.starts_with("#[::pyo3::pymethods]implTracer{"), "{out}");
        for part in [
            squash(quote!(crate::guard::guard("Tracer.__new__", || {
                todo!()
            }))),
            squash(quote!(crate::guard::guard("Tracer.finish", || { Ok(()) }))),
            squash(quote!(
                const N: usize = 1;
            )),
            squash(quote! {
                add: |m| ::pyo3::types::PyModuleMethods::add_class::<Tracer>(m),
                entry_points: &["Tracer.__new__", "Tracer.finish"],
            }),
        ] {
            assert!(out.contains(&part), "{part} not in {out}");
        }
    }

    #[test]
    fn a_body_that_cannot_fail_is_guarded_as_ok() {
        let out = expand("", "fn names() -> Vec<String> { vec![] }").unwrap();
        assert!(
            out.starts_with(&squash(quote! {
                #[::pyo3::pyfunction]
                fn names() -> ::pyo3::PyResult<Vec<String> > {
                    crate::guard::guard("names", || ::std::result::Result::Ok({ vec![] }))
                }
            })),
            "{out}"
        );
        let out = expand("", "impl T { fn f(&self) {} }").unwrap();
        assert!(
            out.contains(&squash(quote! {
                fn f(&self) -> ::pyo3::PyResult<()> {
                    crate::guard::guard("T.f", || ::std::result::Result::Ok({}))
                }
            })),
            "{out}"
        );
    }

    #[test]
    fn refuses_arguments_doubled_attributes_and_other_items() {
        assert!(error("name", "fn f() -> PyResult<()> { Ok(()) }").contains("takes no arguments"));
        let e = error("", "#[pyo3::pyfunction] fn f() -> PyResult<()> { Ok(()) }");
        assert!(e.contains("adds `#[pyfunction]` itself"), "{e}");
        let e = error("", "#[pymethods] impl T {}");
        assert!(e.contains("adds `#[pymethods]` itself"), "{e}");
        let e = error("", "impl Clone for T {}");
        assert!(e.contains("not a trait impl"), "{e}");
        let e = error("", "impl<X> T<X> {}");
        assert!(e.contains("cannot be generic"), "{e}");
        let e = error("", "struct S;");
        assert!(e.contains("applies to a function"), "{e}");
    }
}
