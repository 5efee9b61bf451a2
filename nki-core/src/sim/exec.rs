//! Execution of single instructions on a tile store and HBM buffers, with hardware numerics:
//! fp32 arithmetic, round-to-nearest-even on every write to a narrower tile, fp32 PSUM
//! accumulation (`nc_matmul` itself is in [`super::matmul`]).

use crate::dtype::DType;
use crate::error::NkiError;
use crate::ir::{DmaOperand, HbmAccess, Instruction, Op, ScalarOperand, TileRegion};
use crate::sim::hbm::HbmBuffer;
use crate::sim::matmul::matmul;
use crate::sim::rounding::{column_values, round_into, round_into_in_place, write_column};
use crate::sim::row_math::{
    apply_activation, bn_aggr_row, bn_stats_row, reduce_row, selected_columns, with_op,
};
use crate::sim::rows::{Scratch, fill_rows, read_rows, rows1, rows2};
use crate::sim::store::{StoreError, TileStore};

pub(crate) struct Ctx<'a, 'b> {
    pub(crate) hbm: &'b [HbmBuffer<'a>],
    /// May large instructions split their rows across the simulator's threads?
    pub(crate) split: bool,
    pub(crate) env: &'b [i64],
    pub(crate) inst: &'b Instruction,
}

impl Ctx<'_, '_> {
    pub(crate) fn err(&self, message: String) -> NkiError {
        NkiError::Simulation {
            message,
            instruction: self.inst.op.name(),
            loc: self.inst.loc,
        }
    }

    pub(crate) fn store_err(&self, e: StoreError) -> NkiError {
        match e {
            StoreError::Unallocated(t) => self.err(format!("tile t{} is not allocated here", t.0)),
            StoreError::SharedWrite(t) => self.err(format!(
                "tile t{} is written from a parallel loop iteration",
                t.0
            )),
        }
    }
}

/// Executes one instruction.
pub(crate) fn execute<'a: 'p, 'p>(
    ctx: &Ctx<'a, '_>,
    store: &mut TileStore<'p>,
    scratch: &mut Scratch,
) -> Result<(), NkiError> {
    run(ctx, store, scratch).map_err(|e| match e {
        ExecError::Store(s) => ctx.store_err(s),
        ExecError::Other(e) => e,
    })
}

/// Why one instruction failed: a tile-store access, or anything already phrased as an error.
pub(crate) enum ExecError {
    Store(StoreError),
    Other(NkiError),
}

impl From<StoreError> for ExecError {
    fn from(e: StoreError) -> Self {
        ExecError::Store(e)
    }
}

impl From<NkiError> for ExecError {
    fn from(e: NkiError) -> Self {
        ExecError::Other(e)
    }
}

fn copy_row(
    store: &TileStore<'_>,
    region: &TileRegion,
    r: usize,
    buf: &mut Vec<f32>,
) -> Result<(), StoreError> {
    buf.clear();
    buf.extend_from_slice(store.row(region, r)?);
    Ok(())
}

fn run<'a: 'p, 'p>(
    ctx: &Ctx<'a, '_>,
    store: &mut TileStore<'p>,
    s: &mut Scratch,
) -> Result<(), ExecError> {
    match &ctx.inst.op {
        Op::DmaCopy { dst, src } => dma(ctx, store, dst, src, s)?,
        // Both engines compute in fp32 and round on write.
        Op::TensorTensor { dst, a, b, op, .. } => {
            let dt = store.dtype(dst.tile);
            rows2(
                store,
                dst,
                a,
                b,
                s,
                ctx.split,
                #[inline(always)]
                |_, out, x, y| with_op!(*op, |f| round_into(out, dt, |i| f(x[i], y[i]))),
            )?;
        }
        // A tensor_scalar into an fp32 temporary, then a tensor_tensor: the intermediate stays
        // in fp32 and the result is rounded once.
        Op::ScalarTensorTensor {
            dst,
            data,
            op0,
            operand0,
            op1,
            operand1,
            reduce: None,
        } => {
            let dt = store.dtype(dst.tile);
            let v0 = column_values(store, operand0, dst.np)?;
            rows2(
                store,
                dst,
                data,
                operand1,
                s,
                ctx.split,
                #[inline(always)]
                |r, out, x, y| {
                    let v0 = v0[r];
                    with_op!(*op0, |f0| with_op!(*op1, |f1| {
                        round_into(out, dt, |i| f1(f0(x[i], v0), y[i]))
                    }))
                },
            )?;
        }
        // The same in fp32, reduced, then rounded to dst.
        Op::ScalarTensorTensor {
            dst,
            data,
            op0,
            operand0,
            op1,
            operand1,
            reduce: Some((reduce_op, res)),
        } => {
            let dt = store.dtype(dst.tile);
            let v0 = column_values(store, operand0, dst.np)?;
            let reduced = rows2(
                store,
                dst,
                data,
                operand1,
                s,
                ctx.split,
                #[inline(always)]
                |r, out, x, y| {
                    let v0 = v0[r];
                    with_op!(*op0, |f0| with_op!(*op1, |f1| {
                        round_into(out, DType::F32, |i| f1(f0(x[i], v0), y[i]))
                    }));
                    // As for activation: the engine reduces the fp32 results, before they are
                    // rounded to dst.
                    let total = reduce_row(*reduce_op, out);
                    round_into_in_place(out, dt);
                    total
                },
            )?;
            write_column(store, res, reduced)?;
        }
        Op::TensorScalar {
            dst,
            data,
            op0,
            operand0,
            op1,
        } => {
            let dt = store.dtype(dst.tile);
            let v0 = column_values(store, operand0, dst.np)?;
            let second = match op1 {
                Some((op, o)) => Some((*op, column_values(store, o, dst.np)?)),
                None => None,
            };
            rows1(
                store,
                dst,
                data,
                s,
                ctx.split,
                #[inline(always)]
                |r, out, x| {
                    let v0 = v0[r];
                    match &second {
                        None => with_op!(*op0, |f0| round_into(out, dt, |i| f0(x[i], v0))),
                        Some((op1, v1)) => {
                            let v1 = v1[r];
                            with_op!(*op0, |f0| with_op!(*op1, |f1| {
                                round_into(out, dt, |i| f1(f0(x[i], v0), v1))
                            }))
                        }
                    }
                },
            )?;
        }
        Op::Activation {
            dst,
            func,
            data,
            scale,
            bias,
            reduce,
        } => {
            let dt = store.dtype(dst.tile);
            let scales = column_values(store, scale, dst.np)?;
            let biases = match bias {
                Some(b) => {
                    column_values(store, &ScalarOperand::Column { region: b.clone() }, dst.np)?
                }
                None => vec![0.0; dst.np],
            };
            let reduced = rows1(
                store,
                dst,
                data,
                s,
                ctx.split,
                #[inline(always)]
                |r, out, x| {
                    apply_activation(*func, x, scales[r], biases[r], out);
                    // The engine reduces the fp32 results, before they are rounded to dst.
                    let total = reduce.as_ref().map(|(op, _)| reduce_row(*op, out));
                    round_into_in_place(out, dt);
                    total
                },
            )?;
            if let Some((_, res)) = reduce {
                write_column(store, res, reduced.into_iter().flatten().collect())?;
            }
        }
        Op::TensorReduce {
            dst,
            op,
            data,
            negate,
        } => {
            let dt = store.dtype(dst.tile);
            for r in 0..data.np {
                let acc = reduce_row(*op, store.row(data, r)?);
                store.row_mut(dst, r)?[0] = dt.round(if *negate { -acc } else { acc });
            }
        }
        Op::BnStats { dst, data } => {
            let dt = store.dtype(dst.tile);
            for r in 0..data.np {
                let stats = bn_stats_row(store.row(data, r)?);
                round_into(store.row_mut(dst, r)?, dt, |i| stats[i]);
            }
        }
        Op::BnAggr { dst, data } => {
            let dt = store.dtype(dst.tile);
            for r in 0..data.np {
                let stats = bn_aggr_row(store.row(data, r)?);
                round_into(store.row_mut(dst, r)?, dt, |i| stats[i]);
            }
        }
        Op::TensorCopy { dst, src } => {
            let dt = store.dtype(dst.tile);
            rows1(
                store,
                dst,
                src,
                s,
                ctx.split,
                #[inline(always)]
                |_, out, x| round_into(out, dt, |i| x[i]),
            )?;
        }
        // fp32 division, rounded on write (as `BinOp::Divide` with a numerator of 1).
        Op::Reciprocal { dst, data } => {
            let dt = store.dtype(dst.tile);
            rows1(
                store,
                dst,
                data,
                s,
                ctx.split,
                #[inline(always)]
                |_, out, x| round_into(out, dt, |i| 1.0 / x[i]),
            )?;
        }
        Op::Memset { dst, value } => {
            let v = store.dtype(dst.tile).round(*value);
            for r in 0..dst.np {
                store.row_mut(dst, r)?.fill(v);
            }
        }
        Op::Iota {
            dst,
            offset,
            channel_multiplier,
            step,
        } => {
            let dt = store.dtype(dst.tile);
            for r in 0..dst.np {
                // int32 arithmetic, wrapping as the engine's does, then the write's rounding.
                let base = offset.wrapping_add(channel_multiplier.wrapping_mul(r as i32));
                round_into(store.row_mut(dst, r)?, dt, |f| {
                    base.wrapping_add(step.wrapping_mul(f as i32)) as f32
                });
            }
        }
        Op::RangeSelect {
            dst,
            on_true,
            comp0,
            bound0,
            comp1,
            bound1,
            range_start,
            on_false,
            reduce,
        } => {
            let dt = store.dtype(dst.tile);
            let b0 = column_values(
                store,
                &ScalarOperand::Column {
                    region: bound0.clone(),
                },
                dst.np,
            )?;
            let b1 = column_values(
                store,
                &ScalarOperand::Column {
                    region: bound1.clone(),
                },
                dst.np,
            )?;
            let reduced = rows1(
                store,
                dst,
                on_true,
                s,
                ctx.split,
                #[inline(always)]
                |r, out, x| {
                    // Both comparisons are monotone in the index, so the selected columns are one
                    // contiguous range.
                    let (lo, hi) =
                        selected_columns(out.len(), *range_start, (*comp0, b0[r]), (*comp1, b1[r]));
                    out[..lo].fill(*on_false);
                    out[lo..hi].copy_from_slice(&x[lo..hi]);
                    out[hi..].fill(*on_false);
                    // As for activation: the engine reduces the fp32 results, before they are
                    // rounded to dst (an fp32 reduce_res keeps an fp32 on_false_value exactly).
                    let total = reduce.as_ref().map(|(op, _)| reduce_row(*op, out));
                    round_into_in_place(out, dt);
                    total
                },
            )?;
            if let Some((_, res)) = reduce {
                write_column(store, res, reduced.into_iter().flatten().collect())?;
            }
        }
        Op::Exponential {
            dst,
            src,
            max_value,
            reduce_res,
            reduce_init,
        } => super::vector::exponential(
            ctx,
            store,
            s,
            (dst, src, max_value),
            reduce_res.as_ref().map(|r| (r, reduce_init)),
        )?,
        op @ Op::AffineSelect { .. } => super::selection::affine_select(ctx, store, s, op)?,
        Op::TensorCopyPredicated {
            dst,
            src,
            imm,
            predicate,
            reverse,
        } => super::vector::tensor_copy_predicated(
            ctx,
            store,
            s,
            (dst, src.as_ref(), *imm),
            predicate,
            *reverse,
        )?,
        op @ Op::TensorScalarReduce { .. } => {
            super::vector::tensor_scalar_reduce(ctx, store, s, op)?
        }
        Op::Max8 { dst, src } => super::selection::max8(ctx, store, s, dst, src)?,
        Op::NcFindIndex8 { dst, data, vals } => {
            super::selection::find_index8(ctx, store, s, (dst, data, vals))?
        }
        Op::NcMatchReplace8 {
            dst,
            data,
            vals,
            imm,
            dst_idx,
        } => super::selection::match_replace8(
            ctx,
            store,
            s,
            (dst, data, vals),
            *imm,
            dst_idx.as_ref(),
        )?,
        Op::NcMatmul {
            dst,
            stationary,
            moving,
            accumulate,
        } => matmul(ctx, store, dst, stationary, moving, *accumulate)?,
        Op::NcTranspose { dst, data } => {
            if dst.tile == data.tile {
                return Err(ctx
                    .err("nc_transpose destination aliases its source".into())
                    .into());
            }
            let dt = store.dtype(dst.tile);
            // Gather the source once (the destination tile is borrowed mutably below).
            let mut src = Vec::with_capacity(data.np * data.nf);
            for r in 0..data.np {
                src.extend_from_slice(store.row(data, r)?);
            }
            for f in 0..data.nf {
                let out = store.row_mut(dst, f)?;
                round_into(out, dt, |p| src[p * data.nf + f]);
            }
        }
    }
    Ok(())
}

/// What a load can read in place instead of copying ([`TileStore::alias`]): the input's
/// elements from the pattern's first, rows `p_stride` apart, when the load fills a whole fp32
/// tile with contiguous rows of an fp32 kernel input.
fn alias_source<'a>(
    store: &TileStore<'_>,
    region: &TileRegion,
    access: &HbmAccess,
    buf: &HbmBuffer<'a>,
    base: i64,
) -> Option<(&'a [f32], usize)> {
    let whole = region.p0 == 0
        && region.f0 == 0
        && region.np == store.partitions(region.tile)
        && region.nf == store.stride(region.tile);
    let contiguous_rows = access.f_stride == 1 && access.p_stride >= 0;
    if !(whole && contiguous_rows && store.dtype(region.tile) == DType::F32) {
        return None;
    }
    let data = buf.input_f32()?;
    Some((
        data.get(usize::try_from(base).ok()?..)?,
        access.p_stride as usize,
    ))
}

/// The flat element range an access covers for the current loop indices.
fn flat_range(a: &HbmAccess, env: &[i64]) -> (i64, i64, i64) {
    let base = a.offset.eval(env);
    let (below, above) = a.extent();
    (base, base.saturating_add(below), base.saturating_add(above))
}

/// The checks a DMA makes before it moves anything: both sides the same shape, every HBM
/// element inside its tensor, writes only to outputs. The banded executor runs them on the
/// whole instruction before its bands run pieces of it.
pub(crate) fn check_dma(
    ctx: &Ctx<'_, '_>,
    dst: &DmaOperand,
    src: &DmaOperand,
) -> Result<(), NkiError> {
    // Both sides move the same [rows, cols]: the bounds check below covers the access pattern,
    // so the tile side must not be longer (a traced program always agrees; this guards
    // programs built or deserialised by hand).
    let shape = |o: &DmaOperand| match o {
        DmaOperand::Tile { region } => region.shape(),
        DmaOperand::Hbm { access } => [access.np, access.nf],
    };
    if shape(dst) != shape(src) {
        return Err(ctx.err(format!(
            "dst has shape {:?} but src has shape {:?}",
            shape(dst),
            shape(src)
        )));
    }
    for (o, write) in [(dst, true), (src, false)] {
        let DmaOperand::Hbm { access: a } = o else {
            continue;
        };
        let buf = ctx.hbm[a.tensor.0 as usize];
        let (_, lo, hi) = flat_range(a, ctx.env);
        if lo < 0 || hi >= buf.numel() as i64 {
            return Err(ctx.err(format!(
                "out-of-bounds HBM access: elements [{lo}, {hi}] of a tensor with {} elements",
                buf.numel()
            )));
        }
        if write && !buf.writable {
            return Err(ctx.err("write to a read-only kernel input".into()));
        }
    }
    Ok(())
}

fn dma<'a: 'p, 'p>(
    ctx: &Ctx<'a, '_>,
    store: &mut TileStore<'p>,
    dst: &DmaOperand,
    src: &DmaOperand,
    s: &mut Scratch,
) -> Result<(), ExecError> {
    check_dma(ctx, dst, src)?;
    // A buffer and the flat offset of an access's first element.
    let at = |a: &HbmAccess| (ctx.hbm[a.tensor.0 as usize], a.offset.eval(ctx.env));
    match (dst, src) {
        (DmaOperand::Tile { region }, DmaOperand::Hbm { access })
            if access.p_stride == 1 && access.f_stride != 1 && region.np > 1 =>
        {
            // A transposed load: each tile column is a contiguous run in HBM. Read runs and
            // scatter them down the columns instead of gathering every row element by element.
            let (buf, base) = at(access);
            let (mut tile, stride) = store.take(region.tile)?;
            s.a.resize(region.np, 0.0);
            for f in 0..region.nf {
                buf.read_run((base + f as i64 * access.f_stride) as usize, &mut s.a);
                let col = region.p0 * stride + region.f0 + f;
                for (p, v) in s.a.iter().enumerate() {
                    tile[col + p * stride] = *v;
                }
            }
            store.restore(region.tile, tile);
        }
        (DmaOperand::Tile { region }, DmaOperand::Hbm { access }) => {
            let (buf, base) = at(access);
            if let Some((data, stride)) = alias_source(store, region, access, &buf, base) {
                store.alias(region.tile, data, stride)?;
                return Ok(());
            }
            fill_rows(store, region, ctx.split, |r, out| {
                let row_base = base + r as i64 * access.p_stride;
                if access.f_stride == 1 {
                    buf.read_run(row_base as usize, out);
                } else {
                    buf.read_strided(row_base, access.f_stride, out);
                }
            })?;
        }
        (DmaOperand::Hbm { access }, DmaOperand::Tile { region }) => {
            let (buf, base) = at(access);
            // Rows write disjoint memory when each is one contiguous run no longer than the
            // step between rows (a broadcast or overlapping pattern keeps row order).
            let disjoint =
                access.f_stride == 1 && access.p_stride.unsigned_abs() as usize >= access.nf;
            read_rows(store, region, ctx.split, disjoint, |r, row| {
                let row_base = base + r as i64 * access.p_stride;
                if access.f_stride == 1 {
                    buf.write_run(row_base as usize, row);
                } else {
                    for (f, v) in row.iter().enumerate() {
                        buf.write((row_base + f as i64 * access.f_stride) as usize, *v);
                    }
                }
            })?;
        }
        (DmaOperand::Hbm { access: d }, DmaOperand::Hbm { access: sa }) => {
            let (dbuf, dbase) = at(d);
            let (sbuf, sbase) = at(sa);
            for r in 0..d.np as i64 {
                s.a.clear();
                s.a.extend(
                    (0..d.nf as i64)
                        .map(|f| sbuf.read((sbase + r * sa.p_stride + f * sa.f_stride) as usize)),
                );
                for (f, v) in s.a.iter().enumerate() {
                    dbuf.write(
                        (dbase + r * d.p_stride + f as i64 * d.f_stride) as usize,
                        *v,
                    );
                }
            }
        }
        (DmaOperand::Tile { region: d }, DmaOperand::Tile { region: sr }) => {
            let dt = store.dtype(d.tile);
            for r in 0..d.np {
                copy_row(store, sr, r, &mut s.a)?;
                let x = &s.a;
                round_into(store.row_mut(d, r)?, dt, |i| x[i]);
            }
        }
    }
    Ok(())
}
