//! `activate2`: `op((data <op0> imm0) <op1> imm1)` with the function's parameter (`nl.prelu`'s
//! slope) and an optional row reduction, on the scalar engine of NeuronCore-v4. Against the
//! docs' pseudocode written as a loop, for every supported stage pair, reversed operands,
//! immediates and columns, fp32 and bf16, each reduction; its trace checks, its target and
//! `activation-target` rules, cost and codegen.

mod common;

use common::{run, values};
use nki_core::NkiError;
use nki_core::codegen::emit_nki;
use nki_core::cost::{Engine, estimate};
use nki_core::ir::{Program, ScalarOperand};
use nki_core::lang::{InputSpec, trace};
use nki_core::prelude::*;
use nki_core::validate::validate;

fn spec(name: &str, shape: [usize; 2], dtype: DType) -> InputSpec {
    InputSpec {
        name: name.into(),
        shape: shape.to_vec(),
        dtype,
    }
}

/// A stage's operand: an immediate, or the fp32 column input `c0` / `c1`.
#[derive(Clone, Copy, Debug)]
enum Operand {
    Imm(f32),
    Column,
}

/// One test case: the function, its stages `(op, operand, reverse)` (`None`: bypass), the
/// parameter and the reduction.
#[derive(Clone, Copy, Debug)]
struct Case {
    func: ActFn,
    stages: [Option<(BinOp, Operand, bool)>; 2],
    param: Operand,
    reduce: Option<BinOp>,
}

/// `activate2` of `x` (input 0, `dtype`) with columns `c0`, `c1`, `alpha` (inputs 1 to 3) into
/// `dst` (output 0, `dtype`) and, with a reduction, its fp32 row results (output 1).
fn program((rows, cols): (usize, usize), dtype: DType, case: Case, target: Target) -> Program {
    let inputs = vec![
        spec("x", [rows, cols], dtype),
        spec("c0", [rows, 1], DType::F32),
        spec("c1", [rows, 1], DType::F32),
        spec("alpha", [rows, 1], DType::F32),
    ];
    trace("k", target, &inputs, move |h| {
        let out = shared_hbm(&[rows, cols], dtype);
        let x = sbuf([rows, cols], dtype);
        dma_copy(&x, &h[0]);
        let cols_in: Vec<_> = (1..4)
            .map(|i| {
                let c = sbuf([rows, 1], DType::F32);
                dma_copy(&c, &h[i]);
                c
            })
            .collect();
        let operand = |o: Operand, i: usize| -> ScalarOperand {
            match o {
                Operand::Imm(v) => v.into(),
                Operand::Column => (&cols_in[i]).into(),
            }
        };
        let stage = |i: usize| match case.stages[i] {
            None => Activate2Stage::bypass(),
            Some((op, o, false)) => Activate2Stage::new(op, operand(o, i)),
            Some((op, o, true)) => Activate2Stage::new(op, operand(o, i)).reversed(),
        };
        let dst = sbuf([rows, cols], dtype);
        let param = operand(case.param, 2);
        let mut outs = vec![out.clone()];
        match case.reduce {
            None => activate2(&dst, case.func, &x, stage(0), stage(1), param),
            Some(op) => {
                let res = sbuf([rows, 1], DType::F32);
                activate2_reduce(&dst, case.func, &x, (stage(0), stage(1)), param, op, &res);
                let r = shared_hbm(&[rows, 1], DType::F32);
                dma_copy(&r, &res);
                outs.push(r);
            }
        }
        dma_copy(&out, &dst);
        outs
    })
    .unwrap()
}

/// The docs' pseudocode: each stage (swapped when reversed), the function with its
/// parameter, the reduction of the fp32 results; `dst` rounded to `dtype`.
fn reference(
    (rows, cols): (usize, usize),
    dtype: DType,
    case: Case,
    x: &[f32],
    columns: [&[f32]; 3],
) -> (Vec<f32>, Vec<f32>) {
    let value = |o: Operand, i: usize, r: usize| match o {
        Operand::Imm(v) => v,
        Operand::Column => columns[i][r],
    };
    let mut out = vec![0.0; rows * cols];
    let mut totals = Vec::new();
    for r in 0..rows {
        let mut acc = match case.reduce {
            Some(BinOp::Add) | Some(BinOp::AbsMax) => 0.0,
            Some(BinOp::Maximum) => f32::NEG_INFINITY,
            _ => f32::INFINITY,
        };
        for c in 0..cols {
            let mut t = x[r * cols + c];
            for (i, s) in case.stages.iter().enumerate() {
                if let Some((op, o, reverse)) = *s {
                    let v = value(o, i, r);
                    t = if reverse {
                        op.apply(v, t)
                    } else {
                        op.apply(t, v)
                    };
                }
            }
            let y = case.func.apply_with(t, value(case.param, 2, r));
            if let Some(op) = case.reduce {
                acc = match op {
                    BinOp::Add => acc + y,
                    BinOp::Maximum => acc.max(y),
                    BinOp::Minimum => acc.min(y),
                    BinOp::AbsMax => acc.max(y.abs()),
                    _ => acc.min(y.abs()),
                };
            }
            out[r * cols + c] = dtype.round(y);
        }
        totals.push(acc);
    }
    (out, totals)
}

fn close(got: &[f32], want: &[f32], rel: f32, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= rel * w.abs().max(1.0),
            "{what}: element {i}: {g} vs {w}"
        );
    }
}

use BinOp::{Add, Multiply as Mul, Subtract as Sub};

#[test]
fn activate2_runs_the_docs_pipeline_for_every_stage_pair() {
    let (rows, cols) = (6, 40);
    let pairs: [[Option<(BinOp, Operand, bool)>; 2]; 9] = [
        [
            Some((Mul, Operand::Imm(2.0), false)),
            Some((Add, Operand::Imm(0.5), false)),
        ],
        [
            Some((Mul, Operand::Column, false)),
            Some((Sub, Operand::Column, false)),
        ],
        [
            Some((Mul, Operand::Imm(-1.5), true)),
            Some((Sub, Operand::Imm(3.0), true)),
        ],
        [Some((Mul, Operand::Column, false)), None],
        [Some((Add, Operand::Imm(-0.25), false)), None],
        [Some((Sub, Operand::Column, false)), None],
        [Some((Sub, Operand::Imm(1.0), true)), None],
        [Some((Add, Operand::Column, true)), None],
        [None, None],
    ];
    let x = values(rows * cols, 5, 6.0);
    let c0: Vec<f32> = (0..rows).map(|r| 0.5 + r as f32 * 0.25).collect();
    let c1: Vec<f32> = (0..rows).map(|r| r as f32 - 2.0).collect();
    let alpha: Vec<f32> = (0..rows).map(|r| 0.05 * (r + 1) as f32).collect();
    for stages in pairs {
        for (func, param) in [
            (ActFn::Gelu, Operand::Imm(0.0)),
            (ActFn::Prelu, Operand::Imm(0.1)),
            (ActFn::Prelu, Operand::Column),
            (ActFn::Identity, Operand::Imm(0.0)),
            (ActFn::Exp, Operand::Imm(0.0)),
        ] {
            for dtype in [DType::F32, DType::BF16] {
                let xs: Vec<f32> = x.iter().map(|v| dtype.round(*v)).collect();
                let case = Case {
                    func,
                    stages,
                    param,
                    reduce: None,
                };
                let p = program((rows, cols), dtype, case, Target::Trn3);
                validate(&p).unwrap();
                let got = run(&p, &[&xs, &c0, &c1, &alpha]);
                let (want, _) = reference((rows, cols), dtype, case, &xs, [&c0, &c1, &alpha]);
                // exp's fast fp32 exponential is within a few ulps of the reference's.
                let rel = if func == ActFn::Exp { 4e-6 } else { 0.0 };
                close(&got[0], &want, rel, &format!("{case:?} {dtype}"));
            }
        }
    }
}

#[test]
fn prelu_scales_negative_inputs_by_relu_param() {
    let (rows, cols) = (2, 4);
    let case = Case {
        func: ActFn::Prelu,
        stages: [None, None],
        param: Operand::Column,
        reduce: None,
    };
    let p = program((rows, cols), DType::F32, case, Target::Trn3);
    let x = [-4.0, -1.0, 0.0, 3.0, -8.0, 2.0, -0.5, 1.0];
    let got = run(&p, &[&x, &[0.0, 0.0], &[0.0, 0.0], &[0.25, 0.5]]);
    assert_eq!(got[0], [-1.0, -0.25, 0.0, 3.0, -4.0, 2.0, -0.25, 1.0]);
}

#[test]
fn activate2_reduces_each_rows_fp32_results() {
    for (rows, cols) in [(3, 17), (128, 260)] {
        let x = values(rows * cols, 9, 8.0);
        let c0: Vec<f32> = (0..rows).map(|r| 1.0 + (r % 5) as f32 * 0.5).collect();
        let c1: Vec<f32> = (0..rows).map(|r| (r % 7) as f32 - 3.0).collect();
        let alpha = vec![0.2; rows];
        for reduce in [
            BinOp::Add,
            BinOp::Maximum,
            BinOp::Minimum,
            BinOp::AbsMax,
            BinOp::AbsMin,
        ] {
            for dtype in [DType::F32, DType::BF16] {
                let case = Case {
                    func: ActFn::Prelu,
                    stages: [
                        Some((Mul, Operand::Column, false)),
                        Some((Add, Operand::Column, false)),
                    ],
                    param: Operand::Imm(0.2),
                    reduce: Some(reduce),
                };
                let xs: Vec<f32> = x.iter().map(|v| dtype.round(*v)).collect();
                let p = program((rows, cols), dtype, case, Target::Trn3);
                validate(&p).unwrap();
                let got = run(&p, &[&xs, &c0, &c1, &alpha]);
                let (want, totals) = reference((rows, cols), dtype, case, &xs, [&c0, &c1, &alpha]);
                let what = format!("{rows}x{cols} {reduce:?} {dtype}");
                assert_eq!(got[0], want, "{what}");
                // Sums in another order than the reference's left-to-right loop.
                let rel = if reduce == BinOp::Add { 1e-5 } else { 0.0 };
                close(&got[1], &totals, rel, &what);
            }
        }
    }
}

/// The trace error of a kernel body on Trn3 (no inputs or outputs).
fn trace_err(body: impl Fn()) -> String {
    trace("k", Target::Trn3, &[], |_| {
        body();
        vec![]
    })
    .map(|_| ())
    .unwrap_err()
    .to_string()
}

/// A kernel body and the trace error it must raise.
type TraceCase = (Box<dyn Fn()>, &'static str);

#[test]
fn activate2_checks_its_stages_operands_and_reduction() {
    let t = || sbuf([4, 8], DType::F32);
    let col = |dt: DType| sbuf([4, 1], dt);
    let cases: Vec<TraceCase> = vec![
        (
            Box::new(move || {
                let s0 = Activate2Stage::new(BinOp::Add, 1.0);
                let s1 = Activate2Stage::new(BinOp::Add, 1.0);
                activate2(t(), ActFn::Exp, t(), s0, s1, 0.0)
            }),
            "(nl.add, nl.add) is not a supported pair",
        ),
        (
            Box::new(move || {
                let s1 = Activate2Stage::new(BinOp::Add, 1.0);
                activate2(t(), ActFn::Exp, t(), Activate2Stage::bypass(), s1, 0.0)
            }),
            "op1 requires op0 to be set",
        ),
        (
            Box::new(move || {
                let s0 = Activate2Stage::new(BinOp::Maximum, 1.0);
                activate2(t(), ActFn::Exp, t(), s0, Activate2Stage::bypass(), 0.0)
            }),
            "(nl.maximum, nl.bypass) is not a supported pair",
        ),
        (
            Box::new(move || {
                let s0 = Activate2Stage::bypass().reversed();
                activate2(t(), ActFn::Exp, t(), s0, Activate2Stage::bypass(), 0.0)
            }),
            "reverse0=True requires op0 to be set",
        ),
        (
            Box::new(move || {
                let s0 = Activate2Stage::new(BinOp::Multiply, sbuf([3, 1], DType::F32));
                activate2(t(), ActFn::Exp, t(), s0, Activate2Stage::bypass(), 0.0)
            }),
            "imm0 must be a (4, 1) column",
        ),
        (
            Box::new(move || {
                let s0 = Activate2Stage::new(BinOp::Multiply, col(DType::F32));
                let s1 = Activate2Stage::new(BinOp::Add, col(DType::BF16));
                activate2(t(), ActFn::Exp, t(), s0, s1, 0.0)
            }),
            "imm0 and imm1 are tiles of different dtypes",
        ),
        (
            Box::new(move || {
                let b = Activate2Stage::bypass();
                activate2(
                    t(),
                    ActFn::Prelu,
                    t(),
                    b.clone(),
                    b,
                    sbuf([4, 2], DType::F32),
                )
            }),
            "relu_param must be a (4, 1) column",
        ),
        (
            Box::new(move || {
                let b = Activate2Stage::bypass();
                activate2(sbuf([4, 9], DType::F32), ActFn::Exp, t(), b.clone(), b, 0.0)
            }),
            "data has shape [4, 8] but dst has shape [4, 9]",
        ),
        (
            Box::new(move || {
                let b = Activate2Stage::bypass();
                let res = col(DType::F32);
                activate2_reduce(
                    t(),
                    ActFn::Exp,
                    t(),
                    (b.clone(), b),
                    0.0,
                    BinOp::Multiply,
                    &res,
                )
            }),
            "reduce_op=nl.multiply is not one of its reductions",
        ),
    ];
    for (body, want) in cases {
        let err = trace_err(body);
        assert!(err.contains(want), "{err}\nwanted: {want}");
    }
}

fn rule_of(p: Program) -> (String, String) {
    match validate(&p).unwrap_err() {
        NkiError::Validation(v) => (v.rule.to_string(), v.message),
        e => panic!("{e}"),
    }
}

#[test]
fn activate2_and_prelu_need_neuroncore_v4() {
    let case = Case {
        func: ActFn::Gelu,
        stages: [Some((Mul, Operand::Imm(2.0), false)), None],
        param: Operand::Imm(0.0),
        reduce: None,
    };
    for target in [Target::Trn1, Target::Trn2] {
        let (rule, message) = rule_of(program((4, 8), DType::F32, case, target));
        assert_eq!(rule, "isa-target", "{message}");
        assert!(
            message.contains("activate2 needs NeuronCore-v4"),
            "{message}"
        );
    }
    // nl.prelu is an activation function of NeuronCore-v4 too, also in nisa.activation.
    let p = trace("k", Target::Trn2, &[], |_| {
        let t = sbuf([4, 8], DType::F32);
        activation(&t, ActFn::Prelu, &t, None, 1.0);
        vec![]
    })
    .unwrap();
    let (rule, message) = rule_of(p);
    assert_eq!(rule, "activation-target");
    assert!(
        message.contains("nl.prelu is an activation function of NeuronCore-v4"),
        "{message}"
    );
    let p = trace("k", Target::Trn3, &[], |_| {
        let t = sbuf([4, 8], DType::F32);
        activation(&t, ActFn::Prelu, &t, None, 1.0);
        vec![]
    })
    .unwrap();
    validate(&p).unwrap();
}

#[test]
fn activation_applies_prelu_without_a_slope() {
    let p = trace("k", Target::Trn3, &[spec("x", [1, 4], DType::F32)], |h| {
        let out = shared_hbm(&[1, 4], DType::F32);
        let t = sbuf([1, 4], DType::F32);
        dma_copy(&t, &h[0]);
        activation(&t, ActFn::Prelu, &t, None, 2.0);
        dma_copy(&out, &t);
        vec![out]
    })
    .unwrap();
    assert_eq!(run(&p, &[&[-3.0, 1.5, 0.0, -0.5]])[0], [0.0, 3.0, 0.0, 0.0]);
}

#[test]
fn activate2_runs_on_the_scalar_engine_and_emits_its_nki_call() {
    let case = Case {
        func: ActFn::Prelu,
        stages: [Some((Sub, Operand::Imm(1.5), true)), None],
        param: Operand::Column,
        reduce: Some(BinOp::AbsMax),
    };
    let p = program((4, 64), DType::F32, case, Target::Trn3);
    let report = estimate(&p);
    let slice = report
        .slices
        .iter()
        .find(|s| s.name == "activate2")
        .unwrap();
    assert_eq!(slice.engine, Engine::Scalar);
    let plain = program(
        (4, 64),
        DType::F32,
        Case {
            reduce: None,
            ..case
        },
        Target::Trn3,
    );
    let plain_report = estimate(&plain);
    let plain_slice = plain_report
        .slices
        .iter()
        .find(|s| s.name == "activate2")
        .unwrap();
    // Reading the accumulators out into reduce_res costs one more fixed overhead.
    assert!(
        slice.end_ns - slice.start_ns > plain_slice.end_ns - plain_slice.start_ns,
        "{slice:?} {plain_slice:?}"
    );
    let source = emit_nki(&p);
    assert!(
        source.contains(
            "nisa.activate2(dst=t4, op=nl.prelu, data=t0, imm0=1.5, imm1=0.0, op0=nl.subtract, \
             op1=nl.bypass, relu_param=t3, reverse0=True, reduce_op=nl.abs_max, \
             reduce_res=t5, reduce_cmd=nisa.reduce_cmd.reset_reduce)"
        ),
        "{source}"
    );
    let source = emit_nki(&program(
        (4, 64),
        DType::F32,
        Case {
            reduce: None,
            param: Operand::Imm(0.0),
            ..case
        },
        Target::Trn3,
    ));
    assert!(
        source.contains(
            "nisa.activate2(dst=t4, op=nl.prelu, data=t0, imm0=1.5, imm1=0.0, op0=nl.subtract, \
             op1=nl.bypass, reverse0=True)"
        ),
        "{source}"
    );
}
