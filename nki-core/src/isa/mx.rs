//! The MX (microscaling) instructions of NeuronCore-v4: the vector engine's `quantize_mx` and
//! the tensor engine's `nc_matmul_mx`, and the layout they share.
//!
//! MX data is packed (`float8_e5m2_x4`, `float8_e4m3fn_x4`, `float4_e2m1fn_x4`: four values
//! per element, [`crate::dtype::packed`]); a scaling group is 8 partitions × 1 packed element
//! (its 4 lanes), 32 values sharing one E8M0 scale. The scales of a `[P, F]` packed region sit
//! in a `[≥ P/8, F]` region: group `g` (partitions `8g..8g+8`) at row [`mx_scale_row`]`(g)`,
//! the first four rows of each 32-partition quadrant (the quadrant of its data), the rest
//! unused, so the scales of up to four instructions can share a tile at row offsets 0, 4, 8
//! and 12 ([`MX_SCALE_OFFSETS`]).

use crate::ir::{Op, TileRegion};
use crate::isa::MatmulTiling;
use crate::lang::context::{Builder, with_builder};
use crate::loc::SourceLoc;

/// Partitions of one MX scaling group.
pub const MX_GROUP_PARTITIONS: usize = 8;

/// The partition offsets within a quadrant where a scale region may start.
pub const MX_SCALE_OFFSETS: [usize; 4] = [0, 4, 8, 12];

/// The row of a scale region holding scaling group `group`'s scales: `32·(g/4) + g%4`.
pub const fn mx_scale_row(group: usize) -> usize {
    32 * (group / 4) + group % 4
}

/// The partitions a scale region needs for `partitions` data partitions: up to the last
/// group's row (`P/8` for `P ≤ 32`, `32·(P/32 − 1) + 4` beyond).
pub const fn mx_scale_partitions(partitions: usize) -> usize {
    let groups = partitions.div_ceil(MX_GROUP_PARTITIONS);
    if groups == 0 {
        0
    } else {
        mx_scale_row(groups - 1) + 1
    }
}

fn scale_ok(
    b: &mut Builder,
    loc: SourceLoc,
    inst: &str,
    (name, scale): (&str, &TileRegion),
    (data_name, data): (&str, &TileRegion),
) -> bool {
    let rows = mx_scale_partitions(data.np);
    if scale.nf != data.nf {
        b.fail(
            loc,
            format!(
                "{inst}: {name} has {} elements per partition but {data_name} has {}; each \
                 packed element has one scale per group of {MX_GROUP_PARTITIONS} partitions",
                scale.nf, data.nf
            ),
        );
        return false;
    }
    if scale.np < rows {
        b.fail(
            loc,
            format!(
                "{inst}: {name} has {} partitions but {data_name}'s {} partitions need {rows}: \
                 the scales of group g (partitions 8g..8g+8) sit at row 32·(g/4) + g%4",
                scale.np, data.np
            ),
        );
        return false;
    }
    true
}

/// `nisa.quantize_mx(dst, src, dst_scale)`: on the vector engine, MX quantisation of the
/// fp16/bf16 `src` `[P, 4F]` (already in the MX layout: each 4 consecutive free elements are
/// one packed element's lanes) into the packed fp8 `dst` `[P, F]` and the scales `dst_scale`
/// (`[≥ P/8, F]`, laid out as the module says). For each group of 32 values with largest
/// magnitude `a`, the scale is `X = 2^(⌊log₂ a⌋ − (E_max − 1))` (`E_max` 8 for e4m3fn, 15
/// for e5m2; `2^-127` for an all-zero group) and each value becomes `v / X` rounded to the
/// fp8 format. Checked here: the shapes; dtypes, memories, partition counts and the scale
/// offset by [`crate::validate`].
#[track_caller]
pub fn quantize_mx(
    dst: impl Into<TileRegion>,
    src: impl Into<TileRegion>,
    dst_scale: impl Into<TileRegion>,
) {
    let loc = SourceLoc::caller();
    let (dst, src, dst_scale) = (dst.into(), src.into(), dst_scale.into());
    let inst = "quantize_mx";
    with_builder(|b| {
        if dst.np != src.np || src.nf != 4 * dst.nf {
            return b.fail(
                loc,
                format!(
                    "{inst}: src has shape {:?}, so dst must be [{}, {}] (four values per packed \
                     element), got {:?}",
                    src.shape(),
                    src.np,
                    src.nf as f64 / 4.0,
                    dst.shape()
                ),
            );
        }
        if scale_ok(b, loc, inst, ("dst_scale", &dst_scale), ("dst", &dst)) {
            b.push_op(
                Op::QuantizeMx {
                    dst,
                    src,
                    dst_scale,
                },
                loc,
            );
        }
    });
}

/// `nisa.nc_matmul_mx(dst, stationary, moving, stationary_scale, moving_scale, tile_position,
/// tile_size, accumulate)`: on the tensor engine, `dst[m, n] (+)= Σ_k Σ_lane S[k, m]_lane ·
/// 2^(s_scale − 127) · M[k, n]_lane · 2^(m_scale − 127)` for packed `stationary` `[K, M]` and
/// `moving` `[K, N]` (any mix of the three packed dtypes) with their scales (laid out as
/// [`quantize_mx`] writes them), into `dst` `[M, N]` in PSUM, accumulated in fp32. Checked
/// here: the shapes and that the tiling is given whole; dtypes, memories, sizes and tiling
/// values by [`crate::validate`].
#[track_caller]
pub fn nc_matmul_mx(
    dst: impl Into<TileRegion>,
    (stationary, moving): (impl Into<TileRegion>, impl Into<TileRegion>),
    (stationary_scale, moving_scale): (impl Into<TileRegion>, impl Into<TileRegion>),
    tiling: MatmulTiling,
    accumulate: bool,
) {
    let loc = SourceLoc::caller();
    let dst = dst.into();
    let (stationary, moving) = (stationary.into(), moving.into());
    let (stationary_scale, moving_scale) = (stationary_scale.into(), moving_scale.into());
    let inst = "nc_matmul_mx";
    with_builder(|b| {
        let (k1, m, k2, n) = (stationary.np, stationary.nf, moving.np, moving.nf);
        if k1 != k2 {
            return b.fail(
                loc,
                format!("{inst}: stationary has {k1} partitions (K) but moving has {k2}"),
            );
        }
        if dst.shape() != [m, n] {
            return b.fail(
                loc,
                format!(
                    "{inst}: dst has shape {:?} but stationaryᵀ·moving is [{m}, {n}]",
                    dst.shape()
                ),
            );
        }
        if let Some(message) = tiling.given_whole(inst) {
            return b.fail(loc, message);
        }
        if !scale_ok(
            b,
            loc,
            inst,
            ("stationary_scale", &stationary_scale),
            ("stationary", &stationary),
        ) || !scale_ok(
            b,
            loc,
            inst,
            ("moving_scale", &moving_scale),
            ("moving", &moving),
        ) {
            return;
        }
        b.push_op(
            Op::NcMatmulMx {
                dst,
                stationary,
                moving,
                stationary_scale,
                moving_scale,
                tile_position: tiling.tile_position,
                tile_size: tiling.tile_size,
                accumulate,
            },
            loc,
        );
    });
}
