//! Python arguments → a kernel [`Signature`]: dtype names and scalar values, checked against the
//! kernel's parameter kinds.

use nki_core::contract::CallerDtype;
use nki_core::contract::Qualified;
use nki_core::kernel_def::{ParamDef, ParamKind, ScalarValue, TensorSig};
use nki_core::{DType, KernelDef, Signature, Target};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyFloat, PyInt, PyString};

/// Parses a dtype short name (`f32`, `bf16`, ...), naming the op and the known names on failure.
pub fn dtype(op: &str, name: &str) -> PyResult<DType> {
    DType::from_name(name).ok_or_else(|| {
        let known: Vec<&str> = DType::ALL.iter().map(|d| d.name()).collect();
        PyTypeError::new_err(format!(
            "{}: unknown dtype `{name}` (known: {})",
            Qualified(op),
            known.join(", ")
        ))
    })
}

/// The string arguments among a call's scalars (one value per scalar parameter, in order;
/// the others may be symbolic and are not looked at), as `(name, value)` pairs.
pub fn choices(
    def: &KernelDef,
    values: &[Bound<'_, PyAny>],
) -> PyResult<Vec<(&'static str, &'static str)>> {
    let mut out = Vec::new();
    for (p, v) in def.scalar_params().zip(values) {
        if let ParamKind::Str { .. } = p.kind
            && let ScalarValue::Str(s) = scalar(def, p, v)?
        {
            out.push((p.name, s));
        }
    }
    Ok(out)
}

/// Converts the Python scalars of a call (in parameter order, tensors excluded) to the kinds the
/// kernel declares. An `int` passed for a `float` parameter becomes a float, so `eps=1` and
/// `eps=1.0` share one compiled program. `bool` is never accepted for a number or vice versa.
pub fn scalars(def: &KernelDef, values: &[Bound<'_, PyAny>]) -> PyResult<Vec<ScalarValue>> {
    let params: Vec<_> = def.scalar_params().collect();
    if params.len() != values.len() {
        let names: Vec<&str> = params.iter().map(|p| p.name).collect();
        return Err(PyTypeError::new_err(format!(
            "{}: expected {} scalar arguments ({}), got {}",
            Qualified(def.name),
            params.len(),
            names.join(", "),
            values.len()
        )));
    }
    params
        .iter()
        .zip(values)
        .map(|(p, v)| scalar(def, p, v))
        .collect()
}

/// One scalar argument converted for parameter `p` (checked against its kind and choices).
fn scalar(def: &KernelDef, p: &ParamDef, v: &Bound<'_, PyAny>) -> PyResult<ScalarValue> {
    let is_bool = v.is_instance_of::<PyBool>();
    let is_int = !is_bool && v.is_instance_of::<PyInt>();
    let is_float = v.is_instance_of::<PyFloat>();
    if let ParamKind::Str { choices, .. } = p.kind
        && let Ok(s) = v.cast::<PyString>()
    {
        let s = s.to_cow()?;
        return match choices.iter().find(|c| **c == s) {
            Some(c) => Ok(ScalarValue::Str(c)),
            None => Err(PyValueError::new_err(format!(
                "{}: argument {} must be one of {}, got {s:?}",
                Qualified(def.name),
                p.name,
                choices
                    .iter()
                    .map(|c| format!("{c:?}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        };
    }
    let value = match p.kind {
        kind if kind.is_optional_scalar() && v.is_none() => Some(ScalarValue::None),
        ParamKind::Float { .. } if is_int || is_float => {
            Some(ScalarValue::Float(v.extract::<f64>()?))
        }
        ParamKind::Int { .. } if is_int => Some(ScalarValue::Int(v.extract::<i64>()?)),
        ParamKind::Bool { .. } if is_bool => Some(ScalarValue::Bool(v.extract::<bool>()?)),
        _ => None,
    };
    value.map(ScalarValue::canonical).ok_or_else(|| {
        let want = match p.kind {
            ParamKind::Str { .. } => "str",
            ParamKind::Float { optional: true, .. } => "float or None",
            ParamKind::Int { optional: true, .. } => "int or None",
            ParamKind::Bool { optional: true, .. } => "bool or None",
            ParamKind::Float { .. } => "float",
            ParamKind::Int { .. } => "int",
            ParamKind::Bool { .. } => "bool",
            ParamKind::Tensor => "Tensor",
            ParamKind::OptionalTensor => "Tensor?",
        };
        let got = v
            .get_type()
            .name()
            .map(|n| n.to_string())
            .unwrap_or_else(|_| "?".into());
        PyTypeError::new_err(format!(
            "{}: argument {} expects {want}, got {got}",
            Qualified(def.name),
            p.name
        ))
    })
}

/// A call as the caller made it, resolved to the kernel's signature.
pub struct CallerSignature {
    /// The signature the kernel is checked and compiled for (computed dtypes).
    pub sig: Signature,
    /// Whether a host dtype was computed in a narrower kernel dtype (`f64` → `f32`), so `f32`
    /// outputs are returned as `f64`.
    pub widened: bool,
}

impl CallerSignature {
    /// The dtype name an output of kernel dtype `d` is returned in.
    pub fn returned_name(&self, d: DType) -> &'static str {
        returned_name(d, self.widened)
    }
}

/// Whether any caller dtype is a float computed in a narrower kernel dtype (`f64` → `f32`), so
/// `f32` outputs go back as `f64` (an `int64` index input computed in `i32` widens nothing).
pub fn widened(names: &[&str]) -> bool {
    names.iter().any(|n| {
        matches!(
            CallerDtype::resolve(n),
            CallerDtype::Downcast {
                compute: DType::F32
            }
        )
    })
}

/// `f64` for `f32` outputs of a widened call, the kernel dtype's name otherwise.
pub fn returned_name(d: DType, widened: bool) -> &'static str {
    if widened && d == DType::F32 {
        "f64"
    } else {
        d.name()
    }
}

/// Builds the signature of a call from the dtypes as the caller passed them: the contract's
/// dtype rules are checked on those names first (so messages name what the caller passed).
/// `None` is an optional tensor left out.
pub fn caller_signature(
    def: &KernelDef,
    shapes: &[Option<Vec<u64>>],
    dtypes: &[Option<String>],
    scalar_values: &[Bound<'_, PyAny>],
) -> PyResult<CallerSignature> {
    let names: Vec<Option<&str>> = dtypes.iter().map(|d| d.as_deref()).collect();
    if shapes.len() == def.contract.inputs.len() && dtypes.len() == shapes.len() {
        let compute = def
            .contract
            .check_optional_dtypes(def.name, &names)
            .map_err(|v| crate::errors::violation_err(&v))?;
        let names: Vec<Option<&str>> = compute.iter().map(|d| d.map(|d| d.name())).collect();
        let sig = signature(def, shapes, &names, scalar_values)?;
        return Ok(CallerSignature {
            sig,
            widened: widened(
                &dtypes
                    .iter()
                    .flatten()
                    .map(String::as_str)
                    .collect::<Vec<_>>(),
            ),
        });
    }
    // A wrong tensor count: let the contract check report it.
    let f32s = vec![Some("f32"); shapes.len()];
    Ok(CallerSignature {
        sig: signature(def, shapes, &f32s, scalar_values)?,
        widened: false,
    })
}

/// Builds the signature of one call on the default target from kernel dtype names (`None`: an
/// optional tensor left out).
pub fn signature(
    def: &KernelDef,
    shapes: &[Option<Vec<u64>>],
    dtypes: &[Option<&str>],
    scalar_values: &[Bound<'_, PyAny>],
) -> PyResult<Signature> {
    if shapes.len() != dtypes.len() {
        return Err(PyValueError::new_err(format!(
            "{}: got {} shapes but {} dtypes",
            Qualified(def.name),
            shapes.len(),
            dtypes.len()
        )));
    }
    let tensors = shapes
        .iter()
        .zip(dtypes)
        .map(|(shape, dt)| match (shape, dt) {
            (Some(shape), Some(dt)) => Ok(Some(TensorSig {
                shape: shape.clone(),
                dtype: dtype(def.name, dt)?,
            })),
            (None, None) => Ok(None),
            _ => Err(PyValueError::new_err(format!(
                "{}: a tensor has a shape but no dtype, or a dtype but no shape",
                Qualified(def.name)
            ))),
        })
        .collect::<PyResult<Vec<_>>>()?;
    Ok(Signature {
        tensors,
        scalars: scalars(def, scalar_values)?,
        target: Target::Trn2,
    })
}
