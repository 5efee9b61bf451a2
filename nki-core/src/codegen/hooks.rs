//! The instructions whose spelling needs a computation the declarations cannot express: each
//! hook runs after the declared fields are spelled and sets the keywords that depend on several
//! fields, on a field's shape, or on a constant of the instruction. Every other instruction is
//! spelled from its declaration alone.
//!
//! - `dma_transpose`: `axes` from the number of dims, and `dst` / `src` seen with their dims
//!   (`tile.reshape(dims)`, or an access pattern with one entry per dim);
//! - `tensor_reduce`: `axis` names every free dim of `data` as spelled (a walk has several),
//!   and `keepdims=True` (the IR's destination is a `(P, 1)` column); into a `(P, K)`
//!   destination, `data` is spelled with its groups as outer dims and `axis` names the last
//!   dims that make up a group;
//! - `iota`: its `pattern` entries `[[step, num], ...]`; `affine_select`: the one-dimensional
//!   `pattern` `[[step, nf]]` walks `dst`'s free elements;
//! - `tensor_copy_predicated`: `src` is the immediate `imm` when the IR has no source tile;
//! - `exponential`: `reduce_cmd` is `load_reduce` when the row sums start from a `reduce_init`
//!   other than 0, and `reduce_init` is written only with `reduce_res`;
//! - `select_reduce`: its reduction is always the maximum, `reduce_op=nl.maximum` written with
//!   `reduce_res`;
//! - `nc_matmul`: in `double_row` mode, `stationary` and `moving` seen with their pair of
//!   halves as the most major free dim (`[K/2, 2, free]`, as an access pattern);
//! - `dma_copy`: a reinterpreting copy (the sync of a dtype view) is spelled as the copy of
//!   `src` seen as `dst`'s dtype, `src.view(<dtype>)`.

use super::{Emitter, Kwargs, float};
use crate::ir::{DmaOperand, MatmulPerfMode, Op, TileRegion};

/// What a hook does: adjusts `kw`, already holding the declared fields of `op`.
pub(crate) type Hook = fn(&Emitter<'_>, &Op, &mut Kwargs);

/// The hook of instruction `name`, if it has one.
pub(crate) fn hook(name: &str) -> Option<Hook> {
    Some(match name {
        "dma_transpose" => dma_transpose,
        "tensor_reduce" => tensor_reduce,
        "iota" | "affine_select" => pattern,
        "tensor_copy_predicated" => tensor_copy_predicated,
        "exponential" => exponential,
        "select_reduce" => select_reduce,
        "dma_copy" => dma_copy,
        "nc_matmul" => nc_matmul,
        _ => return None,
    })
}

fn dma_copy(e: &Emitter<'_>, op: &Op, kw: &mut Kwargs) {
    let Op::DmaCopy {
        dst,
        reinterpret: true,
        ..
    } = op
    else {
        return;
    };
    let dtype = match dst {
        DmaOperand::Tile { region } => e.program.tiles[region.tile.0 as usize].dtype,
        DmaOperand::Hbm { access } => e.program.hbm[access.tensor.0 as usize].dtype,
    };
    if let Some(src) = kw.written("src").map(str::to_string) {
        kw.set("src", Some(format!("{src}.view({})", dtype.nki_name())));
    }
}

fn nc_matmul(e: &Emitter<'_>, op: &Op, kw: &mut Kwargs) {
    let Op::NcMatmul {
        stationary,
        moving,
        perf_mode: MatmulPerfMode::DoubleRow,
        ..
    } = op
    else {
        return;
    };
    // A rectangle is walked as `[2, free]`; a walk's first free entry is already the pair.
    let pairs = |r: &TileRegion| match &r.pattern {
        None => e.region_dims(r, &[2, r.nf / 2]),
        Some(_) => e.region_dims(r, &[]),
    };
    kw.set("stationary", Some(pairs(stationary)));
    kw.set("moving", Some(pairs(moving)));
}

fn dma_transpose(e: &Emitter<'_>, op: &Op, kw: &mut Kwargs) {
    let Op::DmaTranspose { dst, src, dims, .. } = op else {
        return;
    };
    let axes = crate::isa::dma_transpose_axes(dims.len()).unwrap_or(&[]);
    let out: Vec<usize> = axes.iter().map(|&a| dims[a]).collect();
    let axes: Vec<String> = axes.iter().map(usize::to_string).collect();
    let dst = DmaOperand::Tile {
        region: dst.clone(),
    };
    kw.set("dst", Some(e.dma_dims(&dst, &out)));
    kw.set("src", Some(e.dma_dims(src, dims)));
    kw.set("axes", Some(format!("({})", axes.join(", "))));
}

fn tensor_reduce(e: &Emitter<'_>, op: &Op, kw: &mut Kwargs) {
    let Op::TensorReduce { dst, data, .. } = op else {
        return;
    };
    kw.set("keepdims", Some("True".into()));
    let groups = dst.nf;
    let Some(reduced) = (groups > 1)
        .then(|| crate::ir::reduced_free_dims(data, groups))
        .flatten()
    else {
        kw.set("axis", Some(free_axes(data)));
        return;
    };
    // Groups as outer dims: a rectangle is walked as [groups, group]; a walk already ends in
    // the dims of a group.
    let (spelled, dims) = match &data.pattern {
        None => (e.region_dims(data, &[groups, data.nf / groups]), 2),
        Some(p) => (e.region_dims(data, &[]), p.free.len()),
    };
    kw.set("data", Some(spelled));
    let axes: Vec<String> = (dims + 1 - reduced..=dims).map(|a| a.to_string()).collect();
    let axis = match axes.as_slice() {
        [one] => format!("({one},)"),
        _ => format!("({})", axes.join(", ")),
    };
    kw.set("axis", Some(axis));
}

/// `axis=` naming every free dim of a region as the generated source spells it: `1` for a
/// rectangle, `(1, ..., k)` for a walk with `k` free entries.
fn free_axes(r: &TileRegion) -> String {
    match &r.pattern {
        Some(p) if p.free.len() > 1 => {
            let axes: Vec<String> = (1..=p.free.len()).map(|a| a.to_string()).collect();
            format!("({})", axes.join(", "))
        }
        _ => "1".into(),
    }
}

fn pattern(_: &Emitter<'_>, op: &Op, kw: &mut Kwargs) {
    let entries: Vec<String> = match op {
        Op::Iota { pattern, .. } => pattern
            .iter()
            .map(|d| format!("[{}, {}]", d.step, d.num))
            .collect(),
        Op::AffineSelect { dst, step, .. } => vec![format!("[{step}, {}]", dst.nf)],
        _ => return,
    };
    kw.set("pattern", Some(format!("[{}]", entries.join(", "))));
}

fn tensor_copy_predicated(_: &Emitter<'_>, op: &Op, kw: &mut Kwargs) {
    if let Op::TensorCopyPredicated { src: None, imm, .. } = op {
        kw.set("src", Some(float(*imm)));
    }
}

fn exponential(_: &Emitter<'_>, _: &Op, kw: &mut Kwargs) {
    if kw.written("reduce_res").is_none() {
        kw.set("reduce_init", None);
    } else if kw.written("reduce_init").is_some() {
        kw.set("reduce_cmd", Some("nisa.reduce_cmd.load_reduce".into()));
    }
}

fn select_reduce(_: &Emitter<'_>, _: &Op, kw: &mut Kwargs) {
    if kw.written("reduce_res").is_some() {
        kw.set("reduce_op", Some("nl.maximum".into()));
        kw.explicit(&["reduce_op"]);
    }
}
