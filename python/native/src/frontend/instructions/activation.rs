//! Scalar-engine instructions: `activation` / `activation_reduce` and `activate2`.

use super::*;

/// The instructions this module records, by `nisa` name.
pub(super) const RECORDERS: &[(&str, Recorder)] = &[
    ("activation", activation),
    ("activation_reduce", activation),
    ("activate2", activate2),
];

/// `nisa.activation` / `nisa.activation_reduce`.
fn activation(tracer: &mut Tracer, a: &Args<'_>, file: &str, line: u32) -> PyResult<()> {
    let (dst, func, data) = (a.tile("dst")?, actfn(a, "op")?, a.tile("data")?);
    let bias = match a.opt_scalar("bias")? {
        None => None,
        Some(Scalar::Tile(r)) => Some(r),
        Some(Scalar::Imm(0.0)) => None,
        Some(Scalar::Imm(v)) => {
            return Err(a.unsupported(&format!("bias={v} (an immediate bias)")));
        }
    };
    let scale = scalar(a.scalar("scale")?);
    let reduce = if a.call() == "nisa.activation" {
        reduction(a)?
    } else {
        Some((binop(a, "reduce_op")?, a.tile("reduce_res")?))
    };
    a.finish()?;
    tracer.at(file, line, || match reduce {
        Some((op, res)) => isa::activation_reduce(dst, func, data, op, res, bias, scale),
        None => isa::activation(dst, func, data, bias, scale),
    })
}

/// `nisa.activate2`.
fn activate2(tracer: &mut Tracer, a: &Args<'_>, file: &str, line: u32) -> PyResult<()> {
    let (dst, func, data) = (a.tile("dst")?, actfn(a, "op")?, a.tile("data")?);
    let stage0 = activate2_stage(a, "op0", "imm0", "reverse0")?;
    let stage1 = activate2_stage(a, "op1", "imm1", "reverse1")?;
    let relu_param = scalar(a.scalar("relu_param")?);
    let reduce = reduction(a)?;
    a.finish()?;
    let stages = (stage0, stage1);
    tracer.at(file, line, || match reduce {
        Some((op, res)) => isa::activate2_reduce(dst, func, data, stages, relu_param, op, res),
        None => isa::activate2(dst, func, data, stages.0, stages.1, relu_param),
    })
}
