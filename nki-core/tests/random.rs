//! The random-number instructions against a reference written from the documented algorithm
//! (XORWOW per compute lane, SplitMix64 seeding, the default state, the bits-to-float rule):
//! `rng` on both engines and in every exact integer dtype, `set_rng_seed`, `rand_set_state` /
//! `rand_get_state` (and the fp32 deviation of read-back words), `rand2`, `dropout`; a
//! parallel-looking `affine_range` kernel gives the bits of its sequential reading; every trace
//! check, validation rule and simulation error; cost and codegen.

mod common;

use common::{input, run, values};
use nki_core::NkiError;
use nki_core::codegen::emit_nki;
use nki_core::cost::{Engine, estimate};
use nki_core::ir::{Program, ScalarOperand};
use nki_core::lang::{InputSpec, trace};
use nki_core::prelude::*;
use nki_core::sim::{BandPolicy, SimOptions, parallel_loops, simulate_to_vecs};
use nki_core::validate::validate;

/// The reference generator, as the simulator's docs state it: words `x, y, z, w, v`, counter `d`.
fn xorwow(s: &mut [u32; 6]) -> u32 {
    let [x, y, z, w, v, d] = *s;
    let t = x ^ (x >> 2);
    let v2 = (v ^ (v << 4)) ^ (t ^ (t << 1));
    let d2 = d.wrapping_add(362_437);
    *s = [y, z, w, v, v2, d2];
    d2.wrapping_add(v2)
}

/// SplitMix64 from `seed << 32 | engine << 16 | lane`, the high halves.
fn seed_words(seed: u32, engine: u64, lane: usize, n: usize) -> Vec<u32> {
    let mut z = (u64::from(seed) << 32) | (engine << 16) | lane as u64;
    (0..n)
        .map(|_| {
            z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut x = z;
            x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            ((x ^ (x >> 31)) >> 32) as u32
        })
        .collect()
}

fn six(w: &[u32]) -> [u32; 6] {
    [w[0], w[1], w[2], w[3], w[4], w[5]]
}

/// The reference engines: four generators per vector lane, one per GpSimd lane.
struct Engines {
    vector: Vec<[[u32; 6]; 4]>,
    gpsimd: Vec<[u32; 6]>,
}

impl Engines {
    /// The documented default: both engines from seed 0.
    fn new() -> Engines {
        let mut e = Engines {
            vector: Vec::new(),
            gpsimd: (0..128).map(|p| six(&seed_words(0, 1, p, 6))).collect(),
        };
        e.seed(0);
        e
    }

    /// `set_rng_seed(seed)`.
    fn seed(&mut self, seed: u32) {
        self.vector = (0..128)
            .map(|p| {
                let w = seed_words(seed, 0, p, 24);
                [0, 1, 2, 3].map(|g| six(&w[6 * g..6 * g + 6]))
            })
            .collect();
    }

    /// The draws of an instruction over `np` partitions from `p0`, `nf` elements each.
    fn draws(&mut self, engine: ElementwiseEngine, p0: usize, np: usize, nf: usize) -> Vec<u32> {
        let mut out = Vec::new();
        for p in p0..p0 + np {
            for f in 0..nf {
                out.push(match engine {
                    ElementwiseEngine::Vector => xorwow(&mut self.vector[p][f % 4]),
                    ElementwiseEngine::GpSimd => xorwow(&mut self.gpsimd[p]),
                });
            }
        }
        out
    }
}

fn unit(bits: u32) -> f32 {
    (bits >> 8) as f32 / 16_777_216.0
}

fn low_bits(dtype: DType, bits: u32) -> f32 {
    match dtype {
        DType::U8 => f32::from(bits as u8),
        DType::I8 => f32::from(bits as u8 as i8),
        DType::U16 => f32::from(bits as u16),
        DType::I16 => f32::from(bits as u16 as i16),
        _ => unreachable!("an exact rng dtype"),
    }
}

fn program(target: Target, inputs: &[InputSpec], body: impl FnOnce(&[Hbm]) -> Vec<Hbm>) -> Program {
    let p = trace("k", target, inputs, body).unwrap();
    validate(&p).unwrap();
    p
}

/// `rng` into a fresh `[rows, cols]` tile of `dtype`, stored to a new output.
fn rng_out(rows: usize, cols: usize, dtype: DType, engine: ElementwiseEngine) -> Hbm {
    let out = shared_hbm(&[rows, cols], dtype);
    let t = sbuf([rows, cols], dtype);
    rng(&t, engine);
    dma_copy(&out, &t);
    out
}

fn seed_tile(seed: f32, dtype: DType) -> Tile {
    let s = sbuf([1, 1], dtype);
    memset(&s, seed);
    s
}

#[test]
fn rng_writes_the_low_bits_of_each_lanes_xorwow_draws() {
    for dtype in [DType::U8, DType::I8, DType::U16, DType::I16] {
        let p = program(Target::Trn2, &[], |_| {
            vec![
                rng_out(128, 10, dtype, ElementwiseEngine::Vector),
                rng_out(128, 10, dtype, ElementwiseEngine::Vector),
                rng_out(64, 7, dtype, ElementwiseEngine::GpSimd),
            ]
        });
        let got = run(&p, &[]);
        let mut e = Engines::new();
        for (out, (engine, np, nf)) in got.iter().zip([
            (ElementwiseEngine::Vector, 128, 10),
            (ElementwiseEngine::Vector, 128, 10),
            (ElementwiseEngine::GpSimd, 64, 7),
        ]) {
            let want: Vec<f32> = e
                .draws(engine, 0, np, nf)
                .into_iter()
                .map(|b| low_bits(dtype, b))
                .collect();
            assert_eq!(out, &want, "{dtype} {engine:?}");
        }
        // The bits differ between lanes and elements (not one repeated value).
        let distinct: std::collections::HashSet<u32> = got[0].iter().map(|v| v.to_bits()).collect();
        assert!(distinct.len() > 100, "{dtype}: {} distinct", distinct.len());
    }
}

#[test]
fn a_region_draws_from_the_lanes_of_its_partitions() {
    let p = program(Target::Trn2, &[], |_| {
        let out = shared_hbm(&[128, 8], DType::U16);
        let t = sbuf([128, 8], DType::U16);
        memset(&t, 7.0);
        rng(t.region().slice(32, 16, 2, 5), ElementwiseEngine::Vector);
        dma_copy(&out, &t);
        vec![out]
    });
    let got = run(&p, &[]);
    let mut want = vec![7.0; 128 * 8];
    let draws = Engines::new().draws(ElementwiseEngine::Vector, 32, 16, 5);
    for r in 0..16 {
        for f in 0..5 {
            want[(32 + r) * 8 + 2 + f] = f32::from(draws[r * 5 + f] as u16);
        }
    }
    assert_eq!(got[0], want);
}

#[test]
fn set_rng_seed_reseeds_the_vector_engine_only() {
    let p = program(Target::Trn2, &[], |_| {
        let a = rng_out(128, 6, DType::U16, ElementwiseEngine::Vector);
        set_rng_seed(seed_tile(42.0, DType::I32));
        let b = rng_out(128, 6, DType::U16, ElementwiseEngine::Vector);
        let c = rng_out(128, 6, DType::U16, ElementwiseEngine::GpSimd);
        set_rng_seed(seed_tile(42.0, DType::U32));
        let d = rng_out(128, 6, DType::U16, ElementwiseEngine::Vector);
        set_rng_seed(seed_tile(-3.0, DType::I32));
        let e = rng_out(128, 6, DType::U16, ElementwiseEngine::Vector);
        set_rng_seed(seed_tile(1.5, DType::F32));
        let f = rng_out(128, 6, DType::U16, ElementwiseEngine::Vector);
        vec![a, b, c, d, e, f]
    });
    let got = run(&p, &[]);
    let u16s = |v: Vec<u32>| {
        v.into_iter()
            .map(|b| f32::from(b as u16))
            .collect::<Vec<_>>()
    };
    let mut r = Engines::new();
    assert_eq!(got[0], u16s(r.draws(ElementwiseEngine::Vector, 0, 128, 6)));
    r.seed(42);
    assert_eq!(got[1], u16s(r.draws(ElementwiseEngine::Vector, 0, 128, 6)));
    // GpSimd is untouched by the seed: its default stream.
    assert_eq!(got[2], u16s(r.draws(ElementwiseEngine::GpSimd, 0, 128, 6)));
    // The same seed (int32 or uint32) restarts the same stream.
    assert_eq!(got[3], got[1]);
    r.seed(-3i32 as u32);
    assert_eq!(got[4], u16s(r.draws(ElementwiseEngine::Vector, 0, 128, 6)));
    r.seed(1.5f32.to_bits());
    assert_eq!(got[5], u16s(r.draws(ElementwiseEngine::Vector, 0, 128, 6)));
    assert_ne!(got[0], got[1]);
}

/// State words below 2^24 (exact in a simulator tile) for `lanes` lanes of `words` words.
fn small_words(lanes: usize, words: usize, salt: u64) -> Vec<f32> {
    values(lanes * words, salt, 2.0)
        .iter()
        .map(|v| ((v + 1.0) * 8_000_000.0).floor())
        .collect()
}

#[test]
fn rand_set_state_sets_each_lane_and_rand_get_state_reads_it_back() {
    for (target, engine, words) in [
        (Target::Trn2, ElementwiseEngine::GpSimd, 6),
        (Target::Trn3, ElementwiseEngine::GpSimd, 6),
        (Target::Trn3, ElementwiseEngine::Vector, 24),
    ] {
        let state = small_words(64, words, words as u64);
        let p = program(target, &input([64, words], DType::U32), |h| {
            let s = sbuf([128, words], DType::U32);
            dma_copy(s.rows(64), &h[0]);
            rand_set_state(s.rows(64), engine);
            let back = shared_hbm(&[128, words], DType::U32);
            let t = sbuf([128, words], DType::U32);
            rand_get_state(&t, engine);
            dma_copy(&back, &t);
            let bits = rng_out(128, 9, DType::U16, engine);
            let after = shared_hbm(&[128, words], DType::U32);
            let t2 = sbuf([128, words], DType::U32);
            rand_get_state(&t2, engine);
            dma_copy(&after, &t2);
            vec![back, bits, after]
        });
        let got = run(&p, &[&state]);
        // Lanes 0..64 hold the words set; lanes 64.. keep the default state.
        let mut r = Engines::new();
        for lane in 0..64 {
            let w: Vec<u32> = state[lane * words..(lane + 1) * words]
                .iter()
                .map(|&v| v as u32)
                .collect();
            match engine {
                ElementwiseEngine::GpSimd => r.gpsimd[lane] = six(&w),
                ElementwiseEngine::Vector => {
                    r.vector[lane] = [0, 1, 2, 3].map(|g| six(&w[6 * g..6 * g + 6]))
                }
            }
        }
        let lane_words = |r: &Engines, lane: usize| -> Vec<u32> {
            match engine {
                ElementwiseEngine::GpSimd => r.gpsimd[lane].to_vec(),
                ElementwiseEngine::Vector => r.vector[lane].iter().flatten().copied().collect(),
            }
        };
        // Read back: exact for the small words; the default lanes' words, rounded to fp32.
        assert_eq!(&got[0][..64 * words], &state[..], "{target} {engine:?}");
        let rounded = |r: &Engines| -> Vec<f32> {
            (0..128)
                .flat_map(|lane| lane_words(r, lane))
                .map(|w| w as f32)
                .collect()
        };
        assert_eq!(got[0], rounded(&r));
        let draws = r.draws(engine, 0, 128, 9);
        let want: Vec<f32> = draws.iter().map(|&b| f32::from(b as u16)).collect();
        assert_eq!(got[1], want, "{target} {engine:?}");
        // After drawing, the words are large: read back as their nearest fp32 (the documented
        // deviation), so at least some differ from the exact state.
        assert_eq!(got[2], rounded(&r));
        let exact = (0..128).flat_map(|lane| lane_words(&r, lane));
        assert!(
            exact.zip(&got[2]).any(|(w, &g)| g as u64 != u64::from(w)),
            "some word above 2^24 is rounded"
        );
    }
}

#[test]
fn rand2_is_uniform_in_min_max_from_the_vector_draws() {
    let (lo_col, hi_col): (Vec<f32>, Vec<f32>) = (0..128)
        .map(|p| (p as f32 - 64.0, p as f32 - 64.0 + 0.5 + p as f32 / 16.0))
        .unzip();
    let bounds = [lo_col.clone(), hi_col.clone()].concat();
    let p = program(Target::Trn3, &input([256, 1], DType::F32), |h| {
        let cols = sbuf([128, 2], DType::F32);
        dma_copy(cols.region().slice(0, 128, 0, 1), h[0].rows(0usize, 128));
        dma_copy(cols.region().slice(0, 128, 1, 1), h[0].rows(128usize, 128));
        let mut outs = Vec::new();
        for dtype in [DType::F32, DType::BF16] {
            let out = shared_hbm(&[128, 40], dtype);
            let t = sbuf([128, 40], dtype);
            rand2(&t, -2.0, 3.0);
            dma_copy(&out, &t);
            outs.push(out);
        }
        let out = shared_hbm(&[128, 40], DType::F32);
        let t = sbuf([128, 40], DType::F32);
        rand2(
            &t,
            cols.region().slice(0, 128, 0, 1),
            cols.region().slice(0, 128, 1, 1),
        );
        dma_copy(&out, &t);
        outs.push(out);
        let out = shared_hbm(&[128, 40], DType::I32);
        let t = sbuf([128, 40], DType::I32);
        rand2(&t, 0.0, 1000.0);
        dma_copy(&out, &t);
        outs.push(out);
        outs
    });
    let got = run(&p, &[&bounds]);
    let mut r = Engines::new();
    let v = ElementwiseEngine::Vector;
    let scaled = |d: Vec<u32>, lo: &dyn Fn(usize) -> f32, hi: &dyn Fn(usize) -> f32| {
        d.into_iter()
            .enumerate()
            .map(|(i, b)| {
                let (lo, hi) = (lo(i / 40), hi(i / 40));
                lo + (hi - lo) * unit(b)
            })
            .collect::<Vec<f32>>()
    };
    let f32s = scaled(r.draws(v, 0, 128, 40), &|_| -2.0, &|_| 3.0);
    assert_eq!(got[0], f32s);
    assert!(got[0].iter().all(|x| (-2.0..3.0).contains(x)));
    let mean = got[0].iter().sum::<f32>() / got[0].len() as f32;
    assert!((mean - 0.5).abs() < 0.1, "mean {mean}");
    let bf: Vec<f32> = scaled(r.draws(v, 0, 128, 40), &|_| -2.0, &|_| 3.0)
        .into_iter()
        .map(|x| DType::BF16.round(x))
        .collect();
    assert_eq!(got[1], bf);
    let cols = scaled(r.draws(v, 0, 128, 40), &|p| lo_col[p], &|p| hi_col[p]);
    assert_eq!(got[2], cols);
    assert!(
        got[2]
            .iter()
            .enumerate()
            .all(|(i, x)| lo_col[i / 40] <= *x && *x < hi_col[i / 40])
    );
    let ints: Vec<f32> = scaled(r.draws(v, 0, 128, 40), &|_| 0.0, &|_| 1000.0)
        .into_iter()
        .map(|x| DType::I32.round(x))
        .collect();
    assert_eq!(got[3], ints);
}

#[test]
fn dropout_zeroes_elements_whose_draw_is_below_prob() {
    let x = values(128 * 64, 5, 10.0);
    let p = program(Target::Trn2, &input([128, 64], DType::F32), |h| {
        let t = sbuf([128, 64], DType::F32);
        dma_copy(&t, &h[0]);
        let prob = sbuf([128, 1], DType::F32);
        iota(&prob, 0, 1, 0);
        let scaled = sbuf([128, 1], DType::F32);
        tensor_scalar(&scaled, &prob, BinOp::Multiply, 1.0 / 127.0);
        let mut outs = Vec::new();
        for prob in [
            ScalarOperand::from(0.3),
            0.0.into(),
            1.0.into(),
            (&scaled).into(),
        ] {
            let out = shared_hbm(&[128, 64], DType::F32);
            let d = sbuf([128, 64], DType::F32);
            dropout(&d, &t, prob);
            dma_copy(&out, &d);
            outs.push(out);
        }
        let out = shared_hbm(&[128, 64], DType::BF16);
        let (xb, d) = (sbuf([128, 64], DType::BF16), sbuf([128, 64], DType::BF16));
        tensor_copy(&xb, &t);
        dropout(&d, &xb, 0.5);
        dma_copy(&out, &d);
        outs.push(out);
        outs
    });
    let got = run(&p, &[&x]);
    let mut r = Engines::new();
    let mut dropped = |prob: &dyn Fn(usize) -> f32, x: &[f32]| -> Vec<f32> {
        r.draws(ElementwiseEngine::Vector, 0, 128, 64)
            .into_iter()
            .enumerate()
            .map(|(i, b)| if unit(b) < prob(i / 64) { 0.0 } else { x[i] })
            .collect()
    };
    assert_eq!(got[0], dropped(&|_| 0.3, &x));
    let zeros = got[0].iter().filter(|v| **v == 0.0).count() as f32 / x.len() as f32;
    assert!((zeros - 0.3).abs() < 0.03, "{zeros} dropped");
    // prob 0 keeps every element, 1 drops every one; both still draw.
    assert_eq!(got[1], dropped(&|_| 0.0, &x));
    assert_eq!(got[1], x);
    assert_eq!(got[2], dropped(&|_| 1.0, &x));
    assert!(got[2].iter().all(|v| *v == 0.0));
    // The column is computed in fp32 on the engines: iota · (1/127).
    let col: Vec<f32> = (0..128).map(|p| p as f32 * (1.0 / 127.0)).collect();
    assert_eq!(got[3], dropped(&|p| col[p], &x));
    let xb: Vec<f32> = x.iter().map(|v| DType::BF16.round(*v)).collect();
    assert_eq!(got[4], dropped(&|_| 0.5, &xb));
}

/// Four `affine_range` iterations, each drawing a `[128, 8]` uint16 block into its own columns of
/// the output (a loop the simulator would run in parallel without the generators), and a
/// `dropout` in a nested loop.
fn looped(affine: bool) -> Program {
    program(Target::Trn2, &input([128, 8], DType::F32), |h| {
        let out = shared_hbm(&[128, 32], DType::U16);
        let dropped = shared_hbm(&[128, 32], DType::F32);
        let x = sbuf([128, 8], DType::F32);
        dma_copy(&x, &h[0]);
        let body = |i: AffineExpr| {
            let t = sbuf([128, 8], DType::U16);
            rng(&t, ElementwiseEngine::Vector);
            dma_copy(out.cols(i.clone() * 8usize, 8), &t);
            let d = sbuf([128, 8], DType::F32);
            dropout(&d, &x, 0.5);
            dma_copy(dropped.cols(i * 8usize, 8), &d);
        };
        if affine {
            affine_range(4, body);
        } else {
            sequential_range(4, body);
        }
        vec![out, dropped]
    })
}

#[test]
fn a_parallel_looking_loop_draws_in_program_order() {
    let x = values(128 * 8, 11, 4.0);
    let p = looped(true);
    assert_eq!(
        parallel_loops(&p),
        vec![false],
        "the generators keep it sequential"
    );
    let got = run(&p, &[&x]);
    assert_eq!(got, run(&looped(false), &[&x]));
    // The sequential reading: iteration i's rng, then its dropout, then iteration i + 1.
    let mut r = Engines::new();
    let (mut bits, mut kept) = (vec![0.0; 128 * 32], vec![0.0; 128 * 32]);
    for i in 0..4 {
        for (k, b) in r
            .draws(ElementwiseEngine::Vector, 0, 128, 8)
            .into_iter()
            .enumerate()
        {
            bits[k / 8 * 32 + i * 8 + k % 8] = f32::from(b as u16);
        }
        for (k, b) in r
            .draws(ElementwiseEngine::Vector, 0, 128, 8)
            .into_iter()
            .enumerate()
        {
            kept[k / 8 * 32 + i * 8 + k % 8] = if unit(b) < 0.5 { 0.0 } else { x[k] };
        }
    }
    assert_eq!(got, vec![bits, kept]);
    // Every scheduling of the simulator gives the same bits.
    let bytes: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
    let reference = simulate_to_vecs(&p, &[&bytes], SimOptions::default()).unwrap();
    for opts in [
        SimOptions {
            parallel: false,
            bands: BandPolicy::never(),
            ..SimOptions::default()
        },
        SimOptions {
            parallel: true,
            bands: BandPolicy::everywhere(16),
            ..SimOptions::default()
        },
    ] {
        assert_eq!(simulate_to_vecs(&p, &[&bytes], opts).unwrap(), reference);
    }
}

#[test]
fn loops_without_random_instructions_stay_parallel() {
    let p = program(Target::Trn2, &[], |_| {
        let out = shared_hbm(&[128, 32], DType::U16);
        let seeded = rng_out(128, 4, DType::U16, ElementwiseEngine::Vector);
        affine_range(4, |i| {
            let t = sbuf([128, 8], DType::U16);
            memset(&t, 1.0);
            dma_copy(out.cols(i * 8usize, 8), &t);
        });
        vec![out, seeded]
    });
    assert_eq!(parallel_loops(&p), vec![true]);
}

fn trace_err(target: Target, body: impl FnOnce() + 'static) -> String {
    trace("k", target, &[], move |_| {
        body();
        vec![]
    })
    .map(|_| ())
    .unwrap_err()
    .to_string()
}

/// A kernel body to trace.
type Body = Box<dyn FnOnce()>;

#[test]
fn bad_operands_are_trace_errors_naming_the_argument() {
    let cases: Vec<(Body, &str)> = vec![
        (
            Box::new(|| rng(sbuf([4, 4], DType::F32), ElementwiseEngine::Vector)),
            "rng: dst must be one of i8, i16, i32, u8, u16, u32, got f32",
        ),
        (
            Box::new(|| rand2(sbuf([4, 4], DType::Bool), 0.0, 1.0)),
            "rand2: dst must be one of f8e4m3, f8e5m2, f16, bf16, f32, tf32, i8, i16, i32, u8, \
             u16, u32, got bool",
        ),
        (
            Box::new(|| rand2(sbuf([4, 4], DType::F32), 1.0, 1.0)),
            "rand2: min must be below max, got min 1 and max 1",
        ),
        (
            Box::new(|| rand2(sbuf([4, 4], DType::F32), sbuf([4, 1], DType::BF16), 1.0)),
            "rand2: min must be one of f32, got bf16",
        ),
        (
            Box::new(|| rand2(sbuf([4, 4], DType::F32), 0.0, sbuf([4, 2], DType::F32))),
            "rand2: max must be a (4, 1) column, got shape [4, 2]",
        ),
        (
            Box::new(|| rand_set_state(sbuf([4, 24], DType::U32), ElementwiseEngine::GpSimd)),
            "rand_set_state: src_seeds must hold 6 uint32 state words per partition on gpsimd \
             (XORWOW), got 24",
        ),
        (
            Box::new(|| rand_get_state(sbuf([4, 6], DType::U32), ElementwiseEngine::Vector)),
            "rand_get_state: dst must hold 24 uint32 state words per partition on vector \
             (XORWOW), got 6",
        ),
        (
            Box::new(|| rand_get_state(sbuf([4, 6], DType::I32), ElementwiseEngine::GpSimd)),
            "rand_get_state: dst must be one of u32, got i32",
        ),
        (
            Box::new(|| set_rng_seed(sbuf([1, 2], DType::I32))),
            "set_rng_seed: src_seeds must be a [1, 1] tile, got shape [1, 2]",
        ),
        (
            Box::new(|| set_rng_seed(sbuf([1, 1], DType::I16))),
            "set_rng_seed: src_seeds must be one of i32, u32, f32, got i16",
        ),
        (
            Box::new(|| dropout(sbuf([4, 4], DType::BF16), sbuf([4, 4], DType::F32), 0.5)),
            "dropout: dst is bf16 but data is f32; they must share one dtype",
        ),
        (
            Box::new(|| dropout(sbuf([4, 4], DType::F32), sbuf([4, 3], DType::F32), 0.5)),
            "dropout: data has shape [4, 3] but dst has shape [4, 4]",
        ),
        (
            Box::new(|| dropout(sbuf([4, 4], DType::F32), sbuf([4, 4], DType::F32), 1.5)),
            "dropout: prob must be a probability in [0, 1], got 1.5",
        ),
        (
            Box::new(|| {
                let x = sbuf([4, 4], DType::I32);
                dropout(&x, &x, sbuf([4, 1], DType::BF16))
            }),
            "dropout: prob must be float32 (data is an integer tile), got bf16",
        ),
        (
            Box::new(|| {
                let x = sbuf([4, 4], DType::F32);
                dropout(&x, &x, sbuf([4, 1], DType::I32))
            }),
            "dropout: prob must be a float tile, got i32",
        ),
    ];
    for (body, want) in cases {
        let e = trace_err(Target::Trn3, body);
        assert!(e.contains(want), "{e}\nwant: {want}");
    }
}

fn rule_of(target: Target, body: impl FnOnce() + 'static) -> (String, String, String) {
    let p = trace("k", target, &[], move |_| {
        body();
        vec![]
    })
    .unwrap();
    match validate(&p).unwrap_err() {
        NkiError::Validation(v) => (v.rule.to_string(), v.limit, v.message),
        e => panic!("{e}"),
    }
}

#[test]
fn engines_targets_and_memories_are_validated() {
    let (rule, limit, msg) = rule_of(Target::Trn1, || {
        rng(sbuf([4, 4], DType::U8), ElementwiseEngine::GpSimd)
    });
    assert_eq!(
        (rule.as_str(), limit.as_str()),
        ("prng-engine", "NeuronCore-v3 (trn2) or newer")
    );
    assert!(
        msg.contains("rng on engine=gpsimd needs NeuronCore-v3"),
        "{msg}"
    );
    let (rule, _, msg) = rule_of(Target::Trn2, || {
        rand_set_state(sbuf([4, 24], DType::U32), ElementwiseEngine::Vector)
    });
    assert_eq!(rule, "prng-engine");
    assert!(
        msg.contains("rand_set_state on engine=vector needs NeuronCore-v4"),
        "{msg}"
    );
    let (rule, _, _) = rule_of(Target::Trn2, || {
        rand_get_state(sbuf([4, 24], DType::U32), ElementwiseEngine::Vector)
    });
    assert_eq!(rule, "prng-engine");
    let (rule, _, _) = rule_of(Target::Trn1, || {
        rand_set_state(sbuf([4, 6], DType::U32), ElementwiseEngine::GpSimd)
    });
    assert_eq!(rule, "isa-target");
    let (rule, _, _) = rule_of(Target::Trn2, || rand2(sbuf([4, 4], DType::F32), 0.0, 1.0));
    assert_eq!(rule, "isa-target");
    let (rule, _, msg) = rule_of(Target::Trn2, || {
        rng(psum([4, 4], DType::U16), ElementwiseEngine::GpSimd)
    });
    assert_eq!(rule, "gpsimd-psum");
    assert!(msg.contains("GpSimd cannot access PSUM"), "{msg}");
    let (rule, _, _) = rule_of(Target::Trn3, || {
        rand_get_state(psum([4, 6], DType::U32), ElementwiseEngine::GpSimd)
    });
    assert_eq!(rule, "gpsimd-psum");
    let (rule, _, msg) = rule_of(Target::Trn3, || {
        let s = psum([4, 6], DType::U32);
        memset(&s, 1.0);
        rand_set_state(&s, ElementwiseEngine::GpSimd)
    });
    assert_eq!(rule, "rand-state-sbuf");
    assert!(
        msg.contains("rand_set_state reads its state from SBUF"),
        "{msg}"
    );
    // What the docs allow: rng on the vector engine into PSUM, the vector state into PSUM on v4.
    for (target, body) in [
        (
            Target::Trn1,
            Box::new(|| rng(psum([4, 4], DType::U16), ElementwiseEngine::Vector)) as Body,
        ),
        (
            Target::Trn3,
            Box::new(|| rand_get_state(psum([4, 24], DType::U32), ElementwiseEngine::Vector)),
        ),
    ] {
        let p = trace("k", target, &[], move |_| {
            body();
            vec![]
        })
        .unwrap();
        validate(&p).unwrap();
    }
}

fn sim_err(target: Target, body: impl FnOnce() + 'static) -> String {
    let p = program(target, &[], move |_| {
        body();
        vec![]
    });
    simulate_to_vecs(&p, &[], SimOptions::default())
        .unwrap_err()
        .to_string()
}

#[test]
fn what_fp32_tiles_cannot_hold_is_a_simulation_error() {
    for dtype in [DType::U32, DType::I32] {
        let e = sim_err(Target::Trn2, move || {
            rng(sbuf([4, 4], dtype), ElementwiseEngine::Vector)
        });
        assert!(
            e.contains(&format!(
                "rng into a {dtype} tile cannot be simulated exactly: simulator tiles hold fp32"
            )),
            "{e}"
        );
    }
    let e = sim_err(Target::Trn3, || {
        let lo = sbuf([4, 1], DType::F32);
        memset(&lo, 2.0);
        rand2(sbuf([4, 4], DType::F32), &lo, 2.0)
    });
    assert!(
        e.contains("rand2: min must be below max; partition 0 has min 2 and max 2"),
        "{e}"
    );
}

#[test]
fn random_instructions_cost_on_their_engines_and_emit_their_nki_calls() {
    let p = program(Target::Trn3, &[], |_| {
        let a = rng_out(128, 16, DType::U16, ElementwiseEngine::GpSimd);
        let s = sbuf([128, 6], DType::U32);
        rand_get_state(&s, ElementwiseEngine::GpSimd);
        rand_set_state(&s, ElementwiseEngine::GpSimd);
        set_rng_seed(seed_tile(7.0, DType::I32));
        let out = shared_hbm(&[128, 16], DType::F32);
        let t = sbuf([128, 16], DType::F32);
        rand2(&t, 0.0, 1.0);
        let d = sbuf([128, 16], DType::F32);
        dropout(&d, &t, 0.25);
        dma_copy(&out, &d);
        vec![a, out]
    });
    let report = estimate(&p);
    let engine = |name: &str| {
        report
            .slices
            .iter()
            .find(|s| s.name == name)
            .map(|s| s.engine)
            .unwrap()
    };
    assert_eq!(engine("rng"), Engine::GpSimd);
    assert_eq!(engine("rand_get_state"), Engine::GpSimd);
    assert_eq!(engine("set_rng_seed"), Engine::Vector);
    assert_eq!(engine("rand2"), Engine::Vector);
    assert_eq!(engine("dropout"), Engine::Vector);
    let source = emit_nki(&p);
    for call in [
        "nisa.rng(dst=t0, engine=nisa.engine.gpsimd)",
        "nisa.rand_get_state(dst=t1, engine=nisa.engine.gpsimd)",
        "nisa.rand_set_state(src_seeds=t1, engine=nisa.engine.gpsimd)",
        "nisa.set_rng_seed(src_seeds=t2)",
        "nisa.rand2(dst=t3, min=0.0, max=1.0)",
        "nisa.dropout(dst=t4, data=t3, prob=0.25)",
    ] {
        assert!(source.contains(call), "{call}\n{source}");
    }
}
