//! Tensor-engine instructions and MX quantisation: transposes and matrix multiplications.

use super::*;

/// The instructions this module records, by `nisa` name.
pub(super) const RECORDERS: &[(&str, Recorder)] = &[
    ("nc_matmul", nc_matmul),
    ("quantize_mx", quantize_mx),
    ("nc_matmul_mx", nc_matmul_mx),
    ("nc_transpose", nc_transpose),
];

/// `nisa.nc_matmul`.
fn nc_matmul(tracer: &mut Tracer, a: &Args<'_>, file: &str, line: u32) -> PyResult<()> {
    let dst = a.tile("dst")?;
    let (stationary, moving) = (a.tile("stationary")?, a.tile("moving")?);
    let tiling = isa::MatmulTiling {
        tile_position: pair(a, "tile_position")?,
        tile_size: pair(a, "tile_size")?,
    };
    // NKI's `accumulate=None` accumulates when the destination was written before.
    let accumulate = a
        .opt_flag("accumulate")?
        .unwrap_or_else(|| tracer.written.contains(&dst.tile.0));
    a.finish()?;
    tracer.at(file, line, || {
        isa::nc_matmul_tiled(dst, (stationary, moving), tiling, accumulate)
    })
}

/// `nisa.quantize_mx`.
fn quantize_mx(tracer: &mut Tracer, a: &Args<'_>, file: &str, line: u32) -> PyResult<()> {
    let (dst, src) = (a.tile("dst")?, a.tile("src")?);
    let dst_scale = a.tile("dst_scale")?;
    a.finish()?;
    tracer.at(file, line, || isa::quantize_mx(dst, src, dst_scale))
}

/// `nisa.nc_matmul_mx`.
fn nc_matmul_mx(tracer: &mut Tracer, a: &Args<'_>, file: &str, line: u32) -> PyResult<()> {
    let dst = a.tile("dst")?;
    let (stationary, moving) = (a.tile("stationary")?, a.tile("moving")?);
    let s_scale = a.tile("stationary_scale")?;
    let m_scale = a.tile("moving_scale")?;
    let tiling = isa::MatmulTiling {
        tile_position: pair(a, "tile_position")?,
        tile_size: pair(a, "tile_size")?,
    };
    // As nc_matmul: `accumulate=None` accumulates when the destination was written.
    let accumulate = a
        .opt_flag("accumulate")?
        .unwrap_or_else(|| tracer.written.contains(&dst.tile.0));
    a.finish()?;
    tracer.at(file, line, || {
        isa::nc_matmul_mx(
            dst,
            (stationary, moving),
            (s_scale, m_scale),
            tiling,
            accumulate,
        )
    })
}

/// `nisa.nc_transpose`.
fn nc_transpose(tracer: &mut Tracer, a: &Args<'_>, file: &str, line: u32) -> PyResult<()> {
    engine(a, &["tensor"])?;
    let (dst, data) = (a.tile("dst")?, a.tile("data")?);
    a.finish()?;
    tracer.at(file, line, || isa::nc_transpose(dst, data))
}
