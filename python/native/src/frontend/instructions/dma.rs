//! DMA instructions: `dma_copy`, `dma_transpose`.

use super::*;

/// The instructions this module records, by `nisa` name.
pub(super) const RECORDERS: &[(&str, Recorder)] =
    &[("dma_copy", dma_copy), ("dma_transpose", dma_transpose)];

/// `nisa.dma_copy`.
fn dma_copy(tracer: &mut Tracer, a: &Args<'_>, file: &str, line: u32) -> PyResult<()> {
    // Which engine triggers the transfer, how its descriptors are made and its queue
    // priority do not change the bytes a copy moves; the cost model does not tell them
    // apart yet.
    for unmodelled in ["priority", "dge_mode", "engine"] {
        a.value(unmodelled)?;
    }
    let oob_mode = a.variant("oob_mode")?;
    let args = isa::DmaCopyArgs {
        oob_mode: OobMode::from_nki_name(&oob_mode)
            .ok_or_else(|| a.unsupported(&format!("oob_mode=nisa.oob_mode.{oob_mode}")))?,
        reinterpret: false,
    };
    let dst = tracer.dma_arg(&a.tensor("dst")?)?;
    let src = tracer.dma_arg(&a.tensor("src")?)?;
    a.finish()?;
    tracer.at(file, line, || isa::dma_copy_with(dst, src, args))
}

/// `nisa.dma_transpose`.
fn dma_transpose(tracer: &mut Tracer, a: &Args<'_>, file: &str, line: u32) -> PyResult<()> {
    let dst = a.tile("dst")?;
    let src_value = a.tensor("src")?;
    let src = match tracer.dma_arg(&src_value)? {
        isa::DmaArg::Tile(r) => isa::TransposeSrc::tile(r, a.tile_dims("src")?),
        isa::DmaArg::Hbm(v) => v.into(),
    };
    let axes_value = a.value("axes")?;
    let axes: Option<Vec<usize>> = if axes_value.is_none() {
        None
    } else {
        Some(
            axes_value
                .extract()
                .map_err(|_| a.type_error("axes", "a tuple of ints", &axes_value))?,
        )
    };
    let priority = match a.opt_count("priority")? {
        None => None,
        Some(p) => Some(
            u8::try_from(p)
                .map_err(|_| a.value_error(format!("priority is {p}; DMA priorities are 0..=3")))?,
        ),
    };
    let dge_mode = a.variant("dge_mode")?;
    let oob_mode = a.variant("oob_mode")?;
    let args = isa::DmaTransposeArgs {
        axes,
        priority,
        dge_mode: DgeMode::from_nki_name(&dge_mode)
            .ok_or_else(|| a.unsupported(&format!("dge_mode=nisa.dge_mode.{dge_mode}")))?,
        oob_mode: OobMode::from_nki_name(&oob_mode)
            .ok_or_else(|| a.unsupported(&format!("oob_mode=nisa.oob_mode.{oob_mode}")))?,
    };
    a.finish()?;
    tracer.at(file, line, || isa::dma_transpose(dst, src, args))
}
