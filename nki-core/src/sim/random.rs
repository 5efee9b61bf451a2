//! Execution of the random-number instructions (`rng`, `rand2`, `dropout`, `set_rng_seed`,
//! `rand_set_state`, `rand_get_state`) on the engines' XORWOW states.
//!
//! **The generator.** XORWOW (Marsaglia, 2003): five xorshift words `v[0..5]` and a Weyl counter
//! `d`; one step computes `t = v[0] ^ (v[0] >> 2)`, shifts `v[1..5]` down into `v[0..4]`, sets
//! `v[4] = (v[4] ^ (v[4] << 4)) ^ (t ^ (t << 1))` (the old `v[4]`), adds 362437 to `d` and
//! returns `d + v[4]` (wrapping). A state's six uint32 words, as `rand_set_state` /
//! `rand_get_state` lay them out, are `v[0..5]` then `d`.
//!
//! **Engines and lanes.** Each engine has one state per compute lane; lane `p` serves partition
//! `p` of a tile (the partition within the tile, whatever region an instruction names). GpSimd's
//! lane holds one generator (6 words); the vector engine's holds four (24 words, generator `g` at
//! words `6g..6g + 6`): element `f` of an instruction's row draws from generator `f mod 4`, so
//! every instruction starts at generator 0. Elements of a row draw in free order. On
//! NeuronCore-v2/v3 the vector engine's hardware generator is not XORWOW (NKI documents an LFSR);
//! the simulator runs XORWOW on every target (a documented deviation: same determinism, other
//! bits).
//!
//! **Seeding.** [`expand`] turns a 32-bit seed into each lane's words: SplitMix64 started at
//! `seed << 32 | engine << 16 | lane` (engine 0 the vector engine, 1 GpSimd), each word the high
//! half of one SplitMix64 output. `set_rng_seed(s)` gives every vector lane `expand(s, 0, lane)`.
//! Before any seeding, every simulation starts from [`DEFAULT_SEED`]: the vector engine as
//! `set_rng_seed(0)` leaves it, GpSimd with `expand(0, 1, lane)`.
//!
//! **Bits to values.** `rng` keeps the low bits of each 32-bit draw (uint8 the low byte, int8 the
//! same byte read as two's complement, 16 bits for uint16/int16). A draw becomes a float in
//! `[0, 1)` as `(bits >> 8) · 2^-24` (exact in fp32): `rand2` writes `min + (max − min) · u`,
//! computed in fp32 and held below `max` (a value fp32 rounding lifts to `max` becomes the
//! largest float below it), then rounded to `dst`'s dtype (which may round up to `max`);
//! `dropout` zeroes an element when `u < prob`.
//!
//! **The fp32 limitation.** Simulator tiles hold fp32 values, so integers are exact only up to
//! 2^24: `rng` into an int32 / uint32 tile would lose low bits, and is a simulation error (use
//! uint16 or uint8 and combine); `rand_get_state` writes each word rounded to the nearest fp32
//! (words below 2^24 exactly); seeds and state words read from tiles are the values the tiles
//! hold.
//!
//! **Order.** The states make these instructions order-dependent: they run in the program order
//! of a sequential execution of the loop nest. Loops whose bodies contain one run sequentially
//! ([`crate::sim::parallel_loops`]), and they are never banded.

use super::exec::{Ctx, ExecError};
use super::rounding::column_values;
use super::store::TileStore;
use crate::dtype::DType;
use crate::ir::{ElementwiseEngine, Op, TileRegion};
use crate::isa::state_words;
use crate::target::PMAX;
use std::sync::Mutex;

/// The seed both engines' states start from, before any `set_rng_seed` / `rand_set_state`.
pub const DEFAULT_SEED: u32 = 0;

/// Vector-engine generators per compute lane.
const VECTOR_GENERATORS: usize = 4;

/// One XORWOW generator: five xorshift words and the Weyl counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Xorwow {
    v: [u32; 5],
    d: u32,
}

impl Xorwow {
    /// The generator whose six state words are `w` (`v[0..5]`, then `d`).
    fn from_words(w: &[u32]) -> Xorwow {
        Xorwow {
            v: [w[0], w[1], w[2], w[3], w[4]],
            d: w[5],
        }
    }

    /// Its six state words.
    fn words(&self) -> [u32; 6] {
        let v = self.v;
        [v[0], v[1], v[2], v[3], v[4], self.d]
    }

    /// The next 32 random bits.
    fn next_bits(&mut self) -> u32 {
        let t = self.v[0] ^ (self.v[0] >> 2);
        let last = self.v[4];
        self.v.copy_within(1..5, 0);
        self.v[4] = (last ^ (last << 4)) ^ (t ^ (t << 1));
        self.d = self.d.wrapping_add(362_437);
        self.d.wrapping_add(self.v[4])
    }
}

/// The state words of lane `lane` of an engine (`engine` 0: vector, 1: GpSimd) seeded with
/// `seed`: SplitMix64 from `seed << 32 | engine << 16 | lane`, each word the high half of one
/// output.
pub fn expand(seed: u32, engine: u32, lane: usize, words: &mut [u32]) {
    let mut z = (u64::from(seed) << 32) | (u64::from(engine) << 16) | lane as u64;
    for w in words {
        z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut x = z;
        x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        x ^= x >> 31;
        *w = (x >> 32) as u32;
    }
}

fn engine_tag(engine: ElementwiseEngine) -> u32 {
    match engine {
        ElementwiseEngine::Vector => 0,
        ElementwiseEngine::GpSimd => 1,
    }
}

/// Both engines' states, one per compute lane.
#[derive(Clone, Debug)]
pub(crate) struct PrngState {
    vector: Vec<[Xorwow; VECTOR_GENERATORS]>,
    gpsimd: Vec<Xorwow>,
}

impl PrngState {
    /// No generators, for a program with no random-number instruction (which is all that reads
    /// them): the default state takes microseconds to set up.
    pub(crate) fn unused() -> Self {
        PrngState {
            vector: Vec::new(),
            gpsimd: Vec::new(),
        }
    }
}

impl Default for PrngState {
    fn default() -> Self {
        let mut s = PrngState {
            vector: vec![[Xorwow { v: [0; 5], d: 0 }; VECTOR_GENERATORS]; PMAX],
            gpsimd: vec![Xorwow { v: [0; 5], d: 0 }; PMAX],
        };
        for lane in 0..PMAX {
            s.set_lane(
                ElementwiseEngine::Vector,
                lane,
                &seeded(DEFAULT_SEED, 0, lane),
            );
            s.set_lane(
                ElementwiseEngine::GpSimd,
                lane,
                &seeded(DEFAULT_SEED, 1, lane),
            );
        }
        s
    }
}

fn seeded(seed: u32, engine: u32, lane: usize) -> Vec<u32> {
    let mut w = vec![0; VECTOR_GENERATORS * 6];
    expand(seed, engine, lane, &mut w);
    w
}

impl PrngState {
    /// Lane `lane`'s words on `engine` become `w` (6 or 24 of them, as [`state_words`]; the
    /// first 6 for GpSimd).
    fn set_lane(&mut self, engine: ElementwiseEngine, lane: usize, w: &[u32]) {
        match engine {
            ElementwiseEngine::Vector => {
                for (g, chunk) in self.vector[lane].iter_mut().zip(w.chunks_exact(6)) {
                    *g = Xorwow::from_words(chunk);
                }
            }
            ElementwiseEngine::GpSimd => self.gpsimd[lane] = Xorwow::from_words(&w[..6]),
        }
    }

    /// Lane `lane`'s words on `engine`.
    fn lane_words(&self, engine: ElementwiseEngine, lane: usize) -> Vec<u32> {
        match engine {
            ElementwiseEngine::Vector => self.vector[lane].iter().flat_map(|g| g.words()).collect(),
            ElementwiseEngine::GpSimd => self.gpsimd[lane].words().to_vec(),
        }
    }

    /// The draw for element `f` of a row on lane `lane`.
    fn draw(&mut self, engine: ElementwiseEngine, lane: usize, f: usize) -> u32 {
        match engine {
            ElementwiseEngine::Vector => self.vector[lane][f % VECTOR_GENERATORS].next_bits(),
            ElementwiseEngine::GpSimd => self.gpsimd[lane].next_bits(),
        }
    }
}

/// Whether `op` reads or changes an engine's generator state.
pub(crate) fn uses_prng(op: &Op) -> bool {
    matches!(
        op,
        Op::Rng { .. }
            | Op::Rand2 { .. }
            | Op::RandSetState { .. }
            | Op::RandGetState { .. }
            | Op::SetRngSeed { .. }
            | Op::Dropout { .. }
    )
}

/// A draw as a float in `[0, 1)`: its top 24 bits scaled by 2^-24.
fn unit(bits: u32) -> f32 {
    (bits >> 8) as f32 * (1.0 / 16_777_216.0)
}

/// The low bits of a draw in an integer dtype of at most 16 bits, or `None` for others.
fn truncated(dt: DType, bits: u32) -> Option<f32> {
    Some(match dt {
        DType::U8 => f32::from(bits as u8),
        DType::I8 => f32::from(bits as u8 as i8),
        DType::U16 => f32::from(bits as u16),
        DType::I16 => f32::from(bits as u16 as i16),
        _ => return None,
    })
}

/// The lane of row `r` of `region`, checked against the engines' lanes.
fn lane(ctx: &Ctx<'_, '_>, region: &TileRegion, r: usize) -> Result<usize, ExecError> {
    let lane = region.p0 + r;
    if lane >= PMAX {
        return Err(ctx
            .err(format!(
                "partition {lane} has no compute lane (the engines have {PMAX})"
            ))
            .into());
    }
    Ok(lane)
}

/// Executes one random-number instruction on `prng`.
pub(crate) fn execute(
    ctx: &Ctx<'_, '_>,
    store: &mut TileStore<'_>,
    prng: &Mutex<PrngState>,
) -> Result<(), ExecError> {
    let mut state = prng
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let state = &mut *state;
    match &ctx.inst.op {
        Op::Rng { dst, engine } => {
            let dt = store.dtype(dst.tile);
            if truncated(dt, 0).is_none() {
                return Err(ctx
                    .err(format!(
                        "rng into a {dt} tile cannot be simulated exactly: simulator tiles hold \
                         fp32 values, exact integers only up to 2^24; write the bits to a uint16 \
                         or uint8 tile (and combine them) instead"
                    ))
                    .into());
            }
            for r in 0..dst.np {
                let lane = lane(ctx, dst, r)?;
                for (f, o) in store.row_mut(dst, r)?.iter_mut().enumerate() {
                    *o = truncated(dt, state.draw(*engine, lane, f)).unwrap_or(0.0);
                }
            }
        }
        Op::Rand2 { dst, min, max } => {
            let dt = store.dtype(dst.tile);
            let (lo, hi) = (
                column_values(store, min, dst.np)?,
                column_values(store, max, dst.np)?,
            );
            if let Some(r) =
                (0..dst.np).find(|&r| lo[r].partial_cmp(&hi[r]) != Some(std::cmp::Ordering::Less))
            {
                return Err(ctx
                    .err(format!(
                        "rand2: min must be below max; partition {r} has min {} and max {}",
                        lo[r], hi[r]
                    ))
                    .into());
            }
            for r in 0..dst.np {
                let lane = lane(ctx, dst, r)?;
                let (lo, hi) = (lo[r], hi[r]);
                for (f, o) in store.row_mut(dst, r)?.iter_mut().enumerate() {
                    let u = unit(state.draw(ElementwiseEngine::Vector, lane, f));
                    let v = lo + (hi - lo) * u;
                    *o = dt.round(if v < hi { v } else { hi.next_down() });
                }
            }
        }
        Op::Dropout { dst, data, prob } => {
            let dt = store.dtype(dst.tile);
            let p = column_values(store, prob, dst.np)?;
            for (r, prob) in p.into_iter().enumerate() {
                let lane = lane(ctx, dst, r)?;
                let row = store.row(data, r)?.to_vec();
                for (f, (o, x)) in store.row_mut(dst, r)?.iter_mut().zip(row).enumerate() {
                    let u = unit(state.draw(ElementwiseEngine::Vector, lane, f));
                    *o = if u < prob { 0.0 } else { dt.round(x) };
                }
            }
        }
        Op::SetRngSeed { src_seeds } => {
            let v = store.row(src_seeds, 0)?[0];
            let seed = if store.dtype(src_seeds.tile) == DType::F32 {
                v.to_bits()
            } else {
                v as i64 as u32
            };
            for lane in 0..PMAX {
                let w = seeded(seed, engine_tag(ElementwiseEngine::Vector), lane);
                state.set_lane(ElementwiseEngine::Vector, lane, &w);
            }
        }
        Op::RandSetState { src_seeds, engine } => {
            let words = state_words(*engine);
            for r in 0..src_seeds.np {
                let lane = lane(ctx, src_seeds, r)?;
                let row = store.row(src_seeds, r)?;
                let w: Vec<u32> = row[..words].iter().map(|&v| v as u32).collect();
                state.set_lane(*engine, lane, &w);
            }
        }
        Op::RandGetState { dst, engine } => {
            let dt = store.dtype(dst.tile);
            for r in 0..dst.np {
                let lane = lane(ctx, dst, r)?;
                let w = state.lane_words(*engine, lane);
                for (o, w) in store.row_mut(dst, r)?.iter_mut().zip(w) {
                    *o = dt.round(w as f32);
                }
            }
        }
        _ => unreachable!("called for the random-number instructions"),
    }
    Ok(())
}
