//! The vector engine's `reciprocal` and `exponential`: simulated values (fp32 inside, rounded
//! to the destination's dtype, the special values, row sums of the fp32 results), trace-time
//! operand checks, targets, the engine and time the cost model gives them, and the NKI calls
//! codegen emits.

mod common;

use common::{input, run, values};
use nki_core::NkiError;
use nki_core::codegen::emit_nki;
use nki_core::cost::{Engine, estimate};
use nki_core::ir::{Program, ScalarOperand};
use nki_core::lang::{InputSpec, trace};
use nki_core::prelude::*;
use nki_core::validate::validate;

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
fn reciprocal_costs_eight_cycles_per_element_and_emits_its_nki_call() {
    let p = reciprocal_program(128, 600, DType::F32, DType::F32);
    let report = estimate(&p);
    let slices: Vec<_> = report
        .slices
        .iter()
        .filter(|s| s.name == "reciprocal")
        .collect();
    assert_eq!(slices.len(), 1);
    assert_eq!(slices[0].engine, Engine::Vector);
    // max(MIN_II, 8N) (NKI's engine-selection notes) over [128, 600] fp32 at two elements per
    // lane-cycle: 8 · ⌈600 / 2⌉ cycles at 0.96 GHz.
    let want = (8.0 * 300.0) / 0.96;
    assert!(((slices[0].end_ns - slices[0].start_ns) - want).abs() < 1e-6);
    let source = emit_nki(&p);
    assert!(
        source.contains("nisa.reciprocal(dst=t1, data=t0)  # nki-core/tests/vector_arithmetic.rs:"),
        "{source}"
    );
}

/// `exponential` of `x` `[rows, cols]` (in `data` dtype) into a `dst` of dtype `out` on Trn3,
/// with `max_value` from column 0 of input `m` (or the immediate `imm` when given), and with
/// `reduce` its row sums from `init` into an fp32 column (output 1).
fn exponential_program(
    (rows, cols): (usize, usize),
    (data, out): (DType, DType),
    imm: Option<f32>,
    reduce: Option<Option<f32>>,
) -> Program {
    let inputs = vec![
        InputSpec {
            name: "x".into(),
            shape: vec![rows, cols],
            dtype: data,
        },
        InputSpec {
            name: "m".into(),
            shape: vec![rows, 1],
            dtype: DType::F32,
        },
    ];
    trace("k", Target::Trn3, &inputs, |h| {
        let result = shared_hbm(&[rows, cols], out);
        let sums = shared_hbm(&[rows, 1], DType::F32);
        let x = sbuf([rows, cols], data);
        dma_copy(&x, &h[0]);
        let m = sbuf([rows, 1], DType::F32);
        dma_copy(&m, &h[1]);
        let max_value: ScalarOperand = match imm {
            Some(v) => v.into(),
            None => (&m).into(),
        };
        let y = sbuf([rows, cols], out);
        let s = sbuf([rows, 1], DType::F32);
        match reduce {
            None => {
                exponential(&y, &x, max_value);
                memset(&s, 0.0);
            }
            Some(None) => exponential_reduce(&y, &x, max_value, &s, 0.0),
            Some(Some(init)) => exponential_reduce(&y, &x, max_value, &s, init),
        }
        dma_copy(&result, &y);
        dma_copy(&sums, &s);
        vec![result, sums]
    })
    .unwrap()
}

/// The same through the scalar engine: `activation(exp, bias = −m)`, reducing with add.
fn activation_exp_program(rows: usize, cols: usize, data: DType, out: DType) -> Program {
    let inputs = vec![
        InputSpec {
            name: "x".into(),
            shape: vec![rows, cols],
            dtype: data,
        },
        InputSpec {
            name: "m".into(),
            shape: vec![rows, 1],
            dtype: DType::F32,
        },
    ];
    trace("k", Target::Trn3, &inputs, |h| {
        let result = shared_hbm(&[rows, cols], out);
        let sums = shared_hbm(&[rows, 1], DType::F32);
        let x = sbuf([rows, cols], data);
        dma_copy(&x, &h[0]);
        let m = sbuf([rows, 1], DType::F32);
        dma_copy(&m, &h[1]);
        tensor_scalar(&m, &m, BinOp::Multiply, -1.0);
        let y = sbuf([rows, cols], out);
        let s = sbuf([rows, 1], DType::F32);
        activation_reduce(&y, ActFn::Exp, &x, BinOp::Add, &s, Some(m.region()), 1.0);
        dma_copy(&result, &y);
        dma_copy(&sums, &s);
        vec![result, sums]
    })
    .unwrap()
}

#[test]
fn exponential_is_the_scalar_engines_exp_of_x_minus_max_with_fp32_row_sums() {
    // [128, 512] splits its rows across threads; bf16 and fp32 destinations.
    let (rows, cols) = (128, 512);
    let x = values(rows * cols, 1, 16.0);
    let m = values(rows, 2, 8.0);
    for (data, out) in [(DType::F32, DType::F32), (DType::BF16, DType::BF16)] {
        let got = run(
            &exponential_program((rows, cols), (data, out), None, Some(None)),
            &[&x, &m],
        );
        let want = run(&activation_exp_program(rows, cols, data, out), &[&x, &m]);
        assert!(got[0] == want[0], "{out:?} values");
        // The sums are of the fp32 exponentials, before rounding to dst.
        assert!(got[1] == want[1], "{out:?} sums");
        if out == DType::BF16 {
            let rounded_sum: f32 = got[0][..cols].iter().sum();
            assert_ne!(got[1][0], rounded_sum);
        }
        // Against f64 exp within a few fp32 ulps.
        for r in [0, 77] {
            for c in [0, 300] {
                let xv = data.round(x[r * cols + c]) as f64;
                let e = (xv - m[r] as f64).exp();
                let g = got[0][r * cols + c] as f64;
                assert!(
                    (g - out.round(e as f32) as f64).abs() <= e * 2e-2,
                    "{g} {e}"
                );
            }
        }
    }
}

#[test]
fn exponential_immediate_max_load_reduce_and_special_values() {
    let x = [
        0.0,
        1.0,
        -1.0,
        f32::NEG_INFINITY,
        f32::INFINITY,
        f32::NAN,
        100.0,
        -200.0,
    ];
    let m = [0.0];
    let got = run(
        &exponential_program(
            (1, 8),
            (DType::F32, DType::F32),
            Some(2.0),
            Some(Some(10.0)),
        ),
        &[&x, &m],
    );
    let e = &got[0];
    assert_eq!(e[0], nki_core::ir::ActFn::Exp.apply(-2.0));
    assert_eq!(e[3], 0.0);
    assert_eq!(e[4], f32::INFINITY);
    assert!(e[5].is_nan());
    assert_eq!(e[6], f32::INFINITY); // exp(98) overflows fp32
    assert_eq!(e[7], 0.0);
    // A NaN element makes the row sum NaN; load_reduce adds reduce_init.
    assert!(got[1][0].is_nan());
    let finite = [0.0, 1.0, -1.0, f32::NEG_INFINITY, 3.0, 2.0, 2.5, -4.0];
    let got = run(
        &exponential_program(
            (1, 8),
            (DType::F32, DType::F32),
            Some(2.0),
            Some(Some(10.0)),
        ),
        &[&finite, &m],
    );
    let sum: f32 = got[0].iter().sum();
    assert!((got[1][0] - (10.0 + sum)).abs() <= 1e-5 * (10.0 + sum));
    // Without a reduction the column is untouched (memset 0 here).
    let got = run(
        &exponential_program((1, 8), (DType::F32, DType::F32), None, None),
        &[&finite, &[1.0]],
    );
    assert_eq!(got[1], [0.0]);
    assert_eq!(got[0][1], 1.0);
}

#[test]
fn exponential_needs_neuroncore_v4() {
    let p = exponential_program((4, 8), (DType::F32, DType::F32), Some(0.0), None);
    validate(&p).unwrap();
    let on_trn2 = trace("k", Target::Trn2, &[], |_| {
        let out = shared_hbm(&[4, 8], DType::F32);
        let x = sbuf([4, 8], DType::F32);
        memset(&x, 1.0);
        exponential(&x, &x, 0.0);
        dma_copy(&out, &x);
        vec![out]
    })
    .unwrap();
    match validate(&on_trn2).unwrap_err() {
        NkiError::Validation(v) => {
            assert_eq!(v.rule, "isa-target");
            assert!(
                v.message.contains("exponential needs NeuronCore-v4"),
                "{}",
                v.message
            );
        }
        e => panic!("{e}"),
    }
}

#[test]
fn exponential_operands_are_checked_when_traced() {
    let attempt = |dst_cols: usize, max_rows: usize, res: (usize, DType), init_rows: usize| {
        trace("k", Target::Trn3, &[], |_| {
            let out = shared_hbm(&[4, 8], DType::F32);
            let x = sbuf([4, 8], DType::F32);
            memset(&x, 1.0);
            let y = sbuf([4, dst_cols], DType::F32);
            let m = sbuf([max_rows, 1], DType::F32);
            memset(&m, 0.0);
            let s = sbuf([res.0, 1], res.1);
            let init = sbuf([init_rows, 1], DType::F32);
            memset(&init, 0.0);
            exponential_reduce(&y, &x, &m, &s, &init);
            dma_copy(&out, &x);
            vec![out]
        })
        .map(|_| ())
        .unwrap_err()
        .to_string()
    };
    let f32_res = (4, DType::F32);
    let e = attempt(6, 4, f32_res, 4);
    assert!(
        e.contains("exponential: src has shape [4, 8] but dst has shape [4, 6]"),
        "{e}"
    );
    let e = attempt(8, 2, f32_res, 4);
    assert!(
        e.contains("exponential: max_value must be a (4, 1) column, got shape [2, 1]"),
        "{e}"
    );
    let e = attempt(8, 4, (3, DType::F32), 4);
    assert!(
        e.contains("exponential: reduce_res must be a (4, 1) column, got shape [3, 1]"),
        "{e}"
    );
    let e = attempt(8, 4, (4, DType::I32), 4);
    assert!(
        e.contains("exponential: reduce_res must be a floating-point tile, got i32"),
        "{e}"
    );
    let e = attempt(8, 4, f32_res, 1);
    assert!(
        e.contains("exponential: reduce_init must be a (4, 1) column, got shape [1, 1]"),
        "{e}"
    );
}

#[test]
fn exponential_costs_a_vector_pass_and_emits_its_keywords() {
    let p = exponential_program((128, 600), (DType::F32, DType::F32), None, Some(None));
    let report = estimate(&p);
    let slice = report
        .slices
        .iter()
        .find(|s| s.name == "exponential")
        .unwrap();
    assert_eq!(slice.engine, Engine::Vector);
    // tensor_scalar's max(64, ⌈600 / 2⌉) cycles, plus 64 for the row sum, at Trn3's 1.2 GHz.
    let want = (300.0 + 64.0) / 1.2;
    assert!(
        ((slice.end_ns - slice.start_ns) - want).abs() < 1e-6,
        "{slice:?}"
    );
    let source = emit_nki(&p);
    assert!(
        source.contains(
            "nisa.exponential(dst=t2, src=t0, max_value=t1, reduce_res=t3, \
             reduce_cmd=nisa.reduce_cmd.reset_reduce)"
        ),
        "{source}"
    );
    let source = emit_nki(&exponential_program(
        (4, 8),
        (DType::F32, DType::BF16),
        Some(0.0),
        Some(Some(-1.5)),
    ));
    assert!(
        source.contains(
            "nisa.exponential(dst=t2, src=t0, reduce_res=t3, \
             reduce_cmd=nisa.reduce_cmd.load_reduce, reduce_init=-1.5)"
        ),
        "{source}"
    );
    let source = emit_nki(&exponential_program(
        (4, 8),
        (DType::F32, DType::F32),
        Some(3.0),
        None,
    ));
    assert!(
        source.contains("nisa.exponential(dst=t2, src=t0, max_value=3.0)"),
        "{source}"
    );
}
