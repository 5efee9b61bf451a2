//! The vector engine's `reciprocal`: simulated values (fp32 inside, rounded to the
//! destination's dtype, the special values), trace-time operand checks, the engine and time the
//! cost model gives it, and the NKI call codegen emits.

use nki_core::codegen::emit_nki;
use nki_core::cost::{Engine, estimate};
use nki_core::ir::Program;
use nki_core::lang::{InputSpec, trace};
use nki_core::prelude::*;
use nki_core::sim::{SimOptions, simulate_to_vecs};
use nki_core::validate::validate;

/// One input `x` of `shape` in `dtype`.
fn input(shape: [usize; 2], dtype: DType) -> Vec<InputSpec> {
    vec![InputSpec {
        name: "x".into(),
        shape: shape.to_vec(),
        dtype,
    }]
}

/// Simulates `p` on `x` (encoded in the input's dtype) and reads every output back as f32s.
fn run(p: &Program, inputs: &[&[f32]]) -> Vec<Vec<f32>> {
    let dtypes: Vec<DType> = p.inputs().map(|(_, d)| d.dtype).collect();
    let encoded: Vec<Vec<u8>> = inputs
        .iter()
        .zip(&dtypes)
        .map(|(v, dt)| {
            let mut bytes = vec![0; v.len() * dt.size_bytes()];
            for (i, x) in v.iter().enumerate() {
                dt.write(&mut bytes, i, *x);
            }
            bytes
        })
        .collect();
    let refs: Vec<&[u8]> = encoded.iter().map(Vec::as_slice).collect();
    let outs = simulate_to_vecs(p, &refs, SimOptions::default()).unwrap();
    let out_dtypes: Vec<DType> = p
        .outputs
        .iter()
        .map(|o| p.hbm[o.0 as usize].dtype)
        .collect();
    outs.iter()
        .zip(out_dtypes)
        .map(|(b, dt)| {
            (0..b.len() / dt.size_bytes())
                .map(|i| dt.read(b, i))
                .collect()
        })
        .collect()
}

/// `reciprocal` of `x` `[rows, cols]` (in `data` dtype) into a `dst` tile of dtype `out`.
fn reciprocal_program(rows: usize, cols: usize, data: DType, out: DType) -> Program {
    trace("k", Target::Trn2, &input([rows, cols], data), |h| {
        let result = shared_hbm(&[rows, cols], out);
        let x = sbuf([rows, cols], data);
        dma_copy(&x, &h[0]);
        let y = sbuf([rows, cols], out);
        reciprocal(&y, &x);
        dma_copy(&result, &y);
        vec![result]
    })
    .unwrap()
}

#[test]
fn reciprocal_is_one_over_x_in_fp32_with_the_special_values() {
    let x = [
        2.0,
        -4.0,
        3.0,
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        1e-40, // subnormal: its reciprocal overflows to inf
        7.0,
    ];
    let got = run(&reciprocal_program(1, 10, DType::F32, DType::F32), &[&x]).remove(0);
    let want: Vec<f32> = x.iter().map(|v| 1.0 / v).collect();
    assert_eq!(
        got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        want.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
    );
    assert_eq!(got[3], f32::INFINITY);
    assert_eq!(got[4], f32::NEG_INFINITY);
    assert_eq!(got[5].to_bits(), 0.0f32.to_bits());
    assert_eq!(got[6].to_bits(), (-0.0f32).to_bits());
    assert!(got[7].is_nan());
}

#[test]
fn reciprocal_rounds_the_fp32_quotient_once_to_the_dst_dtype() {
    // Large enough to split rows across threads; bf16 in, bf16 and fp32 out.
    let (rows, cols) = (128, 300);
    let x: Vec<f32> = (0..rows * cols)
        .map(|i| ((i * 7919 % 2003) as f32 - 1001.0) * 0.0137 + 0.003)
        .collect();
    let bf16_x: Vec<f32> = x.iter().map(|v| DType::BF16.round(*v)).collect();
    for out in [DType::BF16, DType::F32] {
        let got = run(&reciprocal_program(rows, cols, DType::BF16, out), &[&x]).remove(0);
        let want: Vec<f32> = bf16_x.iter().map(|v| out.round(1.0 / v)).collect();
        assert!(got == want, "{out:?}");
    }
    // 1/3 in bf16 is the rounding of the fp32 quotient.
    let got = run(
        &reciprocal_program(1, 1, DType::F32, DType::BF16),
        &[&[3.0]],
    )
    .remove(0);
    assert_eq!(got, [half::bf16::from_f32(1.0 / 3.0).to_f32()]);
}

#[test]
fn reciprocal_in_place_and_from_psum() {
    let p = trace("k", Target::Trn2, &input([4, 8], DType::F32), |h| {
        let out = shared_hbm(&[4, 8], DType::F32);
        let x = sbuf([4, 8], DType::F32);
        dma_copy(&x, &h[0]);
        let acc = psum([4, 8], DType::F32);
        reciprocal(&acc, &x);
        reciprocal(&x, &acc);
        reciprocal(x.region().slice(0, 4, 0, 4), x.region().slice(0, 4, 4, 4));
        dma_copy(&out, &x);
        vec![out]
    })
    .unwrap();
    validate(&p).unwrap();
    let x: Vec<f32> = (1..=32).map(|v| v as f32).collect();
    let got = run(&p, &[&x]).remove(0);
    for r in 0..4 {
        for c in 0..8 {
            let v = x[r * 8 + c];
            let twice = 1.0 / (1.0 / v);
            let want = if c < 4 {
                1.0 / (1.0 / (1.0 / x[r * 8 + c + 4]))
            } else {
                twice
            };
            assert_eq!(got[r * 8 + c], want, "{r}, {c}");
        }
    }
}

#[test]
fn reciprocal_operands_are_checked_when_traced() {
    let e = trace("k", Target::Trn2, &[], |_| {
        let out = shared_hbm(&[4, 8], DType::F32);
        let x = sbuf([4, 8], DType::F32);
        memset(&x, 1.0);
        let y = sbuf([4, 6], DType::F32);
        reciprocal(&y, &x);
        dma_copy(&out, &x);
        vec![out]
    })
    .map(|_| ())
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("reciprocal: data has shape [4, 8] but dst has shape [4, 6]"),
        "{e}"
    );
}

#[test]
fn reciprocal_costs_a_one_input_vector_pass_and_emits_its_nki_call() {
    let p = reciprocal_program(128, 600, DType::F32, DType::F32);
    let report = estimate(&p);
    let slices: Vec<_> = report
        .slices
        .iter()
        .filter(|s| s.name == "reciprocal")
        .collect();
    assert_eq!(slices.len(), 1);
    assert_eq!(slices[0].engine, Engine::Vector);
    // As tensor_scalar over [128, 600] fp32: 64 + ⌈600 / 2⌉ cycles at 0.96 GHz.
    let want = (64.0 + 300.0) / 0.96;
    assert!(((slices[0].end_ns - slices[0].start_ns) - want).abs() < 1e-6);
    let source = emit_nki(&p);
    assert!(
        source.contains("nisa.reciprocal(dst=t1, data=t0)  # nki-core/tests/vector_arithmetic.rs:"),
        "{source}"
    );
}
