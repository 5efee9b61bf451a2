//! Tensor-engine instructions and MX quantisation: transposes and matrix multiplications.

use super::*;
use crate::frontend::written::Coverage;
use nki_core::Target;

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
        let target = tracer.recorder()?.target();
        let halves = double_row_halves(a, target, &tiling, (&stationary, &moving))?;
        a.finish()?;
        let [(s0, m0), (s1, m1)] = halves;
        return tracer.at(file, line, || {
            isa::nc_matmul_tiled(dst.clone(), (s0, m0), tiling.clone(), accumulate);
            isa::nc_matmul_tiled(dst, (s1, m1), tiling, true);
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

/// `perf_mode=double_row` (NeuronCore-v3+, the Trainium2 architecture guide's double FP8
/// mode): `stationary` `[K/2, 2, M]` and `moving` `[K/2, 2, N]` contract over their partitions
/// and their most major free dim of 2. Recorded as the two matmuls of that dim's halves into
/// one PSUM destination (the second accumulating): the same values, and twice the tensor
/// engine's time of the one double-row instruction in the cost estimate. Not with column
/// tiling or `is_transpose`, as the guide says.
fn double_row_halves(
    a: &Args<'_>,
    target: Target,
    tiling: &isa::MatmulTiling,
    (stationary, moving): (&TileRegion, &TileRegion),
) -> PyResult<[(TileRegion, TileRegion); 2]> {
    if target.nc_version() < nki_spec::NcVersion::Gen3 {
        return Err(a.value_error(format!(
            "perf_mode=double_row needs NeuronCore-v3 or newer, not {} ({})",
            target.name(),
            target.nc_version().name()
        )));
    }
    if matches!(tiling.tile_size.as_slice(), [_, columns] if *columns < 128) {
        return Err(a.value_error(
            "perf_mode=double_row cannot be combined with column tiling (tile_size=)".into(),
        ));
    }
    let mut halves = [
        (stationary.clone(), moving.clone()),
        (stationary.clone(), moving.clone()),
    ];
    for (name, region) in [("stationary", stationary), ("moving", moving)] {
        let dims = a.tile_dims(name)?;
        if dims.len() != 3 || dims[1] != 2 {
            return Err(a.value_error(format!(
                "perf_mode=double_row takes {name} as [K/2, 2, free] (its most major free dim \
                 holds the two halves of the contraction), got {dims:?}"
            )));
        }
        for (j, half) in major_halves(region).into_iter().enumerate() {
            match name {
                "stationary" => halves[j].0 = half,
                _ => halves[j].1 = half,
            }
        }
    }
    Ok(halves)
}

/// The two halves of a region whose most major free dim has 2 indices.
fn major_halves(region: &TileRegion) -> [TileRegion; 2] {
    match &region.pattern {
        None => {
            let nf = region.nf / 2;
            [0, 1].map(|j| {
                TileRegion::rect(region.tile, region.p0, region.np, region.f0 + j * nf, nf)
            })
        }
        Some(p) => [0, 1].map(|j| {
            TileRegion::strided(
                region.tile,
                (region.p0, region.np, p.partition_step),
                region.f0 + j * p.free[0].step,
                p.free[1..].to_vec(),
            )
        }),
    }
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
