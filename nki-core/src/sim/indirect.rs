//! DMAs with a runtime offset (an HBM side whose access carries a
//! [`crate::ir::DynamicOffset`]: NKI's `scalar_offset=` / `vector_offset=`). When the DMA runs,
//! each row's offset is resolved from the index tile (an integer value, else a simulation
//! error), and the row moves as a static one-row DMA, with that DMA's bounds, read-only and
//! dtype rules: an index that sends a row outside its tensor is a simulation error naming the
//! elements, unless the copy says `oob_mode=nisa.oob_mode.skip`: then that row is not
//! transferred (its destination row keeps what it held), as the `dma_copy` docs describe. A
//! register offset (`scalar_offset=` a `VirtualRegister`) is read from the register file the
//! same way. Rows move in order.

use crate::NkiError;
use crate::ir::{DmaOperand, DynamicOffset, HbmAccess, OobMode, RegisterId, TileRegion};
use crate::sim::dma::{check_shapes, dma, dma_shape, in_bounds};
use crate::sim::exec::{Ctx, ExecError};
use crate::sim::rows::Scratch;
use crate::sim::store::TileStore;

/// Whether either side of a DMA has a runtime offset.
pub(crate) fn is_dynamic(dst: &DmaOperand, src: &DmaOperand) -> bool {
    [dst, src]
        .iter()
        .any(|o| matches!(o, DmaOperand::Hbm { access } if access.dynamic.is_some()))
}

/// Runs a DMA with a runtime offset row by row (see the module doc).
pub(crate) fn dma_rows<'a: 'p, 'p>(
    ctx: &Ctx<'a, '_>,
    store: &mut TileStore<'p>,
    dst: &DmaOperand,
    src: &DmaOperand,
    oob_mode: OobMode,
    s: &mut Scratch,
) -> Result<(), ExecError> {
    check_shapes(ctx, dst, src)?;
    for r in 0..dma_shape(dst)[0] {
        let d = row(ctx, store, dst, r)?;
        let sr = row(ctx, store, src, r)?;
        if oob_mode == OobMode::Skip
            && (dynamic_outside(ctx, dst, &d) || dynamic_outside(ctx, src, &sr))
        {
            continue;
        }
        dma(ctx, store, &d, &sr, s)?;
    }
    Ok(())
}

/// Whether `side` has a runtime offset that puts its row `row` outside its tensor.
fn dynamic_outside(ctx: &Ctx<'_, '_>, side: &DmaOperand, row: &DmaOperand) -> bool {
    match (side, row) {
        (DmaOperand::Hbm { access }, DmaOperand::Hbm { access: at }) => {
            access.dynamic.is_some() && !in_bounds(ctx, at)
        }
        _ => false,
    }
}

/// Row `r` of one side as a static one-row operand.
pub(crate) fn row(
    ctx: &Ctx<'_, '_>,
    store: &TileStore<'_>,
    side: &DmaOperand,
    r: usize,
) -> Result<DmaOperand, ExecError> {
    Ok(match side {
        // Strided tile sides were gathered into rectangles before the DMA ran (sim/strided.rs).
        DmaOperand::Tile { region } => DmaOperand::Tile {
            region: TileRegion::rect(region.tile, region.p0 + r, 1, region.f0, region.nf),
        },
        DmaOperand::Hbm { access } => {
            let rows = r as i64 * access.p_stride;
            let shift = match access.dynamic.as_deref() {
                None => rows,
                Some(DynamicOffset::Scalar { index, scale }) => {
                    index_value(ctx, store, index, 0)?.saturating_mul(*scale) + rows
                }
                Some(DynamicOffset::Vector { index, scale }) => {
                    index_value(ctx, store, index, r)?.saturating_mul(*scale)
                }
                Some(DynamicOffset::Register { reg, scale }) => {
                    register_value(ctx, *reg)?.saturating_mul(*scale) + rows
                }
            };
            DmaOperand::Hbm {
                access: HbmAccess {
                    offset: access.offset.clone() + shift,
                    np: 1,
                    dynamic: None,
                    // The row keeps its walk: several free dims when the pattern has them.
                    ..access.clone()
                },
            }
        }
    })
}

/// The integer index row `r` of `index` holds.
fn index_value(
    ctx: &Ctx<'_, '_>,
    store: &TileStore<'_>,
    index: &TileRegion,
    r: usize,
) -> Result<i64, ExecError> {
    let v = store.row(index, r)?[0];
    if !v.is_finite() || v.fract() != 0.0 {
        return Err(ctx
            .err(format!(
                "the runtime offset in row {r} of index tile t{} is {v}, not an integer",
                index.tile.0
            ))
            .into());
    }
    Ok(v as i64)
}

/// The value register `reg` holds.
fn register_value(ctx: &Ctx<'_, '_>, reg: RegisterId) -> Result<i64, ExecError> {
    let registers = ctx.registers.ok_or_else(|| {
        NkiError::Internal("a scalar_offset register read without the register file".into())
    })?;
    let value = crate::sim::register::read(registers, reg, || {
        ctx.err(format!(
            "scalar_offset register r{} is read before anything wrote it",
            reg.0
        ))
    })?;
    Ok(i64::from(value))
}
