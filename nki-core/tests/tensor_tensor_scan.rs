//! `tensor_tensor_scan`: a scan along the free dim, `dst[f] = op1(op0(data0[f], dst[f−1]),
//! data1[f])` from `initial` (an immediate or a `(P, 1)` column), `reverse0` / `reverse1` swapping
//! operands. Simulated, it gives the bits of a plain loop carrying the state in fp32 and rounding
//! each element once to `dst`'s dtype (fp32 and bf16, on one thread and split across rows, in
//! place); its operands are checked when traced and its PSUM rule when validated; it costs a
//! two-input vector pass and codegen emits its keywords.

mod common;

use common::{named_inputs, run, values};
use nki_core::NkiError;
use nki_core::codegen::emit_nki;
use nki_core::cost::{Engine, estimate};
use nki_core::ir::{Program, ScalarOperand};
use nki_core::lang::{InputSpec, trace};
use nki_core::prelude::*;
use nki_core::validate::validate;

/// How the scan is set up.
#[derive(Clone, Copy, Debug)]
struct Scan {
    ops: (BinOp, BinOp),
    reverse: (bool, bool),
    /// `Some(v)`: the immediate `v`; `None`: the `(P, 1)` column input `c`.
    initial: Option<f32>,
    /// Write the result over `data0`'s tile.
    in_place: bool,
}

/// The scan of `a`, `b` `[rows, cols]` (in `data`), `c` `[rows, 1]` fp32, into a `dst` of
/// dtype `out` (the only output).
fn scan_program((rows, cols): (usize, usize), (data, out): (DType, DType), s: Scan) -> Program {
    let mut inputs = named_inputs(&["a", "b"], [rows, cols], data);
    inputs.push(InputSpec {
        name: "c".into(),
        shape: vec![rows, 1],
        dtype: DType::F32,
    });
    trace("k", Target::Trn2, &inputs, |h| {
        let result = shared_hbm(&[rows, cols], out);
        let (a, b, c) = (
            sbuf([rows, cols], data),
            sbuf([rows, cols], data),
            sbuf([rows, 1], DType::F32),
        );
        dma_copy(&a, &h[0]);
        dma_copy(&b, &h[1]);
        dma_copy(&c, &h[2]);
        let initial = match s.initial {
            Some(value) => ScalarOperand::Imm { value },
            None => ScalarOperand::from(&c),
        };
        let dst = if s.in_place {
            a.clone()
        } else {
            sbuf([rows, cols], out)
        };
        let (op0, op1) = s.ops;
        tensor_tensor_scan(&dst, &a, &b, initial, op0, op1, s.reverse.0, s.reverse.1);
        dma_copy(&result, &dst);
        vec![result]
    })
    .unwrap()
}

/// The reference: a loop over each row in fp32, each element rounded to `out` on write.
fn reference(
    (rows, cols): (usize, usize),
    (a, b, c): (&[f32], &[f32], &[f32]),
    out: DType,
    s: Scan,
) -> Vec<f32> {
    let (op0, op1) = s.ops;
    let mut dst = vec![0.0; rows * cols];
    for r in 0..rows {
        let mut state = s.initial.unwrap_or(c[r]);
        for f in 0..cols {
            let (x, y) = (a[r * cols + f], b[r * cols + f]);
            let t = if s.reverse.0 {
                op0.apply(state, x)
            } else {
                op0.apply(x, state)
            };
            state = if s.reverse.1 {
                op1.apply(y, t)
            } else {
                op1.apply(t, y)
            };
            dst[r * cols + f] = out.round(state);
        }
    }
    dst
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|f| f.to_bits()).collect()
}

#[test]
fn scans_each_row_in_fp32_and_rounds_each_element_once() {
    let plain = Scan {
        ops: (BinOp::Multiply, BinOp::Add),
        reverse: (false, false),
        initial: Some(0.0),
        in_place: false,
    };
    let cases = [
        plain,
        Scan {
            initial: None,
            ..plain
        },
        Scan {
            ops: (BinOp::Subtract, BinOp::Subtract),
            reverse: (true, false),
            initial: Some(1.5),
            ..plain
        },
        Scan {
            ops: (BinOp::Subtract, BinOp::Subtract),
            reverse: (false, true),
            initial: None,
            ..plain
        },
        Scan {
            ops: (BinOp::Maximum, BinOp::Multiply),
            reverse: (true, true),
            ..plain
        },
        Scan {
            in_place: true,
            initial: None,
            ..plain
        },
    ];
    // (128, 512) is split across the simulator's threads, (5, 37) runs row after row.
    for (rows, cols) in [(5, 37), (128, 512)] {
        // Decay factors in (0, 1) as a mamba scan's, and inputs of either sign.
        let a: Vec<f32> = values(rows * cols, 1, 1.0)
            .iter()
            .map(|v| v + 0.5)
            .collect();
        let b = values(rows * cols, 2, 4.0);
        let c = values(rows, 3, 10.0);
        for (data, out) in [
            (DType::F32, DType::F32),
            (DType::BF16, DType::BF16),
            (DType::BF16, DType::F32),
        ] {
            let (a, b): (Vec<f32>, Vec<f32>) = (
                a.iter().map(|v| data.round(*v)).collect(),
                b.iter().map(|v| data.round(*v)).collect(),
            );
            for s in cases {
                if s.in_place && data != out {
                    continue;
                }
                let got = run(&scan_program((rows, cols), (data, out), s), &[&a, &b, &c]);
                let want = reference((rows, cols), (&a, &b, &c), out, s);
                assert_eq!(
                    bits(&got[0]),
                    bits(&want),
                    "{rows}x{cols} {data:?}→{out:?} {s:?}"
                );
            }
        }
    }
}

#[test]
fn the_state_is_carried_in_fp32_not_in_dst_dtype() {
    // A running sum from 1.0 in steps of 2^-9 into bf16 (whose step at 1.0 is 2^-7): carried in
    // fp32 the partial sums reach 1 + 3·2^-9, which rounds to 1 + 2^-7; a state rounded to bf16
    // at every step would stay at 1.0.
    let (rows, cols) = (1, 4);
    let s = Scan {
        ops: (BinOp::Multiply, BinOp::Add),
        reverse: (false, false),
        initial: Some(1.0),
        in_place: false,
    };
    let a = vec![1.0; cols];
    let b = vec![2f32.powi(-9); cols];
    let got = run(
        &scan_program((rows, cols), (DType::F32, DType::BF16), s),
        &[&a, &b, &[0.0]],
    );
    let step = 2f32.powi(-7);
    // 1 + 2^-9 and 1 + 2^-8 (a tie, to even) round to 1.0; 1 + 3·2^-9 and 1 + 2^-7 do not.
    assert_eq!(got[0], vec![1.0, 1.0, 1.0 + step, 1.0 + step]);
    let want = reference((rows, cols), (&a, &b, &[0.0]), DType::BF16, s);
    assert_eq!(bits(&got[0]), bits(&want));
}

#[test]
fn operands_are_checked_when_traced_and_psum_when_validated() {
    let attempt = |b_cols: usize, initial_rows: usize| {
        trace("k", Target::Trn2, &[], |_| {
            let out = shared_hbm(&[4, 8], DType::F32);
            let (a, b) = (sbuf([4, 8], DType::F32), sbuf([4, b_cols], DType::F32));
            let c = sbuf([initial_rows, 1], DType::F32);
            memset(&a, 1.0);
            memset(&b, 1.0);
            memset(&c, 0.0);
            tensor_tensor_scan(&a, &a, &b, &c, BinOp::Multiply, BinOp::Add, false, false);
            dma_copy(&out, &a);
            vec![out]
        })
        .map(|_| ())
        .unwrap_err()
        .to_string()
    };
    let e = attempt(6, 4);
    assert!(
        e.contains("tensor_tensor_scan: data1 has shape [4, 6] but data0 has shape [4, 8]"),
        "{e}"
    );
    let e = attempt(8, 3);
    assert!(
        e.contains("tensor_tensor_scan: initial must be a (4, 1) column, got shape [3, 1]"),
        "{e}"
    );
    let both = trace("k", Target::Trn2, &[], |_| {
        let out = shared_hbm(&[4, 8], DType::F32);
        let (a, b) = (psum([4, 8], DType::F32), psum([4, 8], DType::F32));
        memset(&a, 1.0);
        memset(&b, 1.0);
        let dst = sbuf([4, 8], DType::F32);
        tensor_tensor_scan(&dst, &a, &b, 0.0, BinOp::Multiply, BinOp::Add, false, false);
        dma_copy(&out, &dst);
        vec![out]
    })
    .unwrap();
    match validate(&both).unwrap_err() {
        NkiError::Validation(v) => {
            assert_eq!(v.rule, "psum-both-inputs");
            assert!(
                v.message.contains("tensor_tensor_scan: data0"),
                "{}",
                v.message
            );
        }
        e => panic!("{e}"),
    }
}

#[test]
fn costs_a_two_input_vector_pass_and_emits_its_nki_call() {
    let s = Scan {
        ops: (BinOp::Multiply, BinOp::Add),
        reverse: (false, false),
        initial: Some(0.0),
        in_place: false,
    };
    let p = scan_program((128, 600), (DType::F32, DType::F32), s);
    validate(&p).unwrap();
    let report = estimate(&p);
    let slice = report
        .slices
        .iter()
        .find(|s| s.name == "tensor_tensor_scan")
        .unwrap();
    assert_eq!(slice.engine, Engine::Vector);
    // Two fp32 inputs, as tensor_tensor: 64 + 2 · ⌈600 / 2⌉ cycles at 0.96 GHz.
    let want = 600.0 / 0.96;
    assert!(
        ((slice.end_ns - slice.start_ns) - want).abs() < 1e-6,
        "{slice:?}"
    );
    let source = emit_nki(&p);
    assert!(
        source.contains(
            "nisa.tensor_tensor_scan(dst=t3, data0=t0, data1=t1, initial=0.0, op0=nl.multiply, \
             op1=nl.add)"
        ),
        "{source}"
    );
    let reversed = Scan {
        reverse: (true, true),
        initial: None,
        ..s
    };
    let source = emit_nki(&scan_program((4, 8), (DType::F32, DType::F32), reversed));
    assert!(
        source.contains("initial=t2, op0=nl.multiply, op1=nl.add, reverse0=True, reverse1=True)"),
        "{source}"
    );
}
