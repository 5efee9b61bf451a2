//! # `torch_nki._native`
//!
//! The pyo3 module behind the `torch_nki` Python package. It exposes the kernel registry of this
//! binary (every `#[kernel]` in `nki-kernels`) and the CPU simulator to Python:
//!
//! - `manifest() -> str`: the registry manifest as JSON (names, schemas, contracts, docs).
//! - `check(name, shapes, dtypes, scalars)`: the contract check, returning output shapes and
//!   dtypes (what the fake kernel and the CPU kernel allocate).
//! - `run(name, inputs, scalars, outputs)`: compiles (once per signature) and simulates the
//!   kernel on caller-owned memory, with the GIL released.
//! - `cache_size() -> int`: the number of compiled programs in the process-wide cache.
//!
//! Contract violations become `ValueError` (shape) or `TypeError` (dtype); every other failure is
//! a `torch_nki.NkiError` (a `RuntimeError`). A Rust panic never crosses into Python.

#![warn(missing_docs)]

// `inventory` only collects kernels from crates that are linked: reference the kernel library
// explicitly so the linker keeps it.
use nki_kernels as _;

mod args;
mod errors;
mod run;

use pyo3::prelude::*;
use pyo3::types::PyTuple;

pub use errors::NkiError;

/// The registry manifest as pretty-printed JSON.
#[pyfunction]
fn manifest() -> PyResult<String> {
    Ok(errors::registry()?.manifest().to_json())
}

/// Registered op names, sorted.
#[pyfunction]
fn names() -> PyResult<Vec<&'static str>> {
    Ok(errors::registry()?.names())
}

/// Checks tensor shapes, dtype names and scalar values against op `name`'s contract and returns
/// its outputs as `[(shape, dtype_name), ...]`. Nothing is traced or run.
#[pyfunction]
fn check<'py>(
    py: Python<'py>,
    name: &str,
    shapes: Vec<Vec<u64>>,
    dtypes: Vec<String>,
    scalars: Vec<Bound<'py, PyAny>>,
) -> PyResult<Vec<(Bound<'py, PyTuple>, &'static str)>> {
    let def = errors::registry()?
        .get(name)
        .map_err(errors::registry_err)?;
    let sig = args::signature(def, &shapes, &dtypes, &scalars)?;
    let outputs = def.check(&sig).map_err(errors::to_py_err)?;
    outputs
        .into_iter()
        .map(|o| Ok((PyTuple::new(py, o.shape)?, o.dtype.name())))
        .collect()
}

/// The `(rtol, atol)` each output of op `name` is held to against its reference for these
/// arguments (the kernel's tolerance class, evaluated on the contract's bindings); `None` for an
/// output dtype without a rule (fp8).
#[pyfunction]
fn tolerance(
    name: &str,
    shapes: Vec<Vec<u64>>,
    dtypes: Vec<String>,
    scalars: Vec<Bound<'_, PyAny>>,
) -> PyResult<Vec<Option<(f64, f64)>>> {
    let def = errors::registry()?
        .get(name)
        .map_err(errors::registry_err)?;
    let sig = args::signature(def, &shapes, &dtypes, &scalars)?;
    let metas: Vec<nki_core::contract::TensorMeta<'_>> = sig
        .tensors
        .iter()
        .map(|t| nki_core::contract::TensorMeta {
            shape: &t.shape,
            dtype: t.dtype,
        })
        .collect();
    let bindings = def
        .contract
        .bind(def.name, &metas)
        .map_err(|e| errors::to_py_err(e.into()))?;
    let outputs = def
        .contract
        .outputs(def.name, &bindings, &metas)
        .map_err(|e| errors::to_py_err(e.into()))?;
    Ok(outputs
        .iter()
        .map(|o| {
            def.tolerance
                .tolerance(o.dtype, &bindings)
                .map(|t| (t.rtol, t.atol))
        })
        .collect())
}

/// Number of compiled programs in the process-wide compile cache.
#[pyfunction]
fn cache_size() -> usize {
    nki_registry::CompileCache::global().len()
}

/// The module initialiser.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("NkiError", m.py().get_type::<NkiError>())?;
    m.add_function(wrap_pyfunction!(manifest, m)?)?;
    m.add_function(wrap_pyfunction!(names, m)?)?;
    m.add_function(wrap_pyfunction!(check, m)?)?;
    m.add_function(wrap_pyfunction!(run::run, m)?)?;
    m.add_function(wrap_pyfunction!(cache_size, m)?)?;
    m.add_function(wrap_pyfunction!(tolerance, m)?)?;
    Ok(())
}
