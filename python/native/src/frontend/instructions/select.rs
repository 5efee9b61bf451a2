//! Selection and search: predicated, ranged and affine selects, and the top-8 / top-k searches.

use super::*;

/// The instructions this module records, by `nisa` name.
pub(super) const RECORDERS: &[(&str, Recorder)] = &[
    ("select_reduce", select_reduce),
    ("range_select", range_select),
    ("affine_select", affine_select),
    ("max8", max8),
    ("nc_find_index8", nc_find_index8),
    ("nc_match_replace8", nc_match_replace8),
    ("topk", topk),
];

/// `nisa.select_reduce`.
fn select_reduce(tracer: &mut Tracer, a: &Args<'_>, file: &str, line: u32) -> PyResult<()> {
    let (dst, predicate) = (a.tile("dst")?, a.tile("predicate")?);
    let (on_true, on_false) = (a.tile("on_true")?, scalar(a.scalar("on_false")?));
    let reduce_op = a.function("reduce_op")?;
    if reduce_op != "maximum" {
        return Err(a.value_error(format!(
            "reduce_op must be nl.maximum (select_reduce reduces with max only), got \
             nl.{reduce_op}"
        )));
    }
    // reset_reduce writes this instruction's row maxima; the accumulator registers
    // carried across instructions (reduce, idle with reduce_res, reset_reduce without
    // it) are not implemented.
    let res = a.opt_tile("reduce_res")?;
    match (a.variant("reduce_cmd")?.as_str(), &res) {
        ("idle", None) | ("reset_reduce", Some(_)) => {}
        (cmd, res) => {
            let with = if res.is_some() { "with" } else { "without" };
            return Err(a.unsupported(&format!(
                "reduce_cmd=nisa.reduce_cmd.{cmd} {with} reduce_res (the accumulator \
                 registers across instructions; idle without reduce_res selects, \
                 reset_reduce with it writes this instruction's row maxima)"
            )));
        }
    }
    let reverse_pred = a.flag("reverse_pred")?;
    a.finish()?;
    tracer.at(file, line, || {
        isa::select_reduce(dst, predicate, on_true, on_false, res, reverse_pred)
    })
}

/// `nisa.range_select`.
fn range_select(tracer: &mut Tracer, a: &Args<'_>, file: &str, line: u32) -> PyResult<()> {
    let (dst, on_true) = (a.tile("dst")?, a.tile("on_true_tile")?);
    let (comp0, comp1) = (binop(a, "comp_op0")?, binop(a, "comp_op1")?);
    let (bound0, bound1) = (a.tile("bound0")?, a.tile("bound1")?);
    let reduce = reduction(a)?;
    let range_start = a.number("range_start")?;
    // NKI writes `on_false_value=...`; its documented default value is 0.0.
    let on_false = a.opt_number("on_false_value")?.unwrap_or(0.0);
    a.finish()?;
    let (res, op) = match reduce {
        Some((op, res)) => (Some(res), op),
        None => (None, BinOp::Maximum),
    };
    tracer.at(file, line, || {
        isa::range_select(
            dst,
            on_true,
            comp0,
            comp1,
            bound0,
            bound1,
            res,
            op,
            range_start as f32,
            on_false as f32,
        )
    })
}

/// `nisa.affine_select`.
fn affine_select(tracer: &mut Tracer, a: &Args<'_>, file: &str, line: u32) -> PyResult<()> {
    let dst = a.tile("dst")?;
    let step = iota_step(a, dst.nf)?;
    let multiplier = a.int32("channel_multiplier")?;
    let on_true = a.tile("on_true_tile")?;
    let on_false = a.number("on_false_value")? as f32;
    let (cmp, offset) = (binop(a, "cmp_op")?, a.int32("offset")?);
    a.finish()?;
    tracer.at(file, line, || {
        isa::affine_select(dst, step, multiplier, on_true, on_false, cmp, offset)
    })
}

/// `nisa.max8`.
fn max8(tracer: &mut Tracer, a: &Args<'_>, file: &str, line: u32) -> PyResult<()> {
    let (dst, src) = (a.tile("dst")?, a.tile("src")?);
    a.finish()?;
    tracer.at(file, line, || isa::max8(dst, src))
}

/// `nisa.nc_find_index8`.
fn nc_find_index8(tracer: &mut Tracer, a: &Args<'_>, file: &str, line: u32) -> PyResult<()> {
    let (dst, data) = (a.tile("dst")?, a.tile("data")?);
    let vals = a.tile("vals")?;
    a.finish()?;
    tracer.at(file, line, || isa::nc_find_index8(dst, data, vals))
}

/// `nisa.nc_match_replace8`.
fn nc_match_replace8(tracer: &mut Tracer, a: &Args<'_>, file: &str, line: u32) -> PyResult<()> {
    let (dst, data) = (a.tile("dst")?, a.tile("data")?);
    let (vals, imm) = (a.tile("vals")?, a.number("imm")? as f32);
    let dst_idx = a.opt_tile("dst_idx")?;
    a.finish()?;
    tracer.at(file, line, || {
        isa::nc_match_replace8(dst, data, vals, imm, dst_idx)
    })
}

/// `nisa.topk`.
fn topk(tracer: &mut Tracer, a: &Args<'_>, file: &str, line: u32) -> PyResult<()> {
    let (val_dst, idx_dst) = (a.tile("val_dst")?, a.tile("idx_dst")?);
    let src = a.tile("src")?;
    let n = a.int32("n")?;
    let n = usize::try_from(n)
        .map_err(|_| a.value_error(format!("n is the number of elements in the snake, got {n}")))?;
    a.finish()?;
    tracer.at(file, line, || isa::topk(val_dst, idx_dst, src, n))
}
