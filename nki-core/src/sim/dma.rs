//! `dma_copy` and `dma_transpose` on the simulator: loads, stores and HBM/SBUF copies, their bounds and
//! read-only checks, in-place loads of fp32 inputs, and dtype conversion (through fp32, as NKI's
//! DMA engines convert).

use crate::NkiError;
use crate::dtype::DType;
use crate::ir::{DmaOperand, HbmAccess, OobMode, Op, TileRegion};
use crate::sim::exec::{Ctx, ExecError, copy_row};
use crate::sim::hbm::HbmBuffer;
use crate::sim::rounding::{round_into, round_into_in_place};
use crate::sim::rows::{Scratch, fill_rows, on_one_thread, read_rows};
use crate::sim::store::TileStore;
use std::sync::atomic::{AtomicBool, Ordering};

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
    check_shapes(ctx, dst, src)?;
    for (o, write) in [(dst, true), (src, false)] {
        if let DmaOperand::Hbm { access: a } = o {
            check_hbm_side(ctx, a, write)?;
        }
    }
    Ok(())
}

/// `[rows, cols]` a DMA side moves.
pub(crate) fn dma_shape(o: &DmaOperand) -> [usize; 2] {
    match o {
        DmaOperand::Tile { region } => region.shape(),
        DmaOperand::Hbm { access } => [access.np, access.nf],
    }
}

/// Both sides of a DMA move the same `[rows, cols]`.
pub(crate) fn check_shapes(
    ctx: &Ctx<'_, '_>,
    dst: &DmaOperand,
    src: &DmaOperand,
) -> Result<(), NkiError> {
    if dma_shape(dst) != dma_shape(src) {
        return Err(ctx.err(format!(
            "dst has shape {:?} but src has shape {:?}",
            dma_shape(dst),
            dma_shape(src)
        )));
    }
    Ok(())
}

/// Whether every element an HBM access covers (for the current loop indices) is inside its
/// tensor.
pub(crate) fn in_bounds(ctx: &Ctx<'_, '_>, a: &HbmAccess) -> bool {
    let (_, lo, hi) = flat_range(a, ctx.env);
    lo >= 0 && hi < ctx.hbm[a.tensor.0 as usize].numel() as i64
}

/// One HBM side of a DMA: every element inside its tensor, and a written tensor an output.
pub(crate) fn check_hbm_side(
    ctx: &Ctx<'_, '_>,
    a: &HbmAccess,
    write: bool,
) -> Result<(), NkiError> {
    let buf = ctx.hbm[a.tensor.0 as usize];
    let (_, lo, hi) = flat_range(a, ctx.env);
    if !in_bounds(ctx, a) {
        return Err(ctx.err(format!(
            "out-of-bounds HBM access: elements [{lo}, {hi}] of a tensor with {} elements",
            buf.numel()
        )));
    }
    if write && !buf.writable {
        return Err(ctx.err("write to a read-only kernel input".into()));
    }
    Ok(())
}

/// Executes `dma_transpose`: the source read whole as `[dims[0], rest]` (from HBM through its
/// access pattern, or from its tile region), each element moved to its place in the permuted
/// shape, then the destination's rows written (so a source in `dst`'s own tile is read before
/// it is overwritten). The indirect transpose (a `vector_offset` source) gathers its rows first,
/// each resolved as `dma_copy` resolves them ([`super::indirect`]); with `oob_mode=skip` a row
/// outside its tensor is not moved, and the `dst` elements it would fill keep what they held.
/// `priority` / `dge_mode` do not change the bytes moved.
pub(crate) fn dma_transpose(
    ctx: &Ctx<'_, '_>,
    store: &mut TileStore<'_>,
    op: &Op,
) -> Result<(), ExecError> {
    let Op::DmaTranspose {
        dst,
        src,
        dims,
        oob_mode,
        ..
    } = op
    else {
        unreachable!("called for dma_transpose");
    };
    let axes = crate::isa::dma_transpose_axes(dims.len())
        .ok_or_else(|| ctx.err(format!("a {}-D source cannot be transposed", dims.len())))?;
    let (rows, free) = (dims[0], dims[1..].iter().product::<usize>());
    let out_dims: Vec<usize> = axes.iter().map(|&a| dims[a]).collect();
    let src_shape = match src {
        DmaOperand::Tile { region } => region.shape(),
        DmaOperand::Hbm { access } => [access.np, access.nf],
    };
    // A traced program always agrees; these guard programs built or deserialised by hand.
    if src_shape != [rows, free]
        || dst.shape() != [out_dims[0], dst.nf]
        || dst.np * dst.nf != rows * free
    {
        return Err(ctx
            .err(format!(
                "src {src_shape:?} seen as {dims:?} does not transpose into dst {:?}",
                dst.shape()
            ))
            .into());
    }
    let mut vals = Vec::with_capacity(rows * free);
    // Source rows an indirect transpose skips (`oob_mode=skip`): their elements of `dst` keep
    // what they held.
    let mut skipped = vec![false; rows];
    match src {
        DmaOperand::Tile { region } => {
            for r in 0..rows {
                vals.extend_from_slice(store.row(region, r)?);
            }
        }
        DmaOperand::Hbm { access } if access.dynamic.is_some() => {
            let buf = ctx.hbm[access.tensor.0 as usize];
            for (r, skip) in skipped.iter_mut().enumerate() {
                let DmaOperand::Hbm { access: at } = super::indirect::row(ctx, store, src, r)?
                else {
                    unreachable!("an HBM side's row is an HBM access");
                };
                if *oob_mode == OobMode::Skip && !in_bounds(ctx, &at) {
                    *skip = true;
                    vals.extend(std::iter::repeat_n(0.0, free));
                    continue;
                }
                check_hbm_side(ctx, &at, false)?;
                let base = at.offset.eval(ctx.env);
                vals.extend((0..free as i64).map(|f| buf.read((base + f * at.f_stride) as usize)));
            }
        }
        DmaOperand::Hbm { access } => {
            check_hbm_side(ctx, access, false)?;
            let buf = ctx.hbm[access.tensor.0 as usize];
            let base = access.offset.eval(ctx.env);
            for r in 0..rows as i64 {
                let at = base + r * access.p_stride;
                vals.extend(
                    (0..free as i64).map(|f| buf.read((at + f * access.f_stride) as usize)),
                );
            }
        }
    }
    // Where one step along each source dim lands in the destination (row-major in out_dims).
    let mut out_stride = vec![0usize; dims.len()];
    let mut stride = 1;
    for (i, &a) in axes.iter().enumerate().rev() {
        out_stride[a] = stride;
        stride *= out_dims[i];
    }
    let mut out = vec![0.0f32; vals.len()];
    let mut keep = vec![false; vals.len()];
    let mut index = vec![0usize; dims.len()];
    for &v in &vals {
        let at: usize = index.iter().zip(&out_stride).map(|(i, s)| i * s).sum();
        out[at] = v;
        keep[at] = skipped[index[0]];
        // The next source index, the last dim fastest.
        for d in (0..dims.len()).rev() {
            index[d] += 1;
            if index[d] < dims[d] {
                break;
            }
            index[d] = 0;
        }
    }
    let dt = store.dtype(dst.tile);
    let width = dst.nf.max(1);
    for (p, (chunk, kept)) in out.chunks(width).zip(keep.chunks(width)).enumerate() {
        let row = store.row_mut(dst, p)?;
        let held: Vec<f32> = row.to_vec();
        round_into(row, dt, |i| if kept[i] { held[i] } else { chunk[i] });
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
    let walks =
        |o: &DmaOperand| matches!(o, DmaOperand::Hbm { access } if access.free_dims.is_some());
    if walks(dst) || walks(src) {
        return dma_walk(ctx, store, dst, src);
    }
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
            if on_one_thread(ctx.split, region)
                && one_run(region, store.stride(region.tile), access)
            {
                let (mut tile, stride) = store.take(region.tile)?;
                let rows = region.p0 * stride..(region.p0 + region.np) * stride;
                buf.read_run(base as usize, &mut tile[rows]);
                store.restore(region.tile, tile);
            } else {
                fill_rows(store, region, ctx.split, |r, out| {
                    let row_base = base + r as i64 * access.p_stride;
                    if access.f_stride == 1 {
                        buf.read_run(row_base as usize, out);
                    } else {
                        buf.read_strided(row_base, access.f_stride, out);
                    }
                })?;
            }
        }
        (DmaOperand::Hbm { access }, DmaOperand::Tile { region }) => {
            let sink = RowSink::new(ctx, access, store.dtype(region.tile));
            if sink.cast.is_none() && on_one_thread(ctx.split, region) {
                let (data, stride) = store.data(region.tile)?;
                if one_run(region, stride, access) {
                    let rows = region.p0 * stride..(region.p0 + region.np) * stride;
                    sink.write(0, &data[rows]);
                    return Ok(());
                }
            }
            read_rows(store, region, ctx.split, sink.rows_disjoint(), |r, row| {
                let converted: Vec<f32>;
                let row = match sink.cast {
                    Some(dt) => {
                        converted = row.iter().map(|v| dt.round(*v)).collect();
                        &converted[..]
                    }
                    None => row,
                };
                sink.write(r, row);
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

/// Whether a DMA between whole rows of a tile (row stride `stride`) and HBM rows that follow
/// one another is one contiguous run on both sides: then, when its rows would run on one
/// thread anyway, it moves as one copy instead of row by row (the same elements to the same
/// places; rows of a small tile cost more than their elements, a `[128, 64]` store 22 ns a
/// row).
fn one_run(region: &TileRegion, stride: usize, access: &HbmAccess) -> bool {
    region.f0 == 0
        && region.nf == stride
        && access.f_stride == 1
        && access.p_stride == region.nf as i64
        && access.np == region.np
        && access.nf == region.nf
}

/// Where a DMA store puts the rows of the tile region it moves: row `r` at the access's
/// offset plus `r` row steps, converted to the tensor's dtype on the way (DMA converts through
/// fp32, as NKI documents). The store path of [`dma`] writes through it, and so does an
/// instruction whose rows go straight to the store that follows it ([`super::forward`]).
pub(crate) struct RowSink<'a> {
    buf: HbmBuffer<'a>,
    base: i64,
    p_stride: i64,
    f_stride: i64,
    nf: usize,
    /// The tensor's dtype, when rows must be rounded to it (the tile holds another).
    pub(crate) cast: Option<DType>,
    /// Whether an instruction has handed its rows here ([`RowSink::put`]).
    used: AtomicBool,
}

impl<'a> RowSink<'a> {
    /// The HBM side `access` of a store from a tile of dtype `tile`, for the current loop
    /// indices (a static access without free dims: [`dma`] walks the others).
    pub(crate) fn new(ctx: &Ctx<'a, '_>, access: &HbmAccess, tile: DType) -> RowSink<'a> {
        let buf = ctx.hbm[access.tensor.0 as usize];
        RowSink {
            buf,
            base: access.offset.eval(ctx.env),
            p_stride: access.p_stride,
            f_stride: access.f_stride,
            nf: access.nf,
            cast: (buf.dtype != tile).then_some(buf.dtype),
            used: AtomicBool::new(false),
        }
    }

    /// Whether an instruction's rows were put here: then the store has been done.
    pub(crate) fn used(&self) -> bool {
        self.used.load(Ordering::Relaxed)
    }

    /// Whether rows write disjoint memory: each one contiguous run no longer than the step
    /// between rows (a broadcast or overlapping pattern keeps row order).
    pub(crate) fn rows_disjoint(&self) -> bool {
        self.f_stride == 1 && self.p_stride.unsigned_abs() as usize >= self.nf
    }

    /// Writes `row`, values the tensor's dtype holds exactly, as row `r` (or, for a run of
    /// whole rows that follow one another, the rows from `r` on).
    pub(crate) fn write(&self, r: usize, row: &[f32]) {
        let row_base = self.base + r as i64 * self.p_stride;
        if self.f_stride == 1 {
            self.buf.write_run(row_base as usize, row);
        } else {
            for (f, v) in row.iter().enumerate() {
                self.buf
                    .write((row_base + f as i64 * self.f_stride) as usize, *v);
            }
        }
    }

    /// Row `r` of the tensor itself, for an instruction to compute into instead of a row
    /// buffer, when that stores the same bits: no rounding on the way, rows written with
    /// plain stores to disjoint contiguous runs ([`HbmBuffer::run_f32_mut`]). Marks the sink
    /// used.
    ///
    /// # Safety
    /// No other slice of row `r` is live (each row is asked for once per run of the
    /// instruction).
    pub(crate) unsafe fn row_in_place(&self, r: usize) -> Option<&'a mut [f32]> {
        if self.cast.is_some() || !self.rows_disjoint() {
            return None;
        }
        let row_base = usize::try_from(self.base + r as i64 * self.p_stride).ok()?;
        // SAFETY: rows are disjoint runs (`rows_disjoint`) and the caller asks for row `r` once.
        let row = unsafe { self.buf.run_f32_mut(row_base, self.nf) }?;
        self.used.store(true, Ordering::Relaxed);
        Some(row)
    }

    /// Rounds `row` (the tile's values) to the tensor's dtype in place and writes it as row `r`.
    pub(crate) fn put(&self, r: usize, row: &mut [f32]) {
        self.used.store(true, Ordering::Relaxed);
        if let Some(dt) = self.cast {
            round_into_in_place(row, dt);
        }
        self.write(r, row);
    }
}

/// The element type of one side of a DMA.
fn side_dtype(ctx: &Ctx<'_, '_>, store: &TileStore<'_>, o: &DmaOperand) -> DType {
    match o {
        DmaOperand::Tile { region } => store.dtype(region.tile),
        DmaOperand::Hbm { access } => ctx.hbm[access.tensor.0 as usize].dtype,
    }
}

/// Executes a `dma_copy` with `reinterpret` (the copy that keeps a dtype view in step with the
/// memory it views): `src` is copied as it is into a scratch tile of its own dtype, each row's
/// bytes are read as `dst`'s dtype into a second scratch tile, and that is copied to `dst`.
/// Both copies are between equal dtypes, so no value changes on the way; the bytes are those
/// the values encode (a tile holds values, not bytes: an integer above 2²⁴ in magnitude is
/// not held exactly, as everywhere in the simulator).
pub(crate) fn dma_reinterpret<'a: 'p, 'p>(
    ctx: &Ctx<'a, '_>,
    store: &mut TileStore<'p>,
    dst: &DmaOperand,
    src: &DmaOperand,
    s: &mut Scratch,
) -> Result<(), ExecError> {
    let ([rows, src_cols], [dst_rows, dst_cols]) = (dma_shape(src), dma_shape(dst));
    let (from, to) = (side_dtype(ctx, store, src), side_dtype(ctx, store, dst));
    let row_bytes = src_cols * from.size_bytes();
    if rows != dst_rows || row_bytes != dst_cols * to.size_bytes() {
        return Err(ctx
            .err(format!(
                "a reinterpreting copy moves {rows} rows of {src_cols} {from:?} into \
                 {dst_rows} rows of {dst_cols} {to:?}: the rows and their bytes must match"
            ))
            .into());
    }
    let first = store.tile_count();
    let staged = store.push_scratch(rows, src_cols, from);
    let viewed = store.push_scratch(rows, dst_cols, to);
    let side = |tile, cols| DmaOperand::Tile {
        region: TileRegion::rect(tile, 0, rows, 0, cols),
    };
    let result = (|| {
        dma(ctx, store, &side(staged, src_cols), src, s)?;
        let mut bytes = vec![0u8; row_bytes];
        let staged_rows = TileRegion::rect(staged, 0, rows, 0, src_cols);
        let viewed_rows = TileRegion::rect(viewed, 0, rows, 0, dst_cols);
        for r in 0..rows {
            for (k, v) in store.row(&staged_rows, r)?.iter().enumerate() {
                from.write(&mut bytes, k, *v);
            }
            for (k, v) in store.row_mut(&viewed_rows, r)?.iter_mut().enumerate() {
                *v = to.read(&bytes, k);
            }
        }
        dma(ctx, store, dst, &side(viewed, dst_cols), s)
    })();
    store.drop_scratch(first);
    result
}

/// A DMA whose HBM side walks several free dims ([`HbmAccess::free_dims`]): row by row,
/// element by element, converting as every DMA does (after [`check_dma`]).
fn dma_walk(
    ctx: &Ctx<'_, '_>,
    store: &mut TileStore<'_>,
    dst: &DmaOperand,
    src: &DmaOperand,
) -> Result<(), ExecError> {
    let row_base = |a: &HbmAccess, r: usize| a.offset.eval(ctx.env) + r as i64 * a.p_stride;
    let mut vals = Vec::new();
    for r in 0..dma_shape(dst)[0] {
        vals.clear();
        match src {
            DmaOperand::Tile { region } => vals.extend_from_slice(store.row(region, r)?),
            DmaOperand::Hbm { access } => {
                let (buf, base) = (ctx.hbm[access.tensor.0 as usize], row_base(access, r));
                vals.extend(
                    access
                        .row_offsets()
                        .iter()
                        .map(|o| buf.read((base + o) as usize)),
                );
            }
        }
        match dst {
            DmaOperand::Tile { region } => {
                let dt = store.dtype(region.tile);
                round_into(store.row_mut(region, r)?, dt, |i| vals[i]);
            }
            DmaOperand::Hbm { access } => {
                let (buf, base) = (ctx.hbm[access.tensor.0 as usize], row_base(access, r));
                for (o, v) in access.row_offsets().iter().zip(&vals) {
                    buf.write((base + o) as usize, buf.dtype.round(*v));
                }
            }
        }
    }
    Ok(())
}
