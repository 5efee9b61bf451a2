//! Mapping Rust errors to Python exceptions.
//!
//! | Rust | Python |
//! |---|---|
//! | `NkiError::Contract` with `ViolationKind::Shape` | `ValueError` |
//! | `NkiError::Contract` with `ViolationKind::Dtype` | `TypeError` |
//! | any other `NkiError` (trace, validation, simulation, buffers, internal) | `torch_nki.NkiError` |
//! | `RegistryError::Unknown` | `KeyError` |
//! | `RegistryError::Duplicate` | `torch_nki.NkiError` |
//!
//! The message is always the error's `Display`, which names the op.

use nki_core::NkiError as CoreError;
use nki_core::contract::ViolationKind;
use nki_registry::{Registry, RegistryError};
use pyo3::PyErr;
use pyo3::exceptions::{PyKeyError, PyRuntimeError, PyTypeError, PyValueError};

pyo3::create_exception!(
    torch_nki,
    NkiError,
    PyRuntimeError,
    "A torch-nki kernel failed to trace, validate or simulate (the message names the op and the kernel source line)."
);

/// Converts a core error into the Python exception the table above names.
pub fn to_py_err(err: CoreError) -> PyErr {
    match &err {
        CoreError::Contract(v) => match v.kind {
            ViolationKind::Shape => PyValueError::new_err(err.to_string()),
            ViolationKind::Dtype => PyTypeError::new_err(err.to_string()),
        },
        _ => NkiError::new_err(err.to_string()),
    }
}

/// Converts a registry error into a Python exception.
pub fn registry_err(err: RegistryError) -> PyErr {
    match err {
        RegistryError::Unknown { .. } => PyKeyError::new_err(err.to_string()),
        RegistryError::Duplicate { .. } => NkiError::new_err(err.to_string()),
    }
}

/// The global registry, or the duplicate-name error as a Python exception.
pub fn registry() -> Result<&'static Registry, PyErr> {
    Registry::global().map_err(registry_err)
}
