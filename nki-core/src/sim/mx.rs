//! Execution of the MX instructions, `quantize_mx` and `nc_matmul_mx`, bit-exactly as their
//! NKI 0.7 docstrings define them (the layout is [`crate::isa`]'s `mx` module's; packed
//! elements are stored as their bit patterns, [`crate::dtype::packed`]).
//!
//! Where the docs are silent the simulator decides: a group holding an infinity or NaN gets
//! the NaN scale (0xFF) and NaN values; a uint8 scale of 255 is NaN as in E8M0; products are
//! exact and summed in f64, rounded once to fp32 (then to the destination's dtype after any
//! accumulation, as `nc_matmul`).

use crate::dtype::DType;
use crate::dtype::codec::decode_e8m0;
use crate::dtype::packed::{LANES, Lane, pack, unpack};
use crate::ir::{Op, TileRegion};
use crate::isa::{MX_GROUP_PARTITIONS, mx_scale_row};
use crate::sim::exec::{Ctx, ExecError};
use crate::sim::store::TileStore;

/// The E8M0 byte of `quantize_mx`'s scale for a group whose largest magnitude is `amax`
/// (finite): `⌊log₂ amax⌋ − (E_max − 1) + 127`, clamped to E8M0's `0..=254`; 0 for zero.
pub(crate) fn quantize_scale_byte(lane: Lane, amax: f32) -> u8 {
    if amax == 0.0 {
        return 0;
    }
    // ⌊log₂ a⌋ from the bits: the exponent of a normal value, and below the smallest normal
    // the position of the highest mantissa bit.
    let bits = amax.to_bits();
    let exp = ((bits >> 23) & 0xFF) as i32;
    let floor_log2 = if exp == 0 {
        let m = bits & 0x007F_FFFF;
        -127 - (m.leading_zeros() as i32 - 9)
    } else {
        exp - 127
    };
    (floor_log2 - (lane.max_exponent() - 1) + 127).clamp(0, 254) as u8
}

fn lane_of(ctx: &Ctx<'_, '_>, dt: DType, role: &str) -> Result<Lane, ExecError> {
    dt.lane().ok_or_else(|| {
        ctx.err(format!("{role} is {dt}, not a packed MX dtype"))
            .into()
    })
}

fn scale_rows_ok(
    ctx: &Ctx<'_, '_>,
    scale: &TileRegion,
    data: &TileRegion,
    role: &str,
) -> Result<(), ExecError> {
    let groups = data.np.div_ceil(MX_GROUP_PARTITIONS);
    if groups > 0 && mx_scale_row(groups - 1) >= scale.np || scale.nf < data.nf {
        return Err(ctx
            .err(format!("{role} does not hold the scales of {data:?}"))
            .into());
    }
    Ok(())
}

/// Executes `quantize_mx`.
pub(crate) fn quantize_mx(
    ctx: &Ctx<'_, '_>,
    store: &mut TileStore<'_>,
    op: &Op,
) -> Result<(), ExecError> {
    let Op::QuantizeMx {
        dst,
        src,
        dst_scale,
    } = op
    else {
        unreachable!("quantize_mx called with {}", op.name())
    };
    let lane = lane_of(ctx, store.dtype(dst.tile), "dst")?;
    scale_rows_ok(ctx, dst_scale, dst, "dst_scale")?;
    let scale_dt = store.dtype(dst_scale.tile);
    let (np, nf) = (dst.np, dst.nf);
    let mut values = Vec::with_capacity(np * nf * LANES);
    for r in 0..np {
        values.extend_from_slice(&store.row(src, r)?[..nf * LANES]);
    }
    let mut out = vec![0f32; np * nf];
    let groups = np.div_ceil(MX_GROUP_PARTITIONS);
    let mut scales = vec![0f32; groups * nf];
    for g in 0..groups {
        let rows = g * MX_GROUP_PARTITIONS..((g + 1) * MX_GROUP_PARTITIONS).min(np);
        for j in 0..nf {
            let group = || {
                rows.clone()
                    .flat_map(move |r| (0..LANES).map(move |k| (r, r * nf * LANES + j * LANES + k)))
            };
            let finite = group().all(|(_, i)| values[i].is_finite());
            let amax = group().fold(0f32, |m, (_, i)| m.max(values[i].abs()));
            let byte = if finite {
                quantize_scale_byte(lane, amax)
            } else {
                0xFF
            };
            // X is a power of two within fp32's range, so v / X is exact before the lane
            // rounding.
            let x = decode_e8m0(byte);
            for r in rows.clone() {
                let base = r * nf * LANES + j * LANES;
                let lanes: [f32; LANES] = std::array::from_fn(|k| values[base + k] / x);
                out[r * nf + j] = pack(lane, lanes);
            }
            scales[g * nf + j] = match scale_dt {
                DType::F8E8M0 => decode_e8m0(byte),
                dt => dt.round(byte as f32),
            };
        }
    }
    for r in 0..np {
        store
            .row_mut(dst, r)?
            .copy_from_slice(&out[r * nf..(r + 1) * nf]);
    }
    for g in 0..groups {
        let row = store.row_mut(dst_scale, mx_scale_row(g))?;
        row[..nf].copy_from_slice(&scales[g * nf..(g + 1) * nf]);
    }
    Ok(())
}

/// The factor a stored scale stands for: an E8M0 tile holds it already; a uint8 tile holds
/// the biased exponent `b`, the factor `2^(b − 127)` (255 is NaN, as in E8M0).
fn scale_factor(dt: DType, v: f32) -> f64 {
    match dt {
        DType::F8E8M0 => v as f64,
        _ if v == 255.0 => f64::NAN,
        _ => (v as f64 - 127.0).exp2(),
    }
}

/// One operand's dequantised values `[K, F, 4]` (lane values times their group's scale).
fn dequantised(
    ctx: &Ctx<'_, '_>,
    store: &TileStore<'_>,
    data: &TileRegion,
    scale: &TileRegion,
    role: &str,
) -> Result<Vec<f64>, ExecError> {
    let lane = lane_of(ctx, store.dtype(data.tile), role)?;
    scale_rows_ok(ctx, scale, data, &format!("{role}_scale"))?;
    let scale_dt = store.dtype(scale.tile);
    let mut out = Vec::with_capacity(data.np * data.nf * LANES);
    for k in 0..data.np {
        let scales = store.row(scale, mx_scale_row(k / MX_GROUP_PARTITIONS))?;
        for (j, e) in store.row(data, k)?.iter().enumerate() {
            let factor = scale_factor(scale_dt, scales[j]);
            out.extend(unpack(lane, *e).map(|v| v as f64 * factor));
        }
    }
    Ok(out)
}

/// Executes `nc_matmul_mx`.
pub(crate) fn nc_matmul_mx(
    ctx: &Ctx<'_, '_>,
    store: &mut TileStore<'_>,
    op: &Op,
) -> Result<(), ExecError> {
    let Op::NcMatmulMx {
        dst,
        stationary,
        moving,
        stationary_scale,
        moving_scale,
        accumulate,
        ..
    } = op
    else {
        unreachable!("nc_matmul_mx called with {}", op.name())
    };
    let s = dequantised(ctx, store, stationary, stationary_scale, "stationary")?;
    let m = dequantised(ctx, store, moving, moving_scale, "moving")?;
    let (kn, mn, nn) = (stationary.np, stationary.nf, moving.nf);
    let dt = store.dtype(dst.tile);
    for i in 0..mn {
        let mut row = vec![0f32; nn];
        for (j, out) in row.iter_mut().enumerate() {
            let mut sum = 0f64;
            for k in 0..kn {
                let (a, b) = (
                    &s[(k * mn + i) * LANES..][..LANES],
                    &m[(k * nn + j) * LANES..][..LANES],
                );
                sum += a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
            }
            *out = sum as f32;
        }
        let d = store.row_mut(dst, i)?;
        for (o, v) in d.iter_mut().zip(row) {
            let total = if *accumulate { *o + v } else { v };
            *o = dt.round(total);
        }
    }
    Ok(())
}
