//! Mapping Rust errors to the Python exceptions of `torch_nki.errors`.
//!
//! | Rust | Python |
//! |---|---|
//! | `NkiError::Contract`, shape violation | `ContractShapeError` (a `ValueError`), `.op`, `.param` |
//! | `NkiError::Contract`, dtype violation | `ContractDtypeError` (a `TypeError`), `.op`, `.param` |
//! | `NkiError::Validation` | `ValidationError`: `.rule`, `.limit`, `.actual`, `.instruction`, `.location` |
//! | `NkiError::Trace` | `TraceError`: `.location` |
//! | `NkiError::Simulation` | `SimulationError`: `.location` |
//! | `NkiError::IndexOutOfRange` | `ContractIndexError` (an `IndexError`), `.op`, `.param` |
//! | `NkiError::Buffers`, `NkiError::Internal` | `NkiError` |
//! | `RegistryError::Unknown` | `KeyError` |
//! | `RegistryError::Duplicate`, `RegistryError::Backward` | `NkiError` |
//!
//! The message is always the error's `Display`, which names the op. All of them derive from
//! `torch_nki.errors.NkiError` (a `RuntimeError`).

use crate::guard::entry_point;
use nki_core::NkiError as CoreError;
use nki_core::contract::{ContractViolation, ViolationKind};
use nki_registry::{Registry, RegistryError};
use pyo3::PyErr;
use pyo3::exceptions::{PyKeyError, PyRuntimeError};
use pyo3::prelude::*;

/// Builds `torch_nki.errors.<class>(message)` with attributes set; a `RuntimeError` if the
/// Python module cannot be imported (a broken install).
fn raise(class: &str, message: String, attrs: &[(&str, Option<String>)]) -> PyErr {
    Python::attach(|py| {
        let build = || -> PyResult<PyErr> {
            let cls = py.import("torch_nki.errors")?.getattr(class)?;
            let exc = cls.call1((message.clone(),))?;
            for (name, value) in attrs {
                exc.setattr(*name, value.clone())?;
            }
            Ok(PyErr::from_value(exc))
        };
        build().unwrap_or_else(|e| {
            PyRuntimeError::new_err(format!("{message} (and torch_nki.errors failed: {e})"))
        })
    })
}

/// A contract violation as `ContractShapeError` / `ContractDtypeError`.
pub fn violation_err(v: &ContractViolation) -> PyErr {
    let class = match v.kind() {
        ViolationKind::Shape => "ContractShapeError",
        ViolationKind::Dtype => "ContractDtypeError",
    };
    raise(
        class,
        v.to_string(),
        &[
            ("op", Some(v.op.clone())),
            ("param", v.violation.param().map(str::to_string)),
        ],
    )
}

/// Converts a core error into the Python exception the table above names. `op` is the op
/// the call was for.
pub fn to_py_err(err: CoreError, op: &str) -> PyErr {
    let op_attr = ("op", Some(op.to_string()));
    match &err {
        CoreError::Contract(v) => violation_err(v),
        CoreError::Validation(v) => raise(
            "ValidationError",
            err.to_string(),
            &[
                op_attr,
                ("rule", Some(v.rule.to_string())),
                ("limit", Some(v.limit.clone())),
                ("actual", Some(v.actual.clone())),
                ("instruction", Some(v.instruction.clone())),
                ("location", Some(v.loc.to_string())),
            ],
        ),
        CoreError::Trace { loc, .. } => raise(
            "TraceError",
            err.to_string(),
            &[op_attr, ("location", Some(loc.to_string()))],
        ),
        CoreError::Simulation { loc, .. } => raise(
            "SimulationError",
            err.to_string(),
            &[op_attr, ("location", Some(loc.to_string()))],
        ),
        CoreError::IndexOutOfRange { param, .. } => raise(
            "ContractIndexError",
            err.to_string(),
            &[op_attr, ("param", Some(param.clone()))],
        ),
        CoreError::Buffers(_) | CoreError::Internal(_) => {
            raise("NkiError", err.to_string(), &[op_attr])
        }
    }
}

/// A `torch_nki.NkiError` with `message` (a bug, or a failure with no better class).
pub fn internal_error(message: String) -> PyErr {
    raise("NkiError", message, &[])
}

/// Converts a registry error into a Python exception.
pub fn registry_err(err: RegistryError) -> PyErr {
    match err {
        RegistryError::Unknown { .. } => PyKeyError::new_err(err.to_string()),
        RegistryError::Duplicate { .. } | RegistryError::Backward(_) => {
            raise("NkiError", err.to_string(), &[])
        }
    }
}

/// The global registry, or the duplicate-name error as a Python exception.
pub fn registry() -> Result<&'static Registry, PyErr> {
    Registry::global().map_err(registry_err)
}

/// One error of each kind the native module can raise, built the way real failures are, so the
/// Python tests can check the mapping (class and attributes) for kinds no library kernel
/// produces on valid input (a validation failure needs a faulty kernel).
#[entry_point]
pub fn _error_example(kind: &str) -> PyResult<()> {
    let loc = nki_core::loc::SourceLoc {
        file: "kernels/src/example.rs",
        line: 12,
        column: 5,
    };
    let err = match kind {
        "validation" => CoreError::Validation(Box::new(nki_core::ValidationError {
            rule: "partition-dim",
            limit: "128".into(),
            actual: "256".into(),
            instruction: "alloc t0 [256, 64] f32 in sbuf".into(),
            message: "tile t0 has 256 partitions".into(),
            loc,
        })),
        "trace" => CoreError::Trace {
            message: "kernel example: dma_copy: dst has shape [2, 3] but src has shape [3, 2]"
                .into(),
            loc,
        },
        "simulation" => CoreError::Simulation {
            message: "read of an uninitialised element".into(),
            instruction: "tensor_copy",
            loc,
        },
        "index" => CoreError::IndexOutOfRange {
            op: "example".into(),
            param: "target".into(),
            position: "[3]".into(),
            value: 7,
            lo: 0,
            hi: 5,
            except: Some(-100),
        },
        "internal" => CoreError::Internal("neuron::example: an impossible state".into()),
        other => {
            return Err(PyKeyError::new_err(format!(
                "no error example `{other}` (validation, trace, simulation, index, internal)"
            )));
        }
    };
    Err(to_py_err(err, "example"))
}
