//! The arguments of one `nisa.<name>(...)` call, decoded against the instruction's declaration
//! in `nki_spec`: each keyword's value checked against its declared kind (a tile where a tile is
//! read or written, an `nl` operator where an operator is expected, a variant of the declared
//! enum, ...), `engine=` checked against the engines the instruction runs on, and — once the
//! instruction has read what it implements — every other keyword required to be at its
//! default, so an argument the frontend does not implement is a `NotImplementedError` naming it,
//! never silently ignored.
//!
//! The Python side encodes values uniformly (no per-instruction code): a tile region as
//! `("tile", id, p0, np, f0, nf, shape, pattern)` (`shape` the region's dims as the kernel
//! shaped it, read by the instructions that see dims: `dma_transpose`; `pattern` see
//! [`decode_region`]), an HBM view as `("hbm", id, offset, [(size, stride), ...])`,
//! an `nl` function as `("fn", name, kind)`, an enum member as `("enum", enum, variant)`, a
//! register (`VirtualRegister`) as `("reg", id)`;
//! numbers, booleans, `None`, `...` and lists as themselves.

use nki_core::ir::{FreeDim, TileId, TileRegion};
use nki_spec::{Default, InstrSpec, Kind, Param};
use pyo3::exceptions::{PyNotImplementedError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyEllipsis, PyList, PyTuple};
use std::cell::RefCell;
use std::collections::HashSet;

/// A tile region as the Python side encodes it: `("tile", id, p0, np, f0, nf, shape,
/// pattern)`, `pattern` `None` for a rectangle or `(partition_step, [(step, count), ...])` for
/// a strided walk (step slices, `tile.ap(...)`, broadcast views).
pub(super) fn decode_region(value: &Bound<'_, PyAny>) -> PyResult<TileRegion> {
    let t = value.cast::<PyTuple>()?;
    let (tile, p0, np, f0, nf): (u32, usize, usize, usize, usize) = t.get_slice(1, 6).extract()?;
    let pattern = if t.len() > 7 {
        t.get_item(7)?
            .extract::<Option<(usize, Vec<(usize, usize)>)>>()?
    } else {
        None
    };
    Ok(match pattern {
        None => TileRegion::rect(TileId(tile), p0, np, f0, nf),
        Some((partition_step, free)) => {
            let free = free
                .into_iter()
                .map(|(step, count)| FreeDim { step, count })
                .collect();
            TileRegion::strided(TileId(tile), (p0, np, partition_step), f0, free)
        }
    })
}

/// One call's arguments (see the module doc).
pub(super) struct Args<'py> {
    spec: &'static InstrSpec,
    values: Bound<'py, PyDict>,
    at: String,
    read: RefCell<HashSet<&'static str>>,
}

impl<'py> Args<'py> {
    /// Decodes `values` (every keyword of `spec`, defaults applied) for the call at `at`
    /// (`file:line`), checking each value's kind.
    pub(super) fn new(
        spec: &'static InstrSpec,
        values: Bound<'py, PyDict>,
        at: String,
    ) -> PyResult<Args<'py>> {
        let args = Args {
            spec,
            values,
            at,
            read: RefCell::new(HashSet::from(["name"])),
        };
        for p in spec.params {
            let value = args.raw(p)?;
            args.check_kind(p, &value)?;
        }
        Ok(args)
    }

    /// `nisa.<name>` for messages.
    pub(super) fn call(&self) -> String {
        format!("nisa.{}", self.spec.name)
    }

    fn raw(&self, p: &Param) -> PyResult<Bound<'py, PyAny>> {
        self.values.get_item(p.name)?.ok_or_else(|| {
            PyTypeError::new_err(format!(
                "{}: missing argument {} ({})",
                self.call(),
                p.name,
                self.at
            ))
        })
    }

    fn param(&self, name: &str) -> &'static Param {
        // Builders only ask for keywords their declaration has: a mismatch is a bug caught by
        // the tests that trace every implemented instruction.
        self.spec
            .param(name)
            .unwrap_or_else(|| panic!("{} declares no parameter {name}", self.spec.name))
    }

    /// The value of keyword `name`, marking it as implemented.
    fn get(&self, name: &str) -> PyResult<Bound<'py, PyAny>> {
        let p = self.param(name);
        self.read.borrow_mut().insert(p.name);
        self.raw(p)
    }

    /// A `TypeError`: keyword `name` of this call is not `expected`.
    pub(super) fn type_error(
        &self,
        name: &str,
        expected: &str,
        value: &Bound<'py, PyAny>,
    ) -> PyErr {
        let shown = shown(value);
        PyTypeError::new_err(format!(
            "{}: {name} must be {expected}, got {shown} ({})",
            self.call(),
            self.at
        ))
    }

    /// A `NotImplementedError` for `what` of this call.
    pub(super) fn unsupported(&self, what: &str) -> PyErr {
        PyNotImplementedError::new_err(format!(
            "torch_nki.nki does not implement {}({what}) ({}); see docs/nki-coverage.md",
            self.call(),
            self.at
        ))
    }

    /// A `ValueError` for this call.
    pub(super) fn value_error(&self, message: String) -> PyErr {
        PyValueError::new_err(format!("{}: {message} ({})", self.call(), self.at))
    }

    fn tagged(value: &Bound<'py, PyAny>, tag: &str) -> bool {
        value
            .cast::<PyTuple>()
            .ok()
            .and_then(|t| t.get_item(0).ok())
            .and_then(|t| t.extract::<String>().ok())
            .is_some_and(|t| t == tag)
    }

    fn is_number(value: &Bound<'py, PyAny>) -> bool {
        !value.is_instance_of::<pyo3::types::PyBool>()
            && (value.is_instance_of::<pyo3::types::PyInt>()
                || value.is_instance_of::<pyo3::types::PyFloat>())
    }

    fn check_kind(&self, p: &Param, value: &Bound<'py, PyAny>) -> PyResult<()> {
        if value.is_none() && p.default == Default::None {
            return Ok(());
        }
        if value.is_instance_of::<PyEllipsis>() && p.default == Default::Ellipsis {
            return Ok(());
        }
        let ok = match p.kind {
            Kind::TileOut | Kind::TileIn => {
                if Self::tagged(value, "hbm") {
                    return Err(PyTypeError::new_err(format!(
                        "{}: {} is an HBM tensor; only the DMA instructions move data to and from HBM ({})",
                        self.call(),
                        p.name,
                        self.at
                    )));
                }
                Self::tagged(value, "tile")
            }
            Kind::TensorOut | Kind::TensorIn => {
                Self::tagged(value, "tile") || Self::tagged(value, "hbm")
            }
            Kind::Scalar | Kind::TileOrNumber => {
                Self::tagged(value, "tile") || Self::is_number(value)
            }
            Kind::Operator => self.function_can_be(value, "operator"),
            Kind::Activation => self.function_can_be(value, "activation"),
            Kind::Enum(of) => {
                if !Self::tagged(value, "enum") {
                    return Err(self.type_error(p.name, &format!("a nisa.{of} value"), value));
                }
                let (_, kind, variant): (String, String, String) = value.extract()?;
                if kind != of {
                    return Err(self.type_error(p.name, &format!("a nisa.{of} value"), value));
                }
                if of == "engine" {
                    self.check_engine(&variant)?;
                }
                true
            }
            Kind::Bool => value.is_instance_of::<pyo3::types::PyBool>(),
            Kind::Int => {
                !value.is_instance_of::<pyo3::types::PyBool>()
                    && value.is_instance_of::<pyo3::types::PyInt>()
            }
            Kind::Number => Self::is_number(value),
            Kind::Str => value.is_instance_of::<pyo3::types::PyString>(),
            Kind::Axes => {
                value.is_instance_of::<pyo3::types::PyInt>()
                    || value.is_instance_of::<PyTuple>()
                    || value.is_instance_of::<PyList>()
            }
            Kind::Ints | Kind::Numbers | Kind::Pattern | Kind::Cores | Kind::TensorsIn => {
                value.is_instance_of::<PyTuple>() || value.is_instance_of::<PyList>()
            }
            // A register `("reg", id)` or an int (each instruction says which it takes).
            Kind::Register => {
                Self::tagged(value, "reg")
                    || (!value.is_instance_of::<pyo3::types::PyBool>()
                        && value.is_instance_of::<pyo3::types::PyInt>())
            }
            // `nl`-level kinds: no instruction takes them; accepted as they are.
            Kind::Shape | Kind::DType | Kind::Buffer | Kind::Callable | Kind::Any => true,
        };
        if ok {
            Ok(())
        } else {
            Err(self.type_error(p.name, kind_text(p.kind), value))
        }
    }

    /// Whether `value` is an `nl` function that can be a `kind` (`("fn", name, "operator|...")`).
    fn function_can_be(&self, value: &Bound<'py, PyAny>, kind: &str) -> bool {
        Self::tagged(value, "fn")
            && value
                .extract::<(String, String, String)>()
                .is_ok_and(|(_, _, kinds)| kinds.split('|').any(|k| k == kind))
    }

    fn check_engine(&self, variant: &str) -> PyResult<()> {
        if variant == "unknown" || self.spec.engines.iter().any(|e| e.name() == variant) {
            return Ok(());
        }
        let allowed: Vec<String> = self
            .spec
            .engines
            .iter()
            .map(|e| format!("nisa.engine.{}", e.name()))
            .collect();
        Err(self.value_error(format!(
            "engine must be one of {} (or nisa.engine.unknown), got nisa.engine.{variant}",
            allowed.join(", ")
        )))
    }

    /// Whether keyword `name` was passed as `None`.
    pub(super) fn is_none(&self, name: &str) -> PyResult<bool> {
        Ok(self.get(name)?.is_none())
    }

    /// A tile region.
    pub(super) fn tile(&self, name: &str) -> PyResult<TileRegion> {
        decode_region(&self.get(name)?)
    }

    /// The dims of a tile keyword as the kernel shaped it (`(partitions, *free dims)`).
    pub(super) fn tile_dims(&self, name: &str) -> PyResult<Vec<usize>> {
        let v = self.get(name)?;
        v.cast::<PyTuple>()?.get_item(6)?.extract()
    }

    /// An optional non-negative int keyword (`None` when passed as `None`).
    pub(super) fn opt_count(&self, name: &str) -> PyResult<Option<usize>> {
        let v = self.get(name)?;
        if v.is_none() {
            return Ok(None);
        }
        let n: i64 = v
            .extract()
            .map_err(|_| self.type_error(name, "an int", &v))?;
        usize::try_from(n)
            .map(Some)
            .map_err(|_| self.value_error(format!("{name} must not be negative, got {n}")))
    }

    /// A tile region, or `None`.
    pub(super) fn opt_tile(&self, name: &str) -> PyResult<Option<TileRegion>> {
        if self.is_none(name)? {
            return Ok(None);
        }
        self.tile(name).map(Some)
    }

    /// The encoded value of a tile-or-HBM keyword (decoded by the tracer, which owns views).
    pub(super) fn tensor(&self, name: &str) -> PyResult<Bound<'py, PyTuple>> {
        Ok(self.get(name)?.cast_into::<PyTuple>()?)
    }

    /// An immediate or a tile region (a `float | NkiTensor` keyword).
    pub(super) fn scalar(&self, name: &str) -> PyResult<Scalar> {
        let v = self.get(name)?;
        if Self::tagged(&v, "tile") {
            return Ok(Scalar::Tile(decode_region(&v)?));
        }
        Ok(Scalar::Imm(v.extract::<f64>()?))
    }

    /// An immediate or a tile region, or `None`.
    pub(super) fn opt_scalar(&self, name: &str) -> PyResult<Option<Scalar>> {
        if self.is_none(name)? {
            return Ok(None);
        }
        self.scalar(name).map(Some)
    }

    /// The `nl` name of an operator or activation function keyword.
    pub(super) fn function(&self, name: &str) -> PyResult<String> {
        let v = self.get(name)?;
        let (_, fname, _): (String, String, String) = v.extract()?;
        Ok(fname)
    }

    /// The `nl` name of an operator keyword, or `None`.
    pub(super) fn opt_function(&self, name: &str) -> PyResult<Option<String>> {
        let v = self.get(name)?;
        if v.is_none() || v.is_instance_of::<PyEllipsis>() {
            return Ok(None);
        }
        self.function(name).map(Some)
    }

    /// The variant name of an enum keyword.
    pub(super) fn variant(&self, name: &str) -> PyResult<String> {
        let (_, _, variant): (String, String, String) = self.get(name)?.extract()?;
        Ok(variant)
    }

    /// A boolean.
    pub(super) fn flag(&self, name: &str) -> PyResult<bool> {
        self.get(name)?.extract()
    }

    /// A boolean, or `None`.
    pub(super) fn opt_flag(&self, name: &str) -> PyResult<Option<bool>> {
        self.get(name)?.extract()
    }

    /// A number as `f64`.
    pub(super) fn number(&self, name: &str) -> PyResult<f64> {
        self.get(name)?.extract()
    }

    /// A number, or `None` where the keyword is `...`.
    pub(super) fn opt_number(&self, name: &str) -> PyResult<Option<f64>> {
        let v = self.get(name)?;
        if v.is_instance_of::<PyEllipsis>() {
            return Ok(None);
        }
        Ok(Some(v.extract()?))
    }

    /// An integer that fits an `i32`.
    pub(super) fn int32(&self, name: &str) -> PyResult<i32> {
        let v = self.get(name)?;
        v.extract::<i32>()
            .map_err(|_| self.type_error(name, "an int32", &v))
    }

    /// The raw value of keyword `name` (lists and tuples the instruction reads itself).
    pub(super) fn value(&self, name: &str) -> PyResult<Bound<'py, PyAny>> {
        self.get(name)
    }

    /// Checks that every keyword the instruction did not read is at its default: the frontend
    /// implements the instruction, but not that argument.
    pub(super) fn finish(&self) -> PyResult<()> {
        let read = self.read.borrow();
        for p in self.spec.params {
            if read.contains(p.name) {
                continue;
            }
            let value = self.raw(p)?;
            if !is_default(&value, p.default)? {
                return Err(self.unsupported(&format!("{}={}", p.name, shown(&value))));
            }
        }
        Ok(())
    }

    /// The tile regions this call writes (its `TileOut` keywords, and tile `TensorOut` ones).
    pub(super) fn written_regions(&self) -> PyResult<Vec<TileRegion>> {
        let mut out = Vec::new();
        for p in self.spec.params {
            if matches!(p.kind, Kind::TileOut | Kind::TensorOut) {
                let v = self.raw(p)?;
                if Self::tagged(&v, "tile") {
                    out.push(decode_region(&v)?);
                }
            }
        }
        Ok(out)
    }
}

/// A `float | NkiTensor` value.
pub(super) enum Scalar {
    /// An immediate.
    Imm(f64),
    /// A tile region (a `(P, 1)` column where the instruction broadcasts it).
    Tile(TileRegion),
}

/// An encoded value as the kernel wrote it (`nl.add`, `nisa.engine.gpsimd`, `t3[0:4, 0:8]`).
pub(super) fn shown(value: &Bound<'_, PyAny>) -> String {
    if let Ok((tag, a, b)) = value.extract::<(String, String, String)>() {
        match tag.as_str() {
            "fn" => return format!("nl.{a}"),
            "enum" => return format!("nisa.{a}.{b}"),
            _ => {}
        }
    }
    // A tile is `("tile", id, p0, np, f0, nf, shape)`.
    let region = value.cast::<PyTuple>().ok().map(|t| t.get_slice(0, 6));
    if let Some(Ok((tag, id, p0, np, f0, nf))) =
        region.map(|r| r.extract::<(String, u32, usize, usize, usize, usize)>())
        && tag == "tile"
    {
        return format!("t{id}[{p0}:{}, {f0}:{}]", p0 + np, f0 + nf);
    }
    if value
        .cast::<PyTuple>()
        .ok()
        .and_then(|t| t.get_item(0).ok())
        .and_then(|t| t.extract::<String>().ok())
        .is_some_and(|t| t == "hbm")
    {
        return "an HBM tensor".into();
    }
    value
        .repr()
        .map(|r| r.to_string())
        .unwrap_or_else(|_| "?".into())
}

fn is_default(value: &Bound<'_, PyAny>, default: Default) -> PyResult<bool> {
    Ok(match default {
        Default::Required => true,
        Default::None => value.is_none(),
        Default::Bool(b) => value.extract::<bool>().ok() == Some(b),
        Default::Int(i) => value.extract::<f64>().ok() == Some(i as f64),
        Default::Float(f) => value.extract::<f64>().ok() == Some(f),
        Default::Enum(_, variant) => value
            .extract::<(String, String, String)>()
            .is_ok_and(|(_, _, v)| v == variant),
        Default::Operator(name) => value
            .extract::<(String, String, String)>()
            .is_ok_and(|(_, n, _)| n == name),
        Default::EmptyTuple => value.len().is_ok_and(|n| n == 0),
        Default::Ellipsis => value.is_instance_of::<PyEllipsis>(),
        Default::Str(text) => value.extract::<String>().is_ok_and(|v| v == text),
        // `nl`-level defaults: no instruction has them.
        Default::DType(_) | Default::Buffer(_) => false,
    })
}

fn kind_text(kind: Kind) -> &'static str {
    match kind {
        Kind::TileOut | Kind::TileIn => "a tile (an SBUF or PSUM nl.ndarray, or a slice of one)",
        Kind::TensorOut | Kind::TensorIn => "a tile or an HBM tensor",
        Kind::TensorsIn => "a list of tiles or HBM tensors",
        Kind::Scalar => "a number or a tile",
        Kind::TileOrNumber => "a tile or a number",
        Kind::Numbers => "a list of numbers",
        Kind::Shape => "a shape",
        Kind::DType => "a dtype",
        Kind::Buffer => "a buffer",
        Kind::Callable => "a function",
        Kind::Any => "a value",
        Kind::Operator => "an nl operator (e.g. nl.add)",
        Kind::Activation => "an nl activation function (e.g. nl.exp)",
        Kind::Enum(_) => "an enum value",
        Kind::Bool => "True or False",
        Kind::Int => "an int",
        Kind::Number => "a number",
        Kind::Axes => "an axis or a tuple of axes",
        Kind::Ints => "a tuple of ints",
        Kind::Pattern => "an access pattern [[step, num], ...]",
        Kind::Cores => "a list of core ids",
        Kind::Register => "a register",
        Kind::Str => "a str",
    }
}
