//! `dma_copy` on the simulator: loads, stores and HBM/SBUF copies, their bounds and
//! read-only checks, in-place loads of fp32 inputs, and dtype conversion (through fp32, as NKI's
//! DMA engines convert).

use crate::NkiError;
use crate::dtype::DType;
use crate::ir::{DmaOperand, HbmAccess, TileRegion};
use crate::sim::exec::{Ctx, ExecError, copy_row};
use crate::sim::hbm::HbmBuffer;
use crate::sim::rounding::{round_into, round_into_in_place};
use crate::sim::rows::{Scratch, fill_rows, read_rows};
use crate::sim::store::TileStore;

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

pub(crate) fn dma<'a: 'p, 'p>(
    ctx: &Ctx<'a, '_>,
    store: &mut TileStore<'p>,
    dst: &DmaOperand,
    src: &DmaOperand,
    s: &mut Scratch,
) -> Result<(), ExecError> {
    check_dma(ctx, dst, src)?;
    // A buffer and the flat offset of an access's first element.
    let at = |a: &HbmAccess| (ctx.hbm[a.tensor.0 as usize], a.offset.eval(ctx.env));
    // DMA converts between dtypes (through fp32, as NKI documents): writes to HBM convert as
    // they store, a load into a tile of another dtype rounds the loaded rows after.
    let cast_load = match (dst, src) {
        (DmaOperand::Tile { region }, DmaOperand::Hbm { access }) => {
            let dt = store.dtype(region.tile);
            (ctx.hbm[access.tensor.0 as usize].dtype != dt).then_some((region, dt))
        }
        _ => None,
    };
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
            // HBM writes take values the dtype holds exactly: a tile of another dtype is
            // converted first.
            let cast = store.dtype(region.tile) != buf.dtype;
            read_rows(store, region, ctx.split, disjoint, |r, row| {
                let converted: Vec<f32>;
                let row = if cast {
                    converted = row.iter().map(|v| buf.dtype.round(*v)).collect();
                    &converted[..]
                } else {
                    row
                };
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
                        dbuf.dtype.round(*v),
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
    if let Some((region, dt)) = cast_load {
        for r in 0..region.np {
            round_into_in_place(store.row_mut(region, r)?, dt);
        }
    }
    Ok(())
}
