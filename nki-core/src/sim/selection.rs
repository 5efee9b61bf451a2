//! Execution of the selection instructions: the vector engine's `max8`, `nc_find_index8` and
//! `nc_match_replace8` with their row arithmetic (the order values rank in, which values match,
//! which occurrence each of eight values takes), and GpSimd's `affine_select`.

use crate::ir::{BinOp, Op, TileRegion};
use crate::sim::exec::{Ctx, ExecError};
use crate::sim::rounding::{as_long_as, round_into, round_into_in_place};
use crate::sim::rows::{Scratch, rows1, rows2};
use crate::sim::store::TileStore;

/// The index written where a value has no (further) occurrence: uint32's all ones, as int32.
const NOT_FOUND: f32 = -1.0;

/// Whether `a` ranks above `b` for `max8`: NaN above every number, numbers by value (`-0.0`
/// and `0.0` rank together).
#[inline]
fn ranks_above(a: f32, b: f32) -> bool {
    (a.is_nan() && !b.is_nan()) || a > b
}

/// Whether `data` element `d` matches value `v`: equal in fp32, or both NaN.
#[inline]
fn matches(d: f32, v: f32) -> bool {
    d == v || (d.is_nan() && v.is_nan())
}

/// The eight largest values of `row` in descending order ([`ranks_above`]); equal values keep
/// their order in the row. A row shorter than eight (which tracing rejects) is padded with
/// `-inf`.
pub(crate) fn max8_row(row: &[f32]) -> [f32; 8] {
    let mut top = [f32::NEG_INFINITY; 8];
    let mut len = 0;
    for &v in row {
        if len == 8 && !ranks_above(v, top[7]) {
            continue;
        }
        // After every kept value that v does not rank above: ties stay in row order.
        let at = top[..len]
            .iter()
            .position(|&t| ranks_above(v, t))
            .unwrap_or(len);
        let end = len.min(7);
        top.copy_within(at..end, at + 1);
        top[at] = v;
        len = (len + 1).min(8);
    }
    top
}

/// `nc_find_index8` of one row: for each value, the index of its k-th occurrence in `data`
/// where it is the k-th repetition of that value in `vals`, or [`NOT_FOUND`].
pub(crate) fn find_index8_row(data: &[f32], vals: &[f32]) -> [f32; 8] {
    let mut out = [NOT_FOUND; 8];
    for (k, &v) in vals.iter().take(8).enumerate() {
        let repeat = vals[..k].iter().filter(|&&u| matches(u, v)).count();
        if let Some(i) = data
            .iter()
            .enumerate()
            .filter(|&(_, &d)| matches(d, v))
            .nth(repeat)
            .map(|(i, _)| i)
        {
            out[k] = i as f32;
        }
    }
    out
}

/// `nc_match_replace8` of one row: `out = data` with, for `vals[7]` down to `vals[0]`, the first
/// occurrence not replaced yet set to `imm`; returns where each value was replaced, or
/// [`NOT_FOUND`].
pub(crate) fn match_replace8_row(
    data: &[f32],
    vals: &[f32],
    imm: f32,
    out: &mut [f32],
) -> [f32; 8] {
    out.copy_from_slice(data);
    let mut replaced = [usize::MAX; 8];
    let mut idx = [NOT_FOUND; 8];
    for k in (0..vals.len().min(8)).rev() {
        let v = vals[k];
        let found = (0..data.len()).find(|&i| matches(data[i], v) && !replaced.contains(&i));
        if let Some(i) = found {
            out[i] = imm;
            replaced[k] = i;
            idx[k] = i as f32;
        }
    }
    idx
}

/// Executes `max8`.
pub(crate) fn max8(
    ctx: &Ctx<'_, '_>,
    store: &mut TileStore<'_>,
    s: &mut Scratch,
    dst: &TileRegion,
    src: &TileRegion,
) -> Result<(), ExecError> {
    let dt = store.dtype(dst.tile);
    rows1(
        store,
        dst,
        src,
        s,
        ctx.split,
        #[inline(always)]
        |_, out, x| {
            let top = max8_row(x);
            round_into(out, dt, |i| top[i]);
        },
    )?;
    Ok(())
}

/// Executes `nc_find_index8`.
pub(crate) fn find_index8(
    ctx: &Ctx<'_, '_>,
    store: &mut TileStore<'_>,
    s: &mut Scratch,
    (dst, data, vals): (&TileRegion, &TileRegion, &TileRegion),
) -> Result<(), ExecError> {
    let dt = store.dtype(dst.tile);
    rows2(
        store,
        dst,
        data,
        vals,
        s,
        ctx.split,
        #[inline(always)]
        |_, out, x, v| {
            let idx = find_index8_row(x, v);
            round_into(out, dt, |i| idx[i]);
        },
    )?;
    Ok(())
}

/// Executes `nc_match_replace8`.
pub(crate) fn match_replace8(
    ctx: &Ctx<'_, '_>,
    store: &mut TileStore<'_>,
    s: &mut Scratch,
    (dst, data, vals): (&TileRegion, &TileRegion, &TileRegion),
    imm: f32,
    dst_idx: Option<&TileRegion>,
) -> Result<(), ExecError> {
    let dt = store.dtype(dst.tile);
    let found = rows2(
        store,
        dst,
        data,
        vals,
        s,
        ctx.split,
        #[inline(always)]
        |_, out, x, v| {
            let idx = match_replace8_row(x, v, imm, out);
            round_into_in_place(out, dt);
            idx
        },
    )?;
    if let Some(res) = dst_idx {
        let dt = store.dtype(res.tile);
        for (r, idx) in found.iter().enumerate() {
            round_into(store.row_mut(res, r)?, dt, |i| idx[i]);
        }
    }
    Ok(())
}

/// Executes `affine_select`: the affine value of each element in int32 (wrapping, as `iota`'s;
/// its sign, all a comparison with 0 sees, survives the cast to fp32), `on_true` where the
/// comparison with 0 holds and `on_false` elsewhere, rounded to `dst`'s dtype.
pub(crate) fn affine_select(
    ctx: &Ctx<'_, '_>,
    store: &mut TileStore<'_>,
    s: &mut Scratch,
    op: &Op,
) -> Result<(), ExecError> {
    let Op::AffineSelect {
        dst,
        step,
        channel_multiplier,
        on_true,
        on_false,
        cmp,
        offset,
    } = op
    else {
        unreachable!("called for affine_select");
    };
    let dt = store.dtype(dst.tile);
    let (on_false, cmp, step) = (dt.round(*on_false), *cmp, *step);
    let compares = sign_test(cmp, 0.0, |_| 0, &mut []);
    rows1(
        store,
        dst,
        on_true,
        s,
        ctx.split,
        #[inline(always)]
        |r, out, x| {
            let base = offset.wrapping_add(channel_multiplier.wrapping_mul(r as i32));
            let value = |f: usize| base.wrapping_add(step.wrapping_mul(f as i32));
            let x = as_long_as(x, out);
            if compares {
                // A comparison with 0 sees only the value's sign, which the cast keeps: the kept
                // elements rounded as any write is, then an integer test per element.
                round_into(out, dt, |f| x[f]);
                sign_test(cmp, on_false, value, out);
            } else {
                for (f, o) in out.iter_mut().enumerate() {
                    *o = if cmp.apply(value(f) as f32, 0.0) != 0.0 {
                        dt.round(x[f])
                    } else {
                        on_false
                    };
                }
            }
        },
    )?;
    Ok(())
}

/// For a comparison operator `cmp`, whose `cmp(v as f32, 0.0)` sees only the int32 `v`'s sign
/// and whether it is zero (both survive the cast), writes `on_false` over each element `f` of
/// `out` whose `value(f)` fails the test, with integer compares, and is `true`; `false` (and
/// nothing written) for other operators. Inlined, so the loops compile into the caller's wide
/// build ([`crate::wide`]).
#[inline(always)]
fn sign_test(cmp: BinOp, on_false: f32, value: impl Fn(usize) -> i32, out: &mut [f32]) -> bool {
    #[inline(always)]
    fn fill(
        out: &mut [f32],
        on_false: f32,
        value: impl Fn(usize) -> i32,
        keep: impl Fn(i32) -> bool,
    ) {
        for (f, o) in out.iter_mut().enumerate() {
            if !keep(value(f)) {
                *o = on_false;
            }
        }
    }
    match cmp {
        BinOp::GreaterEqual => fill(out, on_false, value, |v| v >= 0),
        BinOp::Greater => fill(out, on_false, value, |v| v > 0),
        BinOp::LessEqual => fill(out, on_false, value, |v| v <= 0),
        BinOp::Less => fill(out, on_false, value, |v| v < 0),
        BinOp::Equal => fill(out, on_false, value, |v| v == 0),
        BinOp::NotEqual => fill(out, on_false, value, |v| v != 0),
        _ => return false,
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max8_ranks_nan_first_and_keeps_ties_in_row_order() {
        let row = [
            3.0,
            -0.0,
            f32::NAN,
            7.0,
            0.0,
            7.0,
            -1.0,
            f32::NEG_INFINITY,
            2.0,
            1.0,
        ];
        let top = max8_row(&row);
        assert!(top[0].is_nan());
        assert_eq!(&top[1..6], &[7.0, 7.0, 3.0, 2.0, 1.0]);
        // -0.0 came first in the row.
        assert_eq!(top[6].to_bits(), (-0.0f32).to_bits());
        assert_eq!(top[7].to_bits(), 0.0f32.to_bits());
    }

    #[test]
    fn duplicates_pair_with_occurrences_ascending_in_find_and_descending_in_replace() {
        // The docs' example.
        let data = [1.0, 2.0, 3.0, 4.0, 8.0, 8.0, 8.0, 8.0, 8.0, 8.0, 8.0];
        let vals = [3.0, 8.0, 8.0, 8.0, 8.0, 8.0, 8.0, 8.0];
        let mut out = [0.0; 11];
        let idx = match_replace8_row(&data, &vals, -1.0, &mut out);
        assert_eq!(idx, [2.0, 10.0, 9.0, 8.0, 7.0, 6.0, 5.0, 4.0]);
        assert_eq!(
            out,
            [
                1.0, 2.0, -1.0, 4.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0
            ]
        );
        assert_eq!(
            find_index8_row(&data, &vals),
            [2.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0]
        );
        // More repetitions than occurrences, and an absent value.
        let vals = [8.0, 8.0, 9.0, 1.0, 1.0, 2.0, 2.0, 2.0];
        let data = [8.0, 1.0, 2.0, 2.0, 0.0, 0.0, 0.0, 0.0];
        assert_eq!(
            find_index8_row(&data, &vals),
            [0.0, -1.0, -1.0, 1.0, -1.0, 2.0, 3.0, -1.0]
        );
        let mut out = [0.0; 8];
        let idx = match_replace8_row(&data, &vals, 8.0, &mut out);
        // vals[7] first: the 2s take positions 2, 3 from slot 7 down; replaced elements (now 8.0)
        // are not matched by the 8s.
        assert_eq!(idx, [-1.0, 0.0, -1.0, -1.0, 1.0, -1.0, 3.0, 2.0]);
        assert_eq!(out, [8.0, 8.0, 8.0, 8.0, 0.0, 0.0, 0.0, 0.0]);
    }
}
