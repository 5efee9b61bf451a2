//! The random-number instructions: `rng` (random bits, vector engine or GpSimd), `rand2`
//! (uniform floats, vector engine, NeuronCore-v4+), `dropout` (vector engine), and the state
//! instructions `set_rng_seed`, `rand_set_state` and `rand_get_state`.
//!
//! Each engine keeps an XORWOW state per compute lane (partition): one generator of six uint32
//! words on GpSimd, four of six words each (24 words) on the vector engine. How the simulator
//! seeds, steps and reads those states is in [`crate::sim`]'s `random` module and
//! `docs/nki-frontend.md`. Operand shapes and dtypes are checked here; memories, engines per
//! target and availability by [`crate::validate`].

use super::{column_ok, same_shape};
use crate::dtype::DType;
use crate::ir::{ElementwiseEngine, Op, ScalarOperand, TileRegion};
use crate::lang::context::{Builder, with_builder};
use crate::loc::SourceLoc;

/// uint32 words of one lane's state on GpSimd: one XORWOW generator (five xorshift words, then
/// the Weyl counter).
pub const GPSIMD_STATE_WORDS: usize = 6;

/// uint32 words of one lane's state on the vector engine: four XORWOW generators of six words.
pub const VECTOR_STATE_WORDS: usize = 24;

/// The state words per lane `rand_set_state` / `rand_get_state` move on `engine`.
pub fn state_words(engine: ElementwiseEngine) -> usize {
    match engine {
        ElementwiseEngine::Vector => VECTOR_STATE_WORDS,
        ElementwiseEngine::GpSimd => GPSIMD_STATE_WORDS,
    }
}

/// The dtypes `rng` writes: the integer types (NKI 0.7's `nki.isa.rng`).
pub const RNG_DTYPES: [DType; 6] = [
    DType::I8,
    DType::I16,
    DType::I32,
    DType::U8,
    DType::U16,
    DType::U32,
];

/// The dtypes `rand2` writes (NKI 0.7's `nki.isa.rand2`).
pub const RAND2_DTYPES: [DType; 12] = [
    DType::F8E4M3,
    DType::F8E5M2,
    DType::F16,
    DType::BF16,
    DType::F32,
    DType::TF32,
    DType::I8,
    DType::I16,
    DType::I32,
    DType::U8,
    DType::U16,
    DType::U32,
];

fn dtype(b: &Builder, r: &TileRegion) -> Option<DType> {
    b.tiles.get(r.tile.0 as usize).map(|t| t.dtype)
}

fn names(dtypes: &[DType]) -> String {
    let v: Vec<&str> = dtypes.iter().map(|d| d.name()).collect();
    v.join(", ")
}

/// Whether `r` (operand `name` of `inst`) has one of `allowed`'s dtypes; fails otherwise.
fn dtype_in(
    b: &mut Builder,
    loc: SourceLoc,
    inst: &str,
    name: &str,
    r: &TileRegion,
    allowed: &[DType],
) -> bool {
    match dtype(b, r) {
        Some(dt) if !allowed.contains(&dt) => {
            b.fail(
                loc,
                format!("{inst}: {name} must be one of {}, got {dt}", names(allowed)),
            );
            false
        }
        _ => true,
    }
}

/// `nisa.rng(dst, engine=)`: 32 random bits per element of `dst` from `engine`'s XORWOW
/// generators, truncated to `dst`'s integer dtype (its least significant bits: uint8 keeps the
/// low byte, int8 reads it as two's complement). Partition `p` of `dst` draws from compute lane
/// `p` (the tile's partition), its elements in free order; on the vector engine element `f` of
/// a row draws from the lane's generator `f mod 4`. `dst` is an integer tile; GpSimd
/// (NeuronCore-v3+) cannot reach PSUM (checked by [`crate::validate`]).
#[track_caller]
pub fn rng(dst: impl Into<TileRegion>, engine: ElementwiseEngine) {
    let loc = SourceLoc::caller();
    let dst = dst.into();
    with_builder(|b| {
        if dtype_in(b, loc, "rng", "dst", &dst, &RNG_DTYPES) {
            b.push_op(Op::Rng { dst, engine }, loc);
        }
    });
}

/// Checks a `(np, 1)` float32 column or an immediate bound (`rand2`'s `min` / `max`).
fn fp32_scalar(
    b: &mut Builder,
    loc: SourceLoc,
    inst: &str,
    name: &str,
    s: &ScalarOperand,
    np: usize,
) -> bool {
    let ScalarOperand::Column { region } = s else {
        return true;
    };
    column_ok(b, loc, inst, name, region, np) && dtype_in(b, loc, inst, name, region, &[DType::F32])
}

/// `nisa.rand2(dst, min, max)` on the vector engine (NeuronCore-v4+): uniform fp32 values in
/// `[min, max)`, one draw of the lane's generators per element (as [`rng`]), written in `dst`'s
/// dtype. `min` and `max` are fp32 immediates or `(P, 1)` fp32 columns; immediates must satisfy
/// `min < max` (a column's values are checked when simulated). The bits become a float as the
/// simulator's `random` module documents: the top 24 bits scaled by 2^-24.
#[track_caller]
pub fn rand2(
    dst: impl Into<TileRegion>,
    min: impl Into<ScalarOperand>,
    max: impl Into<ScalarOperand>,
) {
    let loc = SourceLoc::caller();
    let (dst, min, max) = (dst.into(), min.into(), max.into());
    let inst = "rand2";
    with_builder(|b| {
        if !dtype_in(b, loc, inst, "dst", &dst, &RAND2_DTYPES)
            || !fp32_scalar(b, loc, inst, "min", &min, dst.np)
            || !fp32_scalar(b, loc, inst, "max", &max, dst.np)
        {
            return;
        }
        if let (ScalarOperand::Imm { value: lo }, ScalarOperand::Imm { value: hi }) = (&min, &max)
            && lo.partial_cmp(hi) != Some(std::cmp::Ordering::Less)
        {
            b.fail(
                loc,
                format!("{inst}: min must be below max, got min {lo} and max {hi}"),
            );
            return;
        }
        b.push_op(Op::Rand2 { dst, min, max }, loc);
    });
}

/// Checks a state tile: uint32, [`state_words`] elements per partition.
fn state_ok(
    b: &mut Builder,
    loc: SourceLoc,
    inst: &str,
    name: &str,
    r: &TileRegion,
    engine: ElementwiseEngine,
) -> bool {
    if !dtype_in(b, loc, inst, name, r, &[DType::U32]) {
        return false;
    }
    let words = state_words(engine);
    if r.nf != words {
        b.fail(
            loc,
            format!(
                "{inst}: {name} must hold {words} uint32 state words per partition on {} (XORWOW), \
                 got {}",
                engine.nki_name(),
                r.nf
            ),
        );
        return false;
    }
    true
}

/// `nisa.rand_set_state(src_seeds, engine=)` (NeuronCore-v3+; the vector engine NeuronCore-v4+):
/// partition `p` of the uint32 `src_seeds` becomes compute lane `p`'s XORWOW state on `engine`:
/// 6 words on GpSimd (five xorshift words, then the Weyl counter), 24 on the vector engine (its
/// four generators, one after another). Lanes `src_seeds` does not cover keep their state.
/// `src_seeds` must be in SBUF (checked by [`crate::validate`]).
#[track_caller]
pub fn rand_set_state(src_seeds: impl Into<TileRegion>, engine: ElementwiseEngine) {
    let loc = SourceLoc::caller();
    let src_seeds = src_seeds.into();
    with_builder(|b| {
        if state_ok(b, loc, "rand_set_state", "src_seeds", &src_seeds, engine) {
            b.push_op(Op::RandSetState { src_seeds, engine }, loc);
        }
    });
}

/// `nisa.rand_get_state(dst, engine=)` (NeuronCore-v3+; the vector engine NeuronCore-v4+): the
/// XORWOW state of compute lane `p` on `engine` into partition `p` of the uint32 `dst`, in
/// [`rand_set_state`]'s layout. Simulator tiles hold fp32 values, so a word of 2^24 or more is
/// written rounded to the nearest fp32 (a documented deviation: such a state does not survive a
/// round trip through a tile).
#[track_caller]
pub fn rand_get_state(dst: impl Into<TileRegion>, engine: ElementwiseEngine) {
    let loc = SourceLoc::caller();
    let dst = dst.into();
    with_builder(|b| {
        if state_ok(b, loc, "rand_get_state", "dst", &dst, engine) {
            b.push_op(Op::RandGetState { dst, engine }, loc);
        }
    });
}

/// `nisa.set_rng_seed(src_seeds)`: seeds every compute lane of the vector engine's generators
/// from the 32-bit value of the `[1, 1]` `src_seeds` (int32, uint32 or float32: an integer's
/// two's-complement bits, a float's bit pattern), expanded per lane as the simulator's `random`
/// module documents.
#[track_caller]
pub fn set_rng_seed(src_seeds: impl Into<TileRegion>) {
    let loc = SourceLoc::caller();
    let src_seeds = src_seeds.into();
    let inst = "set_rng_seed";
    with_builder(|b| {
        if src_seeds.shape() != [1, 1] {
            b.fail(
                loc,
                format!(
                    "{inst}: src_seeds must be a [1, 1] tile, got shape {:?}",
                    src_seeds.shape()
                ),
            );
            return;
        }
        if dtype_in(
            b,
            loc,
            inst,
            "src_seeds",
            &src_seeds,
            &[DType::I32, DType::U32, DType::F32],
        ) {
            b.push_op(Op::SetRngSeed { src_seeds }, loc);
        }
    });
}

/// `nisa.dropout(dst, data, prob)` on the vector engine: `dst = data` with each element replaced
/// by zero with probability `prob` (the kept values are not scaled), one draw of the lane's
/// vector generators per element (as [`rng`]): the element is dropped when the draw, as a float
/// in `[0, 1)`, is below `prob`, so 0.0 keeps every element and 1.0 drops every one. `prob` is
/// an immediate in `[0, 1]` or a `(P, 1)` float column (float32 when `data` is an integer tile);
/// `dst` has `data`'s shape and dtype.
#[track_caller]
pub fn dropout(
    dst: impl Into<TileRegion>,
    data: impl Into<TileRegion>,
    prob: impl Into<ScalarOperand>,
) {
    let loc = SourceLoc::caller();
    let (dst, data, prob) = (dst.into(), data.into(), prob.into());
    let inst = "dropout";
    with_builder(|b| {
        if !same_shape(b, loc, inst, &[("dst", &dst), ("data", &data)]) {
            return;
        }
        let (d, x) = (dtype(b, &dst), dtype(b, &data));
        if let (Some(d), Some(x)) = (d, x)
            && d != x
        {
            b.fail(
                loc,
                format!("{inst}: dst is {d} but data is {x}; they must share one dtype"),
            );
            return;
        }
        match &prob {
            ScalarOperand::Imm { value } if !(0.0..=1.0).contains(value) => {
                b.fail(
                    loc,
                    format!("{inst}: prob must be a probability in [0, 1], got {value}"),
                );
                return;
            }
            ScalarOperand::Imm { .. } => {}
            ScalarOperand::Column { region } => {
                if !column_ok(b, loc, inst, "prob", region, data.np) {
                    return;
                }
                let float = x.is_none_or(|x| x.is_float());
                let p = dtype(b, region);
                let ok = match p {
                    Some(p) if float => p.is_float(),
                    Some(p) => p == DType::F32,
                    None => true,
                };
                if !ok {
                    let want = if float {
                        "a float tile"
                    } else {
                        "float32 (data is an integer tile)"
                    };
                    b.fail(
                        loc,
                        format!(
                            "{inst}: prob must be {want}, got {}",
                            p.map_or("?", DType::name)
                        ),
                    );
                    return;
                }
            }
        }
        b.push_op(Op::Dropout { dst, data, prob }, loc);
    });
}
