//! Elementwise instructions: tile-tile and tile-scalar arithmetic, copies, fills, reciprocal and
//! the exponential.

use super::*;

/// The instructions this module records, by `nisa` name.
pub(super) const RECORDERS: &[(&str, Recorder)] = &[
    ("tensor_copy", tensor_copy),
    ("memset", memset),
    ("tensor_tensor", tensor_tensor),
    ("tensor_scalar", tensor_scalar),
    ("scalar_tensor_tensor", scalar_tensor_tensor),
    ("reciprocal", reciprocal),
    ("exponential", exponential),
    ("tensor_copy_predicated", tensor_copy_predicated),
];

/// The engines `tensor_copy`, `memset` and `tensor_scalar` accept (their declarations'): the
/// IR records these instructions without an engine, so the choice changes no value (every
/// engine computes in fp32), and the cost model times them on the vector engine
/// (docs/nki-frontend.md, "Calling a kernel").
const COPY_ENGINES: &[&str] = &["vector", "scalar", "gpsimd"];

/// `nisa.tensor_copy`.
fn tensor_copy(tracer: &mut Tracer, a: &Args<'_>, file: &str, line: u32) -> PyResult<()> {
    engine(a, COPY_ENGINES)?;
    let (dst, src) = (a.tile("dst")?, a.tile("src")?);
    a.finish()?;
    tracer.at(file, line, || isa::tensor_copy(dst, src))
}

/// `nisa.memset`.
fn memset(tracer: &mut Tracer, a: &Args<'_>, file: &str, line: u32) -> PyResult<()> {
    engine(a, COPY_ENGINES)?;
    let (dst, value) = (a.tile("dst")?, a.number("value")?);
    a.finish()?;
    tracer.at(file, line, || isa::memset(dst, value as f32))
}

/// `nisa.tensor_tensor`.
fn tensor_tensor(tracer: &mut Tracer, a: &Args<'_>, file: &str, line: u32) -> PyResult<()> {
    let on = match engine(a, &["vector", "gpsimd"])? {
        "gpsimd" => ElementwiseEngine::GpSimd,
        _ => ElementwiseEngine::Vector,
    };
    let (dst, d1, d2) = (a.tile("dst")?, a.tile("data1")?, a.tile("data2")?);
    let op = binop(a, "op")?;
    a.finish()?;
    tracer.at(file, line, || isa::tensor_tensor(dst, d1, d2, op).on(on))
}

/// `nisa.tensor_scalar`.
fn tensor_scalar(tracer: &mut Tracer, a: &Args<'_>, file: &str, line: u32) -> PyResult<()> {
    engine(a, COPY_ENGINES)?;
    let (dst, data) = (a.tile("dst")?, a.tile("data")?);
    let (op0, operand0) = (binop(a, "op0")?, scalar(a.scalar("operand0")?));
    let second = match (opt_binop(a, "op1")?, a.opt_scalar("operand1")?) {
        (Some(op), Some(operand)) => Some((op, scalar(operand))),
        (None, None) => None,
        _ => return Err(a.value_error("op1 and operand1 go together".into())),
    };
    let (reverse0, reverse1) = (a.flag("reverse0")?, a.flag("reverse1")?);
    if reverse1 && second.is_none() {
        return Err(a.value_error("reverse1=True needs op1 and operand1".into()));
    }
    a.finish()?;
    tracer.at(file, line, || {
        let mut recorded = isa::tensor_scalar(dst, data, op0, operand0);
        if reverse0 {
            recorded = recorded.reverse0();
        }
        match second {
            Some((op1, operand1)) if reverse1 => recorded.then_reversed(op1, operand1),
            Some((op1, operand1)) => recorded.then(op1, operand1),
            None => {}
        }
    })
}

/// `nisa.scalar_tensor_tensor`.
fn scalar_tensor_tensor(tracer: &mut Tracer, a: &Args<'_>, file: &str, line: u32) -> PyResult<()> {
    let (dst, data) = (a.tile("dst")?, a.tile("data")?);
    let (op0, operand0) = (binop(a, "op0")?, scalar(a.scalar("operand0")?));
    let (op1, operand1) = (binop(a, "op1")?, a.tile("operand1")?);
    let args = isa::ScalarTensorTensorArgs {
        reverse0: a.flag("reverse0")?,
        reverse1: a.flag("reverse1")?,
        reduce: reduction(a)?,
    };
    a.finish()?;
    tracer.at(file, line, || {
        isa::scalar_tensor_tensor_with(dst, data, (op0, operand0), (op1, operand1), args)
    })
}

/// `nisa.reciprocal`.
fn reciprocal(tracer: &mut Tracer, a: &Args<'_>, file: &str, line: u32) -> PyResult<()> {
    let (dst, data) = (a.tile("dst")?, a.tile("data")?);
    a.finish()?;
    tracer.at(file, line, || isa::reciprocal(dst, data))
}

/// `nisa.exponential`.
fn exponential(tracer: &mut Tracer, a: &Args<'_>, file: &str, line: u32) -> PyResult<()> {
    let (dst, src) = (a.tile("dst")?, a.tile("src")?);
    let max_value = scalar(a.scalar("max_value")?);
    let reduce = exponential_reduction(a)?;
    a.finish()?;
    tracer.at(file, line, || match reduce {
        Some((res, init)) => isa::exponential_reduce(dst, src, max_value, res, init),
        None => isa::exponential(dst, src, max_value),
    })
}

/// `nisa.tensor_copy_predicated`.
fn tensor_copy_predicated(
    tracer: &mut Tracer,
    a: &Args<'_>,
    file: &str,
    line: u32,
) -> PyResult<()> {
    // A tile src is a whole tile of dst's shape here, not a (P, 1) column.
    let (dst, src) = (a.tile("dst")?, scalar(a.scalar("src")?));
    let (predicate, reverse) = (a.tile("predicate")?, a.flag("reverse_pred")?);
    a.finish()?;
    tracer.at(file, line, || {
        isa::tensor_copy_predicated(dst, src, predicate, reverse)
    })
}
