//! What each implemented `nisa` instruction does with its decoded arguments: the one place
//! the frontend maps an NKI call onto the tile language's `nki_core::isa` function (so a call
//! runs the same checks as a Rust kernel). Signatures, kinds, defaults and engines come from the
//! instruction's declaration in `nki_spec`; a keyword an instruction below does not read must be
//! at its default ([`Args::finish`]).
//!
//! The instructions are recorded by family, one function per instruction: `dma`,
//! `elementwise`, `activation`, `reduce`, `select`, `index`, `random`, `tensor` and `multicore` (as the IR
//! declares them); this module holds the argument decoders they share and the dispatch by name.

use super::Tracer;
use super::args::{Args, Scalar};
use nki_core::ir::{
    ActFn, BinOp, DgeMode, ElementwiseEngine, OobMode, ScalarOperand, TileRegion, TransposeEngine,
};
use nki_core::isa;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

mod activation;
mod dma;
mod elementwise;
mod index;
mod multicore;
mod random;
mod reduce;
mod select;
mod tensor;

/// An optional tuple of non-negative ints (`tile_position`, `tile_size`): empty for `None`.
fn pair(a: &Args<'_>, name: &str) -> PyResult<Vec<usize>> {
    let v = a.value(name)?;
    if v.is_none() {
        return Ok(Vec::new());
    }
    v.extract::<Vec<usize>>()
        .map_err(|_| a.type_error(name, "a tuple of non-negative ints", &v))
}

fn scalar(s: Scalar) -> ScalarOperand {
    match s {
        Scalar::Imm(value) => ScalarOperand::Imm {
            value: value as f32,
        },
        Scalar::Tile(r) => ScalarOperand::Column { region: r },
    }
}

fn binop(a: &Args<'_>, name: &str) -> PyResult<BinOp> {
    let f = a.function(name)?;
    BinOp::from_nki_name(&f).ok_or_else(|| a.unsupported(&format!("{name}=nl.{f}")))
}

fn opt_binop(a: &Args<'_>, name: &str) -> PyResult<Option<BinOp>> {
    match a.opt_function(name)? {
        None => Ok(None),
        Some(_) => binop(a, name).map(Some),
    }
}

fn actfn(a: &Args<'_>, name: &str) -> PyResult<ActFn> {
    let f = a.function(name)?;
    ActFn::from_nki_name(&f).ok_or_else(|| a.unsupported(&format!("{name}=nl.{f}")))
}

/// The engine chosen by `engine=`, which must be `unknown` or one of `modelled` (the engines
/// the IR records this instruction on; the first is what `unknown` picks).
fn engine<'e>(a: &Args<'_>, modelled: &[&'e str]) -> PyResult<&'e str> {
    let chosen = a.variant("engine")?;
    if chosen == "unknown" {
        return Ok(modelled[0]);
    }
    modelled
        .iter()
        .copied()
        .find(|m| *m == chosen)
        .ok_or_else(|| a.unsupported(&format!("engine=nisa.engine.{chosen}")))
}

/// The IR's engine for an `engine()` answer among vector and gpsimd.
fn elementwise_engine(chosen: &str) -> ElementwiseEngine {
    match chosen {
        "gpsimd" => ElementwiseEngine::GpSimd,
        _ => ElementwiseEngine::Vector,
    }
}

/// The reduction of an instruction that writes this instruction's row reductions into
/// `reduce_res` (`reduce_cmd=reset_reduce`). Without `reduce_res` there is none, and
/// `reduce_op` / `reduce_cmd` are left for [`Args::finish`] to require at their defaults
/// (reducing into the accumulator registers across instructions is not implemented).
fn reduction(a: &Args<'_>) -> PyResult<Option<(BinOp, TileRegion)>> {
    let Some(res) = a.opt_tile("reduce_res")? else {
        return Ok(None);
    };
    let cmd = a.variant("reduce_cmd")?;
    if cmd != "reset_reduce" {
        return Err(a.unsupported(&format!(
            "reduce_cmd=nisa.reduce_cmd.{cmd} (the accumulator registers across instructions; \
             only reset_reduce, which writes this instruction's reductions)"
        )));
    }
    let op = opt_binop(a, "reduce_op")?
        .ok_or_else(|| a.value_error("reduce_res needs reduce_op".into()))?;
    Ok(Some((op, res)))
}

/// One tensor-scalar stage of `activate2`: its operator keyword (`nl.bypass` for none, whose
/// operand is read and ignored), operand and reverse flag.
fn activate2_stage(
    a: &Args<'_>,
    op: &str,
    imm: &str,
    reverse: &str,
) -> PyResult<isa::Activate2Stage> {
    let operand = scalar(a.scalar(imm)?);
    let stage = if a.function(op)? == "bypass" {
        isa::Activate2Stage::bypass()
    } else {
        isa::Activate2Stage::new(binop(a, op)?, operand)
    };
    Ok(if a.flag(reverse)? {
        isa::Activate2Stage {
            reverse: true,
            ..stage
        }
    } else {
        stage
    })
}

/// `exponential`'s row sum: `(reduce_res, reduce_init)` for `reduce_cmd=reset_reduce` (from 0)
/// or `load_reduce` (from `reduce_init`) with `reduce_res`. Without `reduce_res` there is none and
/// `reduce_cmd` must be at its default (`idle`, checked by [`Args::finish`]): keeping the sum in the
/// accumulator registers for a later instruction (`reduce`, or no `reduce_res`) is not
/// implemented. As the docs require, `reduce_init` is 0.0 unless `reduce_cmd` is `load_reduce`.
fn exponential_reduction(a: &Args<'_>) -> PyResult<Option<(TileRegion, ScalarOperand)>> {
    let Some(res) = a.opt_tile("reduce_res")? else {
        return Ok(None);
    };
    let init = a.scalar("reduce_init")?;
    match (a.variant("reduce_cmd")?.as_str(), init) {
        ("reset_reduce", Scalar::Imm(0.0)) => Ok(Some((res, ScalarOperand::Imm { value: 0.0 }))),
        ("reset_reduce", _) => Err(a.value_error(
            "reduce_init must be 0.0 unless reduce_cmd is nisa.reduce_cmd.load_reduce".into(),
        )),
        ("load_reduce", init) => Ok(Some((res, scalar(init)))),
        (cmd, _) => Err(a.unsupported(&format!(
            "reduce_cmd=nisa.reduce_cmd.{cmd} with reduce_res (the accumulator registers across \
             instructions; reset_reduce and load_reduce write this instruction's row sums)"
        ))),
    }
}

/// The one step of a `pattern` (`[[step, num], ...]`, outermost first) over `free` elements
/// that must be one arithmetic progression (`affine_select`'s), as [`iota_dims`] simplifies it.
fn iota_step(a: &Args<'_>, free: usize) -> PyResult<i32> {
    match iota_dims(a, free)?.as_slice() {
        [(step, _)] => Ok(*step),
        _ => Err(
            a.unsupported("pattern= that is not one arithmetic progression over the free elements")
        ),
    }
}

/// `pattern=[[step, num], ...]` (outermost first) as `(step, num)` entries whose sizes multiply
/// to `free`, simplified without changing a value: entries of one element dropped, and an
/// entry merged into the one inside it when it continues that one's progression (`[[8, 4], [1,
/// 8]]` is `[[1, 32]]`), so a one-progression pattern is one entry however it was written.
fn iota_dims(a: &Args<'_>, free: usize) -> PyResult<Vec<(i32, usize)>> {
    let pattern = a.value("pattern")?;
    let bad = || a.type_error("pattern", "[[step, num], ...] of int32s", &pattern);
    let dims: Vec<Vec<i32>> = pattern.extract().map_err(|_| bad())?;
    let dims: Vec<(i32, i32)> = dims
        .into_iter()
        .map(|d| match d.as_slice() {
            [step, num] => Ok((*step, *num)),
            _ => Err(bad()),
        })
        .collect::<PyResult<_>>()?;
    if dims.iter().any(|&(_, n)| n < 0) {
        return Err(a.value_error("pattern sizes must be non-negative".into()));
    }
    let total: i64 = dims.iter().map(|&(_, n)| i64::from(n)).product();
    if total != free as i64 {
        return Err(a.value_error(format!(
            "pattern covers {total} elements per partition but dst has {free}"
        )));
    }
    // With one element per partition the step is never applied: keep the innermost one given
    // (what generated code writes for a one-column tile), so a round trip finds the same value.
    let mut merged: Vec<(i32, usize)> = Vec::new();
    for &(step, num) in dims.iter().rev().filter(|d| d.1 != 1) {
        let num = num as usize;
        match merged.last_mut() {
            Some((inner, size)) if i64::from(step) == i64::from(*inner) * *size as i64 => {
                *size *= num;
            }
            _ => merged.push((step, num)),
        }
    }
    if merged.is_empty() {
        merged.push((dims.last().map_or(0, |d| d.0), 1));
    }
    merged.reverse();
    Ok(merged)
}

fn tensor_reduce_axis(a: &Args<'_>) -> PyResult<usize> {
    let v = a.value("axis")?;
    let axes: Vec<usize> = match v.extract::<usize>() {
        Ok(axis) => vec![axis],
        Err(_) => v
            .cast::<PyTuple>()
            .map(|t| t.extract())
            .or_else(|_| v.cast::<PyList>().map(|l| l.extract()))
            .map_err(|_| a.value_error("axis must be an int or a tuple of ints".into()))??,
    };
    match axes.as_slice() {
        [axis] => Ok(*axis),
        _ => Err(a.unsupported(&format!("axis={axes:?} (several axes)"))),
    }
}

/// How an instruction is recorded: its decoded arguments onto the tracer at `file:line`.
type Recorder = fn(&mut Tracer, &Args<'_>, &str, u32) -> PyResult<()>;

/// Records `nisa.<spec.name>(...)` with its decoded arguments `a` at `file:line`.
pub(super) fn record(tracer: &mut Tracer, a: &Args<'_>, file: &str, line: u32) -> PyResult<()> {
    let name = a.call();
    let name = name.strip_prefix("nisa.").unwrap_or(&name);
    let families = [
        dma::RECORDERS,
        elementwise::RECORDERS,
        activation::RECORDERS,
        reduce::RECORDERS,
        select::RECORDERS,
        index::RECORDERS,
        random::RECORDERS,
        tensor::RECORDERS,
        multicore::RECORDERS,
    ];
    match families.into_iter().flatten().find(|(n, _)| *n == name) {
        Some((_, recorder)) => recorder(tracer, a, file, line),
        None => Err(a.unsupported("...")),
    }
}
