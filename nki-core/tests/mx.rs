//! MX (microscaling): the packed dtypes (lane layout, DMA moving them bit-exactly),
//! `quantize_mx` against a reference written from the docstring's scale formula, `nc_matmul_mx`
//! against an f64 einsum of the dequantised operands (the nki-library's golden's arithmetic),
//! quantize then matmul, their trace checks and validation rules, cost and codegen.

mod common;

use common::{run, values};
use nki_core::NkiError;
use nki_core::codegen::emit_nki;
use nki_core::cost::{Engine, estimate};
use nki_core::dtype::packed::{Lane, pack, unpack};
use nki_core::ir::Program;
use nki_core::lang::{InputSpec, trace};
use nki_core::prelude::*;
use nki_core::validate::validate;

/// Traces a kernel that must trace.
fn build(inputs: &[InputSpec], target: Target, f: impl FnOnce(&[Hbm]) -> Vec<Hbm>) -> Program {
    trace("k", target, inputs, f).unwrap()
}

fn spec(name: &str, shape: [usize; 2], dtype: DType) -> InputSpec {
    InputSpec {
        name: name.into(),
        shape: shape.to_vec(),
        dtype,
    }
}

/// The docstring's scale: `X = 2^(⌊log₂ amax⌋ − (E_max − 1))`, `2^-127` for zeros; the E8M0
/// byte `log₂ X + 127`.
fn reference_scale_byte(amax: f32, e_max: i32) -> u8 {
    if amax == 0.0 {
        return 0;
    }
    let e = (amax as f64).log2().floor() as i32;
    (e - (e_max - 1) + 127).clamp(0, 254) as u8
}

/// `quantize_mx` of `src` `[p, 4f]` (values already in `src_dtype`): the packed values (as
/// lanes, `[p, f, 4]` flattened) and the `[p/8, f]` scale bytes.
fn reference_quantize(src: &[f32], p: usize, f: usize, lane: Lane) -> (Vec<f32>, Vec<u8>) {
    let mut out = vec![0f32; p * f * 4];
    let mut scales = vec![0u8; p / 8 * f];
    for g in 0..p / 8 {
        for j in 0..f {
            let idx = |r: usize, k: usize| r * 4 * f + 4 * j + k;
            let amax = (8 * g..8 * g + 8)
                .flat_map(|r| (0..4).map(move |k| (r, k)))
                .map(|(r, k)| src[idx(r, k)].abs())
                .fold(0f32, f32::max);
            let byte = reference_scale_byte(amax, lane.max_exponent());
            scales[g * f + j] = byte;
            let x = 2f64.powi(byte as i32 - 127);
            for r in 8 * g..8 * g + 8 {
                for k in 0..4 {
                    out[idx(r, k)] = lane.round((src[idx(r, k)] as f64 / x) as f32);
                }
            }
        }
    }
    (out, scales)
}

/// Loads `src` `[p, 4f]` in `src_dtype`, quantises it into `dst_dtype` with scales in a
/// `[scale_rows, f]` tile of `scale_dtype` (written from partition `offset`), and stores the
/// packed data and the whole scale tile.
fn quantize_program(
    (p, f): (usize, usize),
    (src_dtype, dst_dtype, scale_dtype): (DType, DType, DType),
    (scale_rows, offset): (usize, usize),
) -> Program {
    build(
        &[spec("x", [p, 4 * f], src_dtype)],
        Target::Trn3,
        move |h| {
            let data_out = shared_hbm(&[p, f], dst_dtype);
            let scale_out = shared_hbm(&[scale_rows, f], scale_dtype);
            let src = sbuf([p, 4 * f], src_dtype);
            dma_copy(&src, &h[0]);
            let dst = sbuf([p, f], dst_dtype);
            let scale = sbuf([scale_rows, f], scale_dtype);
            memset(&scale, 0.0);
            quantize_mx(
                &dst,
                &src,
                scale.region().slice(offset, scale_rows - offset, 0, f),
            );
            dma_copy(&data_out, &dst);
            dma_copy(&scale_out, &scale);
            vec![data_out, scale_out]
        },
    )
}

/// Values in bf16 spanning many binades, with an all-zero group and a tiny group.
fn quantize_input(p: usize, f: usize) -> Vec<f32> {
    let mut v: Vec<f32> = values(p * 4 * f, 11, 2.0)
        .into_iter()
        .enumerate()
        .map(|(i, x)| DType::BF16.round(x * 2f32.powi((i % 23) as i32 - 11)))
        .collect();
    // Group (0, 0): all zeros; group (1, 1): subnormal-sized values.
    for r in 0..8 {
        for k in 0..4 {
            v[r * 4 * f + k] = 0.0;
            v[(8 + r) * 4 * f + 4 + k] = DType::BF16.round(1e-39 * (r * 4 + k + 1) as f32);
        }
    }
    v
}

#[test]
fn quantize_mx_matches_the_docstring_formula() {
    let (p, f) = (128, 16);
    for (dst_dtype, lane) in [
        (DType::F8E4M3FNX4, Lane::E4M3FN),
        (DType::F8E5M2X4, Lane::E5M2),
    ] {
        for (scale_dtype, src_dtype) in [(DType::U8, DType::BF16), (DType::F8E8M0, DType::F16)] {
            let src: Vec<f32> = quantize_input(p, f)
                .into_iter()
                .map(|v| src_dtype.round(v))
                .collect();
            let prog = quantize_program((p, f), (src_dtype, dst_dtype, scale_dtype), (p, 0));
            validate(&prog).unwrap();
            let out = run(&prog, &[&src]);
            let (want, want_scales) = reference_quantize(&src, p, f, lane);
            let got: Vec<f32> = out[0].iter().flat_map(|e| unpack(lane, *e)).collect();
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert_eq!(
                    g.to_bits(),
                    w.to_bits(),
                    "{dst_dtype} value {i}: {g} vs {w}"
                );
            }
            for g in 0..p / 8 {
                for j in 0..f {
                    let stored = out[1][(32 * (g / 4) + g % 4) * f + j];
                    let byte = want_scales[g * f + j];
                    let expect = if scale_dtype == DType::U8 {
                        byte as f32
                    } else {
                        2f32.powi(byte as i32 - 127)
                    };
                    assert_eq!(stored, expect, "{dst_dtype} scale of group {g}, column {j}");
                }
            }
            assert_eq!(want_scales[0], 0, "an all-zero group's scale is 2^-127");
            // Rows the scales do not use keep their values (the memset's 0, as the dtype holds it).
            let zero = scale_dtype.round(0.0);
            assert!((4..32).all(|r| out[1][r * f..(r + 1) * f].iter().all(|v| *v == zero)));
        }
    }
}

#[test]
fn quantize_mx_scales_fit_one_quadrant_or_start_at_an_offset() {
    // 32 partitions: a [4, F] scale tile; 64 partitions at offset 8: rows 8..12 and 40..44.
    let (f, lane) = (8, Lane::E4M3FN);
    let src = quantize_input(32, f);
    let prog = quantize_program((32, f), (DType::BF16, DType::F8E4M3FNX4, DType::U8), (4, 0));
    validate(&prog).unwrap();
    let out = run(&prog, &[&src]);
    let (_, scales) = reference_quantize(&src, 32, f, lane);
    assert_eq!(out[1], scales.iter().map(|b| *b as f32).collect::<Vec<_>>());
    let src = quantize_input(64, f);
    let prog = quantize_program(
        (64, f),
        (DType::BF16, DType::F8E4M3FNX4, DType::U8),
        (64, 8),
    );
    validate(&prog).unwrap();
    let out = run(&prog, &[&src]);
    let (_, scales) = reference_quantize(&src, 64, f, lane);
    for g in 0..8 {
        let row = 8 + 32 * (g / 4) + g % 4;
        let want: Vec<f32> = scales[g * f..(g + 1) * f]
            .iter()
            .map(|b| *b as f32)
            .collect();
        assert_eq!(out[1][row * f..(row + 1) * f], want[..], "group {g}");
    }
}

/// The MX instructions never run band by band: their scales sit in other partitions than
/// their data, and the matmul contracts over partitions, even when every operand spans the
/// same partitions (scales oversized to `[P, F]`, `K = M`).
#[test]
fn mx_instructions_give_the_same_bits_under_any_band_policy() {
    use nki_core::sim::{BandPolicy, SimOptions, simulate_to_vecs};
    let (p, f) = (64, 64);
    let src: Vec<f32> = quantize_input(p, f);
    let prog = build(
        &[spec("x", [p, 4 * f], DType::BF16)],
        Target::Trn3,
        move |h| {
            let out = shared_hbm(&[p, f], DType::F32);
            let src = sbuf([p, 4 * f], DType::BF16);
            dma_copy(&src, &h[0]);
            let (q, s) = (sbuf([p, f], DType::F8E4M3FNX4), sbuf([p, f], DType::U8));
            memset(&s, 0.0);
            quantize_mx(&q, &src, &s);
            let acc = psum([p, f], DType::F32);
            nc_matmul_mx(&acc, (&q, &q), (&s, &s), MatmulTiling::default(), false);
            let r = sbuf([p, f], DType::F32);
            tensor_copy(&r, &acc);
            dma_copy(&out, &r);
            vec![out]
        },
    );
    validate(&prog).unwrap();
    let mut bytes = vec![0u8; src.len() * 2];
    for (i, v) in src.iter().enumerate() {
        DType::BF16.write(&mut bytes, i, *v);
    }
    let run_with = |bands: BandPolicy| {
        let opts = SimOptions {
            parallel: true,
            bands,
            ..SimOptions::default()
        };
        simulate_to_vecs(&prog, &[&bytes], opts).unwrap()
    };
    let reference = run_with(BandPolicy {
        partitions: 128,
        min_instructions: usize::MAX,
        min_mean_elements: usize::MAX,
    });
    let banded = run_with(BandPolicy {
        partitions: 8,
        min_instructions: 1,
        min_mean_elements: 1,
    });
    assert_eq!(banded, reference);
    let out = run(&prog, &[&src]);
    assert!(out[0].iter().all(|v| v.is_finite()) && out[0].iter().any(|v| *v != 0.0));
}

#[test]
fn quantize_mx_gives_a_group_with_an_infinity_the_nan_scale() {
    let (p, f) = (32, 4);
    let mut src = quantize_input(p, f);
    src[4 * f + 5] = f32::INFINITY;
    let prog = quantize_program((p, f), (DType::BF16, DType::F8E4M3FNX4, DType::U8), (4, 0));
    let out = run(&prog, &[&src]);
    assert_eq!(out[1][1], 255.0, "group 0, column 1");
    assert!(unpack(Lane::E4M3FN, out[0][1]).iter().all(|v| v.is_nan()));
    assert!(
        unpack(Lane::E4M3FN, out[0][2])
            .iter()
            .all(|v| v.is_finite())
    );
}

/// Random packed elements of `lane` (every value a lane value) and uint8 scale bytes in
/// `120..=134`.
fn packed_values(n: usize, lane: Lane, seed: u64) -> Vec<f32> {
    let bits = values(n * 4, seed, 2.0);
    (0..n)
        .map(|i| {
            let lanes: [f32; 4] = std::array::from_fn(|k| {
                let code = ((bits[4 * i + k] + 1.0) * 128.0) as u32 & ((1u32 << lane.bits()) - 1);
                let v = lane.decode(code as u8);
                if v.is_finite() { v } else { 1.0 }
            });
            pack(lane, lanes)
        })
        .collect()
}

fn scale_bytes(rows: usize, cols: usize, seed: u64) -> Vec<f32> {
    values(rows * cols, seed, 2.0)
        .into_iter()
        .map(|v| (127.0 + (v * 7.0).round()).clamp(120.0, 134.0))
        .collect()
}

/// `Σ_k Σ_lane` of the dequantised operands in f64 (each product exact), `[m, n]`.
fn reference_matmul(
    (stationary, s_lane, s_scale): (&[f32], Lane, &[f32]),
    (moving, m_lane, m_scale): (&[f32], Lane, &[f32]),
    (k, m, n): (usize, usize, usize),
) -> Vec<f32> {
    let row = |g: usize| 32 * (g / 4) + g % 4;
    let mut out = vec![0f32; m * n];
    for i in 0..m {
        for j in 0..n {
            let mut sum = 0f64;
            for kk in 0..k {
                let a = unpack(s_lane, stationary[kk * m + i]);
                let b = unpack(m_lane, moving[kk * n + j]);
                let sa = 2f64.powi(s_scale[row(kk / 8) * m + i] as i32 - 127);
                let sb = 2f64.powi(m_scale[row(kk / 8) * n + j] as i32 - 127);
                for q in 0..4 {
                    sum += a[q] as f64 * sa * b[q] as f64 * sb;
                }
            }
            out[i * n + j] = sum as f32;
        }
    }
    out
}

/// `nc_matmul_mx` of HBM inputs (stationary `[k, m]`, moving `[k, n]`, uint8 scales of `k`
/// partitions), into a `dst_dtype` PSUM tile, optionally twice (accumulating), with tiling.
fn matmul_program(
    (k, m, n): (usize, usize, usize),
    (s_dtype, m_dtype, dst_dtype): (DType, DType, DType),
    accumulate_twice: bool,
    tiling: MatmulTiling,
) -> Program {
    let inputs = [
        spec("stationary", [k, m], s_dtype),
        spec("moving", [k, n], m_dtype),
        spec("stationary_scale", [k, m], DType::U8),
        spec("moving_scale", [k, n], DType::U8),
    ];
    build(&inputs, Target::Trn3, move |h| {
        let out = shared_hbm(&[m, n], dst_dtype);
        let load = |i: usize, shape: [usize; 2], dt: DType| {
            let t = sbuf(shape, dt);
            dma_copy(&t, &h[i]);
            t
        };
        let st = load(0, [k, m], s_dtype);
        let mv = load(1, [k, n], m_dtype);
        let ss = load(2, [k, m], DType::U8);
        let ms = load(3, [k, n], DType::U8);
        let acc = psum([m, n], dst_dtype);
        nc_matmul_mx(&acc, (&st, &mv), (&ss, &ms), tiling.clone(), false);
        if accumulate_twice {
            nc_matmul_mx(&acc, (&st, &mv), (&ss, &ms), tiling.clone(), true);
        }
        let res = sbuf([m, n], dst_dtype);
        tensor_copy(&res, &acc);
        dma_copy(&out, &res);
        vec![out]
    })
}

#[test]
fn nc_matmul_mx_matches_the_dequantised_einsum() {
    let cases = [
        ((128, 64, 96), Lane::E4M3FN, Lane::E4M3FN, DType::F32, false),
        ((64, 32, 48), Lane::E2M1, Lane::E5M2, DType::F32, true),
        ((32, 16, 40), Lane::E5M2, Lane::E2M1, DType::BF16, false),
    ];
    let dtype_of = |l: Lane| match l {
        Lane::E4M3FN => DType::F8E4M3FNX4,
        Lane::E5M2 => DType::F8E5M2X4,
        Lane::E2M1 => DType::F4E2M1FNX4,
    };
    for ((k, m, n), sl, ml, dst, twice) in cases {
        let prog = matmul_program(
            (k, m, n),
            (dtype_of(sl), dtype_of(ml), dst),
            twice,
            MatmulTiling::default(),
        );
        validate(&prog).unwrap();
        let st = packed_values(k * m, sl, 1);
        let mv = packed_values(k * n, ml, 2);
        let (ss, ms) = (scale_bytes(k, m, 3), scale_bytes(k, n, 4));
        let out = run(&prog, &[&st, &mv, &ss, &ms]);
        let want = reference_matmul((&st, sl, &ss), (&mv, ml, &ms), (k, m, n));
        for (i, (g, w)) in out[0].iter().zip(&want).enumerate() {
            let w = if twice {
                dst.round(dst.round(*w) + *w)
            } else {
                dst.round(*w)
            };
            assert_eq!(*g, w, "k={k} element {i}");
        }
    }
}

#[test]
fn quantize_then_matmul_recovers_the_product_of_exactly_representable_data() {
    // Data that e4m3fn holds exactly after scaling: small integers times powers of two; the
    // quantised matmul then equals the bf16 product exactly.
    let (k, m, n) = (32, 8, 16);
    let mk = |rows: usize, cols: usize, seed: u64| -> Vec<f32> {
        values(rows * cols * 4, seed, 16.0)
            .into_iter()
            .map(|v| v.round() * 0.25)
            .collect()
    };
    let (a, b) = (mk(k, m, 5), mk(k, n, 6));
    let inputs = [
        spec("a", [k, 4 * m], DType::BF16),
        spec("b", [k, 4 * n], DType::BF16),
    ];
    let prog = build(&inputs, Target::Trn3, move |h| {
        let out = shared_hbm(&[m, n], DType::F32);
        let quant = |i: usize, cols: usize| {
            let src = sbuf([k, 4 * cols], DType::BF16);
            dma_copy(&src, &h[i]);
            let q = sbuf([k, cols], DType::F8E4M3FNX4);
            let s = sbuf([k / 8, cols], DType::F8E8M0);
            quantize_mx(&q, &src, &s);
            (q, s)
        };
        let (qa, sa) = quant(0, m);
        let (qb, sb) = quant(1, n);
        let acc = psum([m, n], DType::F32);
        nc_matmul_mx(&acc, (&qa, &qb), (&sa, &sb), MatmulTiling::default(), false);
        let res = sbuf([m, n], DType::F32);
        tensor_copy(&res, &acc);
        dma_copy(&out, &res);
        vec![out]
    });
    validate(&prog).unwrap();
    let out = run(&prog, &[&a, &b]);
    for i in 0..m {
        for j in 0..n {
            let want: f64 = (0..k)
                .flat_map(|kk| (0..4).map(move |q| (kk, q)))
                .map(|(kk, q)| a[kk * 4 * m + 4 * i + q] as f64 * b[kk * 4 * n + 4 * j + q] as f64)
                .sum();
            assert_eq!(out[0][i * n + j], want as f32, "[{i}, {j}]");
        }
    }
}

#[test]
fn packed_tensors_travel_bit_exactly_through_sbuf() {
    let inputs = [spec("x", [32, 8], DType::F4E2M1FNX4)];
    let prog = build(&inputs, Target::Trn2, |h| {
        let out = shared_hbm(&[32, 8], DType::F4E2M1FNX4);
        let t = sbuf([32, 8], DType::F4E2M1FNX4);
        dma_copy(&t, &h[0]);
        dma_copy(&out, &t);
        vec![out]
    });
    validate(&prog).unwrap();
    let x = packed_values(32 * 8, Lane::E2M1, 9);
    let out = run(&prog, &[&x]);
    let bits = |v: &[f32]| v.iter().map(|e| e.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&out[0]), bits(&x));
}

fn rule_of(prog: &Program) -> &'static str {
    match validate(prog) {
        Err(NkiError::Validation(v)) => v.rule,
        other => panic!("expected a validation error, got {other:?}"),
    }
}

#[test]
fn validation_names_each_mx_rule() {
    let q = |dts, scale| quantize_program((32, 4), dts, scale);
    let (bf, x4, u8_) = (DType::BF16, DType::F8E4M3FNX4, DType::U8);
    assert_eq!(
        rule_of(&q((DType::F32, x4, u8_), (4, 0))),
        "quantize-mx-dtype"
    );
    assert_eq!(
        rule_of(&q((bf, DType::F4E2M1FNX4, u8_), (4, 0))),
        "quantize-mx-dtype"
    );
    assert_eq!(
        rule_of(&q((bf, x4, DType::F32), (4, 0))),
        "quantize-mx-dtype"
    );
    assert_eq!(rule_of(&q((bf, x4, u8_), (8, 2))), "mx-scale-offset");
    let p16 = quantize_program((16, 4), (bf, x4, u8_), (2, 0));
    assert_eq!(rule_of(&p16), "mx-partitions");
    // On Trn2 the instruction does not exist.
    let mut trn2 = q((bf, x4, u8_), (4, 0));
    trn2.target = Target::Trn2;
    assert_eq!(rule_of(&trn2), "isa-target");
    let mm = |dts, tiling| matmul_program((32, 16, 8), dts, false, tiling);
    let (e4, f32_) = (DType::F8E4M3FNX4, DType::F32);
    assert_eq!(
        rule_of(&mm((bf, e4, f32_), MatmulTiling::default())),
        "nc-matmul-mx-dtype"
    );
    assert_eq!(
        rule_of(&mm((e4, e4, DType::F16), MatmulTiling::default())),
        "nc-matmul-mx-dtype"
    );
    let tiling = |pos: [usize; 2], size: [usize; 2]| MatmulTiling {
        tile_position: pos.to_vec(),
        tile_size: size.to_vec(),
    };
    validate(&mm((e4, e4, f32_), tiling([32, 0], [32, 128]))).unwrap();
    for bad in [
        tiling([0, 0], [32, 64]),
        tiling([16, 0], [32, 128]),
        tiling([0, 32], [32, 128]),
    ] {
        assert_eq!(rule_of(&mm((e4, e4, f32_), bad)), "nc-matmul-mx-tiling");
    }
    let odd = matmul_program((32, 15, 8), (e4, e4, f32_), false, MatmulTiling::default());
    assert_eq!(rule_of(&odd), "nc-matmul-mx-size");
    // A packed tile anywhere else, and a converting DMA.
    let inputs = [spec("x", [32, 8], e4)];
    let copy = build(&inputs, Target::Trn3, |h| {
        let out = shared_hbm(&[32, 8], e4);
        let (a, b) = (sbuf([32, 8], e4), sbuf([32, 8], e4));
        dma_copy(&a, &h[0]);
        tensor_copy(&b, &a);
        dma_copy(&out, &b);
        vec![out]
    });
    assert_eq!(rule_of(&copy), "mx-packed-operand");
    let cast = build(&inputs, Target::Trn3, |h| {
        let out = shared_hbm(&[32, 8], DType::F32);
        let a = sbuf([32, 8], DType::F32);
        dma_copy(&a, &h[0]);
        dma_copy(&out, &a);
        vec![out]
    });
    assert_eq!(rule_of(&cast), "mx-packed-dma");
    // Scales in PSUM.
    let psum_scale = build(&[spec("x", [32, 16], bf)], Target::Trn3, |h| {
        let out = shared_hbm(&[32, 4], x4);
        let src = sbuf([32, 16], bf);
        dma_copy(&src, &h[0]);
        let (q, s) = (sbuf([32, 4], x4), psum([4, 4], u8_));
        quantize_mx(&q, &src, &s);
        dma_copy(&out, &q);
        vec![out]
    });
    assert_eq!(rule_of(&psum_scale), "mx-memory");
}

fn trace_error(inputs: &[InputSpec], f: impl Fn(&[Hbm]) -> Vec<Hbm>) -> String {
    match trace("k", Target::Trn3, inputs, f) {
        Err(NkiError::Trace { message, .. }) => message,
        other => panic!("expected a trace error, got {other:?}"),
    }
}

#[test]
fn shapes_are_checked_at_the_call() {
    let (bf, x4, u8_) = (DType::BF16, DType::F8E4M3FNX4, DType::U8);
    let inputs = [spec("x", [32, 16], bf)];
    let m = trace_error(&inputs, |h| {
        let src = sbuf([32, 16], bf);
        dma_copy(&src, &h[0]);
        quantize_mx(sbuf([32, 5], x4), &src, sbuf([4, 5], u8_));
        vec![]
    });
    assert!(m.contains("dst must be [32, 4]"), "{m}");
    let m = trace_error(&inputs, |h| {
        let src = sbuf([64, 16], bf);
        dma_copy(src.rows(32), &h[0]);
        quantize_mx(sbuf([64, 4], x4), &src, sbuf([32, 4], u8_));
        vec![]
    });
    assert!(m.contains("need 36"), "{m}");
    let m = trace_error(&inputs, |_| {
        let (st, mv) = (sbuf([32, 8], x4), sbuf([64, 8], x4));
        let (ss, ms) = (sbuf([4, 8], u8_), sbuf([36, 8], u8_));
        nc_matmul_mx(
            psum([8, 8], DType::F32),
            (&st, &mv),
            (&ss, &ms),
            MatmulTiling::default(),
            false,
        );
        vec![]
    });
    assert!(
        m.contains("stationary has 32 partitions (K) but moving has 64"),
        "{m}"
    );
    let m = trace_error(&inputs, |_| {
        let (st, mv) = (sbuf([32, 8], x4), sbuf([32, 8], x4));
        let (ss, ms) = (sbuf([4, 8], u8_), sbuf([4, 8], u8_));
        let tiling = MatmulTiling {
            tile_position: vec![0, 0],
            tile_size: vec![],
        };
        nc_matmul_mx(
            psum([8, 8], DType::F32),
            (&st, &mv),
            (&ss, &ms),
            tiling,
            false,
        );
        vec![]
    });
    assert!(m.contains("both given or neither"), "{m}");
}

#[test]
fn mx_instructions_cost_and_emit() {
    let p = matmul_program(
        (128, 64, 96),
        (DType::F8E4M3FNX4, DType::F8E4M3FNX4, DType::F32),
        false,
        MatmulTiling {
            tile_position: vec![0, 0],
            tile_size: vec![128, 128],
        },
    );
    let report = estimate(&p);
    let slice = report
        .slices
        .iter()
        .find(|s| s.name == "nc_matmul_mx")
        .unwrap();
    assert_eq!(slice.engine, Engine::Tensor);
    assert_eq!(report.flops, 2.0 * (4 * 128 * 64 * 96) as f64);
    let source = emit_nki(&p);
    assert!(
        source.contains(
            "nisa.nc_matmul_mx(dst=t4, stationary=t0, moving=t1, stationary_scale=t2, \
             moving_scale=t3, tile_position=(0, 0), tile_size=(128, 128), accumulate=False)"
        ),
        "{source}"
    );
    assert!(source.contains("dtype=nl.float8_e4m3fn_x4"), "{source}");
    let q = quantize_program(
        (128, 16),
        (DType::BF16, DType::F8E5M2X4, DType::U8),
        (128, 0),
    );
    let slice = estimate(&q)
        .slices
        .into_iter()
        .find(|s| s.name == "quantize_mx")
        .unwrap();
    assert_eq!(slice.engine, Engine::Vector);
    let source = emit_nki(&q);
    assert!(
        source.contains("nisa.quantize_mx(dst=t1, src=t0, dst_scale=t2[0:128, 0:16])")
            || source.contains("nisa.quantize_mx(dst=t1, src=t0, dst_scale=t2)"),
        "{source}"
    );
}
