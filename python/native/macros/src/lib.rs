//! # nki-python-macros
//!
//! `#[entry_point]`, the one declaration of a native module entry point of `nki-python` (see
//! `nki_python::guard`). It is a thin wrapper over [`nki_python_macros_backend`], which holds
//! the expansion and its tests.

use proc_macro::TokenStream;

/// Declares a native module function (`#[entry_point] fn name(..) -> PyResult<T>`) or a class's
/// methods (`#[entry_point] impl Class { .. }`): adds `#[pyfunction]` / `#[pymethods]`, runs
/// each body inside the panic guard under its entry-point name (`name`, `Class.method`,
/// `Class.__new__` for `#[new]`), and registers it with the module and the entry-point list.
#[proc_macro_attribute]
pub fn entry_point(attr: TokenStream, item: TokenStream) -> TokenStream {
    let item = proc_macro2::TokenStream::from(item);
    match nki_python_macros_backend::expand_entry_point(attr.into(), item.clone()) {
        Ok(tokens) => tokens.into(),
        Err(e) => {
            let mut out = e.to_compile_error();
            out.extend(item);
            out.into()
        }
    }
}
