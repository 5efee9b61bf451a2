//! Reductions and scans: along the free dim, across partitions, running, and batch-norm statistics.

use super::*;

/// The instructions this module records, by `nisa` name.
pub(super) const RECORDERS: &[(&str, Recorder)] = &[
    ("tensor_reduce", tensor_reduce),
    ("bn_stats", bn_stats),
    ("bn_aggr", bn_stats),
    ("tensor_scalar_reduce", tensor_scalar_reduce),
    ("tensor_tensor_scan", tensor_tensor_scan),
    ("tensor_partition_reduce", tensor_partition_reduce),
    ("tensor_scalar_cumulative", tensor_scalar_cumulative),
];

/// `nisa.tensor_reduce`.
fn tensor_reduce(tracer: &mut Tracer, a: &Args<'_>, file: &str, line: u32) -> PyResult<()> {
    let (dst, op, data) = (a.tile("dst")?, binop(a, "op")?, a.tile("data")?);
    let axis = tensor_reduce_axis(a)?;
    let negate = a.flag("negate")?;
    // Tiles are [partition, free]: the result is a (P, 1) column either way.
    a.flag("keepdims")?;
    a.finish()?;
    tracer.at(file, line, || {
        isa::tensor_reduce(dst, op, data, axis, negate)
    })
}

/// `nisa.bn_stats` / `nisa.bn_aggr`.
fn bn_stats(tracer: &mut Tracer, a: &Args<'_>, file: &str, line: u32) -> PyResult<()> {
    let (dst, data) = (a.tile("dst")?, a.tile("data")?);
    a.finish()?;
    if a.call() == "nisa.bn_stats" {
        tracer.at(file, line, || isa::bn_stats(dst, data))
    } else {
        tracer.at(file, line, || isa::bn_aggr(dst, data))
    }
}

/// `nisa.tensor_scalar_reduce`.
fn tensor_scalar_reduce(tracer: &mut Tracer, a: &Args<'_>, file: &str, line: u32) -> PyResult<()> {
    let (dst, data) = (a.tile("dst")?, a.tile("data")?);
    let (op0, operand0) = (binop(a, "op0")?, scalar(a.scalar("operand0")?));
    let reduce_op = binop(a, "reduce_op")?;
    let res = a.opt_tile("reduce_res")?.ok_or_else(|| {
        a.unsupported(
            "reduce_res=None (keeping the reduction in the accumulator registers for a \
             later instruction)",
        )
    })?;
    let init = match (
        a.variant("reduce_cmd")?.as_str(),
        a.opt_scalar("reduce_init")?,
    ) {
        ("reset_reduce", None) => None,
        ("reset_reduce", Some(_)) => {
            return Err(a.value_error(
                "reduce_init is only set with reduce_cmd=nisa.reduce_cmd.load_reduce".into(),
            ));
        }
        ("load_reduce", Some(init)) => Some(scalar(init)),
        ("load_reduce", None) => {
            return Err(
                a.value_error("reduce_cmd=nisa.reduce_cmd.load_reduce needs reduce_init".into())
            );
        }
        (cmd, _) => {
            return Err(a.unsupported(&format!(
                "reduce_cmd=nisa.reduce_cmd.{cmd} (the accumulator registers across \
                 instructions; reset_reduce and load_reduce write this instruction's \
                 reductions)"
            )));
        }
    };
    let (negate, reverse0) = (a.flag("reduce_res_negate")?, a.flag("reverse0")?);
    a.finish()?;
    tracer.at(file, line, || {
        isa::tensor_scalar_reduce(
            dst, data, op0, operand0, reduce_op, res, reverse0, init, negate,
        )
    })
}

/// `nisa.tensor_tensor_scan`.
fn tensor_tensor_scan(tracer: &mut Tracer, a: &Args<'_>, file: &str, line: u32) -> PyResult<()> {
    let (dst, data0, data1) = (a.tile("dst")?, a.tile("data0")?, a.tile("data1")?);
    let initial = scalar(a.scalar("initial")?);
    let (op0, op1) = (binop(a, "op0")?, binop(a, "op1")?);
    let (reverse0, reverse1) = (a.flag("reverse0")?, a.flag("reverse1")?);
    a.finish()?;
    tracer.at(file, line, || {
        isa::tensor_tensor_scan(dst, data0, data1, initial, op0, op1, reverse0, reverse1)
    })
}

/// `nisa.tensor_partition_reduce`.
fn tensor_partition_reduce(
    tracer: &mut Tracer,
    a: &Args<'_>,
    file: &str,
    line: u32,
) -> PyResult<()> {
    let (dst, op, data) = (a.tile("dst")?, binop(a, "op")?, a.tile("data")?);
    a.finish()?;
    tracer.at(file, line, || isa::tensor_partition_reduce(dst, op, data))
}

/// `nisa.tensor_scalar_cumulative`.
fn tensor_scalar_cumulative(
    tracer: &mut Tracer,
    a: &Args<'_>,
    file: &str,
    line: u32,
) -> PyResult<()> {
    let (dst, src) = (a.tile("dst")?, a.tile("src")?);
    let (op0, op1) = (binop(a, "op0")?, binop(a, "op1")?);
    let imm0 = scalar(a.scalar("imm0")?);
    let imm1 = match (a.variant("reduce_cmd")?.as_str(), a.opt_scalar("imm1")?) {
        ("reset_reduce", None) => None,
        ("reset_reduce", Some(_)) => {
            return Err(a.value_error(
                "imm1 is only read with reduce_cmd=nisa.reduce_cmd.load_reduce".into(),
            ));
        }
        ("load_reduce", Some(init)) => Some(scalar(init)),
        ("load_reduce", None) => {
            return Err(a.value_error(
                "reduce_cmd=nisa.reduce_cmd.load_reduce needs imm1, the value the \
                 accumulator starts from"
                    .into(),
            ));
        }
        (cmd, _) => {
            return Err(a.unsupported(&format!(
                "reduce_cmd=nisa.reduce_cmd.{cmd} (the accumulator registers across \
                 instructions; reset_reduce and load_reduce start this instruction's \
                 running reduction)"
            )));
        }
    };
    a.finish()?;
    tracer.at(file, line, || {
        isa::tensor_scalar_cumulative(dst, src, op0, op1, imm0, imm1)
    })
}
