//! The frontend's register instructions and `dma_compute` (kept apart from the other
//! instructions' arms in [`super::instructions`]): each maps its decoded arguments onto the tile
//! language's function, as every other instruction does. A register travels from Python as
//! `("reg", id)` (a `VirtualRegister`); a register keyword also takes a Python int where NKI
//! does (`register_move`'s `src`).

use super::Tracer;
use super::args::Args;
use nki_core::ir::{BinOp, OobMode, RegisterId, RegisterValue};
use nki_core::isa;
use nki_core::lang::Register;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

/// The instructions this module records.
pub(super) const NAMES: &[&str] = &[
    "register_alloc",
    "register_move",
    "register_load",
    "register_store",
    "dma_compute",
];

/// A register `("reg", id)`, or an int32 where `ints` allows one; `None` for anything else.
pub(super) fn decode_register(value: &Bound<'_, PyAny>, ints: bool) -> Option<RegisterValue> {
    if let Ok((tag, id)) = value.extract::<(String, u32)>()
        && tag == "reg"
    {
        return Some(RegisterValue::Reg {
            reg: RegisterId(id),
        });
    }
    if ints
        && !value.is_instance_of::<pyo3::types::PyBool>()
        && let Ok(v) = value.extract::<i32>()
    {
        return Some(RegisterValue::Imm { value: v });
    }
    None
}

/// A register keyword: `("reg", id)`, or an int where `ints` allows one.
fn register_value(
    a: &Args<'_>,
    name: &str,
    value: &Bound<'_, PyAny>,
    ints: bool,
) -> PyResult<RegisterValue> {
    decode_register(value, ints).ok_or_else(|| {
        let expected = if ints {
            "a VirtualRegister (nisa.register_alloc) or an int32"
        } else {
            "a VirtualRegister (nisa.register_alloc)"
        };
        a.type_error(name, expected, value)
    })
}

fn register(a: &Args<'_>, name: &str) -> PyResult<Register> {
    match register_value(a, name, &a.value(name)?, false)? {
        RegisterValue::Reg { reg } => Ok(Register::from_id(reg)),
        RegisterValue::Imm { .. } => unreachable!("ints are refused above"),
    }
}

/// Records `nisa.<name>(...)`, one of [`NAMES`]; returns the register `register_alloc` makes.
pub(super) fn record(
    tracer: &mut Tracer,
    a: &Args<'_>,
    name: &str,
    file: &str,
    line: u32,
) -> PyResult<Option<u32>> {
    match name {
        "register_alloc" => {
            let x = a.value("x")?;
            let init = if x.is_none() {
                None
            } else {
                Some(
                    x.extract::<i32>()
                        .map_err(|_| a.type_error("x", "None or an int32", &x))?,
                )
            };
            a.finish()?;
            let r = tracer.at(file, line, || isa::register_alloc(init))?;
            Ok(Some(r.id().0))
        }
        "register_move" => {
            let dst = register(a, "dst")?;
            let src = register_value(a, "src", &a.value("src")?, true)?;
            a.finish()?;
            tracer.at(file, line, || isa::register_move(&dst, src))?;
            Ok(None)
        }
        "register_load" => {
            let dst = register(a, "dst")?;
            let src = tracer.dma_arg(&a.tensor("src")?)?;
            a.finish()?;
            tracer.at(file, line, || isa::register_load(&dst, src))?;
            Ok(None)
        }
        "register_store" => {
            let dst = tracer.dma_arg(&a.tensor("dst")?)?;
            let src = register(a, "src")?;
            a.finish()?;
            tracer.at(file, line, || isa::register_store(dst, &src))?;
            Ok(None)
        }
        "dma_compute" => {
            let dst = tracer.dma_arg(&a.tensor("dst")?)?;
            let srcs_value = a.value("srcs")?;
            let items: Vec<Bound<'_, PyAny>> = match srcs_value.cast::<PyList>() {
                Ok(l) => l.iter().collect(),
                Err(_) => srcs_value.cast::<PyTuple>()?.iter().collect(),
            };
            let mut srcs = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                let t = item.cast::<PyTuple>().map_err(|_| {
                    a.type_error(&format!("srcs[{i}]"), "a tile or an HBM tensor", item)
                })?;
                srcs.push(tracer.dma_arg(t)?);
            }
            let reduce_op = {
                let f = a.function("reduce_op")?;
                BinOp::from_nki_name(&f)
                    .ok_or_else(|| a.unsupported(&format!("reduce_op=nl.{f}")))?
            };
            let scales_value = a.value("scales")?;
            let scales = if scales_value.is_none() {
                None
            } else {
                Some(
                    scales_value
                        .extract::<Vec<f32>>()
                        .map_err(|_| a.type_error("scales", "a list of numbers", &scales_value))?,
                )
            };
            let unique_indices = a.flag("unique_indices")?;
            let oob = a.variant("oob_mode")?;
            let oob_mode = OobMode::from_nki_name(&oob)
                .ok_or_else(|| a.unsupported(&format!("oob_mode=nisa.oob_mode.{oob}")))?;
            a.finish()?;
            let args = isa::DmaComputeArgs {
                reduce_op,
                scales,
                unique_indices,
                oob_mode,
            };
            tracer.at(file, line, || isa::dma_compute(dst, srcs, args))?;
            Ok(None)
        }
        other => Err(a.unsupported(&format!("... (no arm for {other})"))),
    }
}
