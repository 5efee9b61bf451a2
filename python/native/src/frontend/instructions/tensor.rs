//! Tensor-engine instructions and MX quantisation: transposes and matrix multiplications.

use super::*;
use crate::frontend::written::Coverage;

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
    let accumulate = accumulate(tracer, a, &dst)?;
    let is_transpose = a.flag("is_transpose")?;
    if a.variant("perf_mode")? == "double_row" {
        if is_transpose {
            return Err(a.value_error(
                "perf_mode=double_row cannot be combined with is_transpose=True".into(),
            ));
        }
        for name in ["stationary", "moving"] {
            let dims = a.tile_dims(name)?;
            if dims.len() != 3 || dims[1] != 2 {
                return Err(a.value_error(format!(
                    "perf_mode=double_row takes {name} as [K/2, 2, free] (its most major free dim \
                     holds the two halves of the contraction), got {dims:?}"
                )));
            }
        }
        a.finish()?;
        return tracer.at(file, line, || {
            isa::nc_matmul_double_row(dst, (stationary, moving), tiling, accumulate)
        });
    }
    a.finish()?;
    tracer.at(file, line, || {
        if is_transpose {
            isa::nc_matmul_is_transpose(dst, (stationary, moving), tiling, accumulate)
        } else {
            isa::nc_matmul_tiled(dst, (stationary, moving), tiling, accumulate)
        }
    })
}

/// A matmul's `accumulate=`: as passed; for `None`, NKI's inference per PSUM location (the
/// first write overwrites, later ones accumulate): `False` where no element of `dst` was
/// written, `True` where every element was. A destination partly written is a `ValueError`:
/// one instruction cannot do both, so the kernel must say which it means.
fn accumulate(tracer: &Tracer, a: &Args<'_>, dst: &TileRegion) -> PyResult<bool> {
    if let Some(flag) = a.opt_flag("accumulate")? {
        return Ok(flag);
    }
    match tracer.written.coverage(dst) {
        Coverage::Nothing => Ok(false),
        Coverage::All => Ok(true),
        Coverage::Part { written, of } => Err(a.value_error(format!(
            "accumulate=None, but {written} of the {of} PSUM locations of dst were written \
             before and the others were not (NKI infers the flag per location: the first write \
             overwrites, later ones accumulate); pass accumulate= explicitly"
        ))),
    }
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
    let accumulate = accumulate(tracer, a, &dst)?;
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
    let on = match engine(a, &["tensor", "vector"])? {
        "vector" => TransposeEngine::Vector,
        _ => TransposeEngine::Tensor,
    };
    let (dst, data) = (a.tile("dst")?, a.tile("data")?);
    a.finish()?;
    tracer.at(file, line, || isa::nc_transpose_on(dst, data, on))
}
