//! `select_reduce`: `on_true` where an integer predicate is nonzero (zero with `reverse_pred`),
//! `on_false` (an immediate or a column) elsewhere, with the row maximum of the fp32 selection
//! in `reduce_res`; and `tensor_scalar_cumulative`: a running `op1` of `src <op0> imm0` along
//! each row, from `op1`'s identity or `imm1`. Both against loops written from the docs, in fp32
//! and bf16, on one thread, split across rows and band by band; their trace checks, dtype and
//! PSUM rules, cost and codegen.

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

/// How `select_reduce`'s test program passes `on_false`.
#[derive(Clone, Copy, Debug)]
enum OnFalse {
    Imm(f32),
    Column,
}

/// `select_reduce` of `x` (input 0, `dtype`) by the int8 predicate `pred` (input 1) with
/// `on_false` (or the fp32 column input 2) into `dst` (output 0, `dtype`) and, with `reduce`,
/// the fp32 row maxima (output 1).
fn select_program(
    (rows, cols): (usize, usize),
    dtype: DType,
    on_false: OnFalse,
    reduce: bool,
    reverse: bool,
) -> Program {
    let inputs = vec![
        spec("x", [rows, cols], dtype),
        spec("pred", [rows, cols], DType::I8),
        spec("f", [rows, 1], DType::F32),
    ];
    trace("k", Target::Trn2, &inputs, move |h| {
        let out = shared_hbm(&[rows, cols], dtype);
        let x = sbuf([rows, cols], dtype);
        dma_copy(&x, &h[0]);
        let pred = sbuf([rows, cols], DType::I8);
        dma_copy(&pred, &h[1]);
        let col = sbuf([rows, 1], DType::F32);
        dma_copy(&col, &h[2]);
        let f: ScalarOperand = match on_false {
            OnFalse::Imm(v) => v.into(),
            OnFalse::Column => (&col).into(),
        };
        let dst = sbuf([rows, cols], dtype);
        let res = sbuf([rows, 1], DType::F32);
        select_reduce(&dst, &pred, &x, f, reduce.then(|| res.region()), reverse);
        dma_copy(&out, &dst);
        let mut outs = vec![out];
        if reduce {
            let maxima = shared_hbm(&[rows, 1], DType::F32);
            dma_copy(&maxima, &res);
            outs.push(maxima);
        }
        outs
    })
    .unwrap()
}

#[test]
fn select_reduce_selects_and_takes_each_rows_maximum() {
    for (rows, cols) in [(5, 12), (128, 300)] {
        let n = rows * cols;
        let pred: Vec<f32> = (0..n)
            .map(|i| [0.0, 1.0, -3.0, 0.0, 7.0][i * 7 % 5])
            .collect();
        let col: Vec<f32> = (0..rows).map(|r| r as f32 * 0.5 - 40.0).collect();
        for dtype in [DType::F32, DType::BF16] {
            let x: Vec<f32> = values(n, 3, 80.0).iter().map(|v| dtype.round(*v)).collect();
            for on_false in [OnFalse::Imm(-1.0e30), OnFalse::Column] {
                for reverse in [false, true] {
                    let p = select_program((rows, cols), dtype, on_false, true, reverse);
                    validate(&p).unwrap();
                    let got = run(&p, &[&x, &pred, &col]);
                    let mut want = vec![0.0; n];
                    let mut maxima = vec![f32::NEG_INFINITY; rows];
                    for r in 0..rows {
                        let f = match on_false {
                            OnFalse::Imm(v) => v,
                            OnFalse::Column => col[r],
                        };
                        for c in 0..cols {
                            let i = r * cols + c;
                            let v = if (pred[i] != 0.0) != reverse { x[i] } else { f };
                            maxima[r] = maxima[r].max(v);
                            want[i] = dtype.round(v);
                        }
                    }
                    let what = format!("{rows}x{cols} {dtype} {on_false:?} reverse={reverse}");
                    assert_eq!(got[0], want, "{what}");
                    assert_eq!(got[1], maxima, "{what}");
                }
            }
        }
    }
}

#[test]
fn select_reduce_without_reduce_res_only_selects() {
    let (rows, cols) = (4, 9);
    let x = values(rows * cols, 8, 10.0);
    let pred: Vec<f32> = (0..rows * cols)
        .map(|i| (i % 3 == 0) as u8 as f32)
        .collect();
    let col = vec![0.0; rows];
    let p = select_program((rows, cols), DType::F32, OnFalse::Imm(2.5), false, false);
    let got = run(&p, &[&x, &pred, &col]);
    assert_eq!(got.len(), 1);
    let want: Vec<f32> = (0..rows * cols)
        .map(|i| if pred[i] != 0.0 { x[i] } else { 2.5 })
        .collect();
    assert_eq!(got[0], want);
}

/// A `select_reduce` program with the predicate, `on_true` and `reduce_res` of the given dtypes
/// and buffers, for its dtype and PSUM rules.
fn select_with(
    (pred_dt, true_dt, res_dt): (DType, DType, DType),
    on_false_col: Option<DType>,
    (pred_psum, true_psum): (bool, bool),
) -> Result<Program, NkiError> {
    trace("k", Target::Trn2, &[], move |_| {
        let out = shared_hbm(&[8, 8], DType::F32);
        let alloc = |dt, in_psum: bool| {
            if in_psum {
                psum([8, 8], dt)
            } else {
                sbuf([8, 8], dt)
            }
        };
        let pred = alloc(pred_dt, pred_psum);
        memset(&pred, 1.0);
        let on_true = alloc(true_dt, true_psum);
        memset(&on_true, 3.0);
        let dst = sbuf([8, 8], DType::F32);
        let res = sbuf([8, 1], res_dt);
        let f: ScalarOperand = match on_false_col {
            Some(dt) => {
                let c = sbuf([8, 1], dt);
                memset(&c, 0.0);
                c.into()
            }
            None => 0.0.into(),
        };
        select_reduce(&dst, &pred, &on_true, f, Some(res.region()), false);
        dma_copy(&out, &dst);
        vec![out]
    })
}

/// The trace error of a kernel body (run on Trn2, no inputs or outputs).
fn trace_err(body: impl Fn()) -> String {
    trace("k", Target::Trn2, &[], |_| {
        body();
        vec![]
    })
    .map(|_| ())
    .unwrap_err()
    .to_string()
}

fn rule_of(p: Result<Program, NkiError>) -> (String, String) {
    match validate(&p.unwrap()).unwrap_err() {
        NkiError::Validation(v) => (v.rule.to_string(), v.message),
        e => panic!("{e}"),
    }
}

#[test]
fn select_reduce_checks_its_operands_dtypes_and_buffers() {
    let f = DType::F32;
    validate(&select_with((DType::U8, DType::BF16, f), Some(f), (false, false)).unwrap()).unwrap();
    validate(&select_with((DType::I16, f, DType::BF16), None, (true, false)).unwrap()).unwrap();
    let cases = [
        (
            select_with((f, f, f), None, (false, false)),
            "select-reduce-dtype",
            "select_reduce: predicate t0 must be int8, uint8, int16 or uint16, got f32",
        ),
        (
            select_with((DType::I8, DType::I32, f), None, (false, false)),
            "select-reduce-dtype",
            "select_reduce: on_true t1 must be any dtype but tfloat32, int32, uint32, got i32",
        ),
        (
            select_with((DType::I8, f, DType::I32), None, (false, false)),
            "select-reduce-dtype",
            "select_reduce: reduce_res t3 must be a float dtype, got i32",
        ),
        (
            select_with((DType::I8, f, f), Some(DType::BF16), (false, false)),
            "select-reduce-dtype",
            "select_reduce: on_false t4 must be float32, got bf16",
        ),
        (
            select_with((DType::I8, f, f), None, (true, true)),
            "psum-both-inputs",
            "select_reduce: on_true t1 and predicate t0 are both in PSUM",
        ),
    ];
    for (p, rule, message) in cases {
        let (r, m) = rule_of(p);
        assert_eq!(r, rule, "{m}");
        assert!(m.contains(message), "{m}");
    }
    let e = trace_err(|| {
        let t = sbuf([8, 8], DType::F32);
        let p = sbuf([8, 4], DType::I8);
        select_reduce(&t, &p, &t, 0.0, None, false);
    });
    assert!(
        e.contains("select_reduce: predicate has shape [8, 4] but on_true has shape [8, 8]"),
        "{e}"
    );
    let e = trace_err(|| {
        let t = sbuf([8, 8], DType::F32);
        let res = sbuf([8, 2], DType::F32);
        select_reduce(&t, &t, &t, 0.0, Some(res.region()), false);
    });
    assert!(
        e.contains("select_reduce: reduce_res must be a (8, 1) column, got shape [8, 2]"),
        "{e}"
    );
}

/// `tensor_scalar_cumulative` of `x` (input 0, `dtype`) with `op0` / `imm0` and `op1`, from
/// `imm1` when given (the column input 1 when `column`), into `dst` (output 0, `dtype`).
fn cumulative_program(
    (rows, cols): (usize, usize),
    dtype: DType,
    (op0, op1): (BinOp, BinOp),
    imm0: f32,
    imm1: Option<f32>,
    column: bool,
) -> Program {
    let inputs = vec![
        spec("x", [rows, cols], dtype),
        spec("c", [rows, 1], DType::F32),
    ];
    trace("k", Target::Trn2, &inputs, move |h| {
        let out = shared_hbm(&[rows, cols], dtype);
        let x = sbuf([rows, cols], dtype);
        dma_copy(&x, &h[0]);
        let c = sbuf([rows, 1], DType::F32);
        dma_copy(&c, &h[1]);
        let start: Option<ScalarOperand> = match (imm1, column) {
            (_, true) => Some((&c).into()),
            (Some(v), false) => Some(v.into()),
            (None, false) => None,
        };
        let dst = sbuf([rows, cols], dtype);
        tensor_scalar_cumulative(&dst, &x, op0, op1, imm0, start);
        dma_copy(&out, &dst);
        vec![out]
    })
    .unwrap()
}

/// The docs' pseudocode per row: `acc = op1(op0(x, imm0), acc)`, in fp32, each step rounded.
fn cumulative_reference(
    x: &[f32],
    cols: usize,
    dtype: DType,
    (op0, op1): (BinOp, BinOp),
    imm0: f32,
    start: &dyn Fn(usize) -> f32,
) -> Vec<f32> {
    let mut out = Vec::with_capacity(x.len());
    for (r, row) in x.chunks(cols).enumerate() {
        let mut acc = start(r);
        for &v in row {
            acc = op1.apply(op0.apply(v, imm0), acc);
            out.push(dtype.round(acc));
        }
    }
    out
}

#[test]
fn tensor_scalar_cumulative_runs_the_docs_pseudocode() {
    let identity = |op: BinOp| match op {
        BinOp::Add | BinOp::Subtract => 0.0,
        BinOp::Multiply => 1.0,
        BinOp::Maximum => f32::NEG_INFINITY,
        _ => f32::INFINITY,
    };
    for (rows, cols) in [(3, 17), (128, 300)] {
        let c: Vec<f32> = (0..rows).map(|r| r as f32 - 2.0).collect();
        for dtype in [DType::F32, DType::BF16] {
            let x: Vec<f32> = values(rows * cols, 5, 4.0)
                .iter()
                .map(|v| dtype.round(*v))
                .collect();
            for op1 in CUMULATIVE_OPS.iter().copied() {
                // Multiplying by values near 1 keeps a long product finite.
                let (op0, imm0) = if op1 == BinOp::Multiply {
                    (BinOp::Add, 1.0)
                } else {
                    (BinOp::Multiply, 0.75)
                };
                let ops = (op0, op1);
                let reset = cumulative_program((rows, cols), dtype, ops, imm0, None, false);
                validate(&reset).unwrap();
                let want = cumulative_reference(&x, cols, dtype, ops, imm0, &|_| identity(op1));
                assert_eq!(run(&reset, &[&x, &c])[0], want, "{dtype} {op1:?} reset");
                let load = cumulative_program((rows, cols), dtype, ops, imm0, Some(0.5), false);
                let want = cumulative_reference(&x, cols, dtype, ops, imm0, &|_| 0.5);
                assert_eq!(run(&load, &[&x, &c])[0], want, "{dtype} {op1:?} load");
                let col = cumulative_program((rows, cols), dtype, ops, imm0, None, true);
                let want = cumulative_reference(&x, cols, dtype, ops, imm0, &|r| c[r]);
                assert_eq!(run(&col, &[&x, &c])[0], want, "{dtype} {op1:?} column");
            }
        }
    }
}

#[test]
fn tensor_scalar_cumulative_add_is_a_prefix_sum_and_subtract_alternates() {
    let x = [1.0, 2.0, 3.0, 4.0];
    let c = [0.0];
    let ops = (BinOp::Add, BinOp::Add);
    let sum = cumulative_program((1, 4), DType::F32, ops, 0.0, None, false);
    assert_eq!(run(&sum, &[&x, &c])[0], [1.0, 3.0, 6.0, 10.0]);
    // acc = x − acc (op1's operands as the pseudocode orders them), from imm1 = 10.
    let ops = (BinOp::Add, BinOp::Subtract);
    let sub = cumulative_program((1, 4), DType::F32, ops, 0.0, Some(10.0), false);
    assert_eq!(run(&sub, &[&x, &c])[0], [-9.0, 11.0, -8.0, 12.0]);
}

/// A `tensor_scalar_cumulative` of `src` / `dst` dtypes, `imm0` a column of `col` when given.
fn cumulative_with(
    (src_dt, dst_dt): (DType, DType),
    col: Option<DType>,
    (op0, op1): (BinOp, BinOp),
) -> Result<Program, NkiError> {
    trace("k", Target::Trn2, &[], move |_| {
        let out = shared_hbm(&[8, 8], dst_dt);
        let src = sbuf([8, 8], src_dt);
        memset(&src, 1.0);
        let dst = sbuf([8, 8], dst_dt);
        let imm0: ScalarOperand = match col {
            Some(dt) => {
                let c = sbuf([8, 1], dt);
                memset(&c, 1.0);
                c.into()
            }
            None => 1.0.into(),
        };
        tensor_scalar_cumulative(&dst, &src, op0, op1, imm0, None);
        dma_copy(&out, &dst);
        vec![out]
    })
}

#[test]
fn tensor_scalar_cumulative_checks_its_operators_shapes_and_dtypes() {
    let add = (BinOp::Add, BinOp::Add);
    for dt in [DType::I16, DType::U8, DType::F8E4M3, DType::F16] {
        validate(&cumulative_with((dt, dt), None, add).unwrap()).unwrap();
    }
    let (r, m) = rule_of(cumulative_with((DType::I32, DType::F32), None, add));
    assert_eq!(r, "cumulative-dtype");
    assert!(
        m.contains(
            "tensor_scalar_cumulative: src t0 must be bf16, fp16, fp32, fp8, uint8, uint16, \
             int8 or int16, got i32"
        ),
        "{m}"
    );
    let (r, m) = rule_of(cumulative_with((DType::F32, DType::U32), None, add));
    assert_eq!(r, "cumulative-dtype");
    assert!(m.contains("dst t1 must be"), "{m}");
    let (r, m) = rule_of(cumulative_with(
        (DType::F32, DType::F32),
        Some(DType::BF16),
        add,
    ));
    assert_eq!(r, "cumulative-dtype");
    assert!(m.contains("imm0 t2 must be float32, got bf16"), "{m}");
    let e = |ops| {
        cumulative_with((DType::F32, DType::F32), None, ops)
            .unwrap_err()
            .to_string()
    };
    let m = e((BinOp::Greater, BinOp::Add));
    assert!(
        m.contains("tensor_scalar_cumulative: op0 must be an arithmetic operator, got the comparison Greater"),
        "{m}"
    );
    let m = e((BinOp::Add, BinOp::Divide));
    assert!(
        m.contains(
            "tensor_scalar_cumulative: op1 must be add, subtract, multiply, maximum or minimum, \
             got Divide"
        ),
        "{m}"
    );
    let m = trace_err(|| {
        let t = sbuf([8, 8], DType::F32);
        let (add, d) = (BinOp::Add, t.region().slice(0, 8, 0, 4));
        tensor_scalar_cumulative(d, &t, add, add, 0.0, None);
    });
    assert!(
        m.contains("tensor_scalar_cumulative: dst has shape [8, 4] but src has shape [8, 8]"),
        "{m}"
    );
    let m = trace_err(|| {
        let t = sbuf([8, 8], DType::F32);
        let c = sbuf([4, 1], DType::F32);
        tensor_scalar_cumulative(&t, &t, BinOp::Add, BinOp::Add, 0.0, Some((&c).into()));
    });
    assert!(
        m.contains("tensor_scalar_cumulative: imm1 must be a (8, 1) column, got shape [4, 1]"),
        "{m}"
    );
}

#[test]
fn both_run_on_the_vector_engine_and_emit_their_nki_calls() {
    let p = select_program((4, 16), DType::F32, OnFalse::Imm(-2.0), true, true);
    let report = estimate(&p);
    let slice = |name: &str| report.slices.iter().find(|s| s.name == name).unwrap();
    assert_eq!(slice("select_reduce").engine, Engine::Vector);
    let plain = select_program((4, 16), DType::F32, OnFalse::Imm(-2.0), false, true);
    let plain_report = estimate(&plain);
    let plain_ns = plain_report
        .slices
        .iter()
        .find(|s| s.name == "select_reduce")
        .unwrap();
    let s = slice("select_reduce");
    // The row maximum costs one more fixed overhead.
    assert!(
        s.end_ns - s.start_ns > plain_ns.end_ns - plain_ns.start_ns,
        "{s:?} {plain_ns:?}"
    );
    let source = emit_nki(&p);
    assert!(
        source.contains(
            "nisa.select_reduce(dst=t3, predicate=t1, on_true=t0, on_false=-2.0, \
             reduce_res=t4, reduce_cmd=nisa.reduce_cmd.reset_reduce, reduce_op=nl.maximum, \
             reverse_pred=True)"
        ),
        "{source}"
    );
    let c = cumulative_program(
        (4, 16),
        DType::F32,
        (BinOp::Multiply, BinOp::Maximum),
        2.0,
        None,
        true,
    );
    assert_eq!(
        estimate(&c)
            .slices
            .iter()
            .find(|s| s.name == "tensor_scalar_cumulative")
            .unwrap()
            .engine,
        Engine::Vector
    );
    let source = emit_nki(&c);
    assert!(
        source.contains(
            "nisa.tensor_scalar_cumulative(dst=t2, src=t0, op0=nl.multiply, op1=nl.maximum, \
             imm0=2.0, imm1=t1, reduce_cmd=nisa.reduce_cmd.load_reduce)"
        ),
        "{source}"
    );
    let r = cumulative_program(
        (4, 16),
        DType::F32,
        (BinOp::Add, BinOp::Add),
        0.0,
        None,
        false,
    );
    let source = emit_nki(&r);
    assert!(
        source.contains(
            "nisa.tensor_scalar_cumulative(dst=t2, src=t0, op0=nl.add, op1=nl.add, imm0=0.0)"
        ),
        "{source}"
    );
}

#[test]
fn both_run_band_by_band_with_the_same_bits() {
    use nki_core::sim::{BandPolicy, ExecPlan, SimOptions, simulate_to_vecs};
    let (rows, cols) = (100, 24);
    let inputs = vec![spec("x", [rows, cols], DType::F32)];
    let p = trace("banded", Target::Trn2, &inputs, |h| {
        let out = shared_hbm(&[rows, 2 * cols + 1], DType::F32);
        sequential_range(1, |_| {
            let x = sbuf([rows, cols], DType::F32);
            dma_copy(&x, &h[0]);
            let pred = sbuf([rows, cols], DType::I16);
            tensor_scalar(&pred, &x, BinOp::Greater, 0.0);
            let o = sbuf([rows, 2 * cols + 1], DType::F32);
            let (sel, run, max) = (o.cols(0, cols), o.cols(cols, cols), o.cols(2 * cols, 1));
            select_reduce(sel, &pred, &x, -3.0, Some(max), false);
            tensor_scalar_cumulative(run, &x, BinOp::Add, BinOp::Add, 1.0, None);
            dma_copy(&out, &o);
        });
        vec![out]
    })
    .unwrap();
    let x: Vec<u8> = values(rows * cols, 11, 4.0)
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let sim = |bands| {
        simulate_to_vecs(
            &p,
            &[&x],
            SimOptions {
                parallel: true,
                bands,
                ..SimOptions::default()
            },
        )
        .unwrap()
    };
    let whole = sim(BandPolicy::never());
    for partitions in [1, 7, 32] {
        let policy = BandPolicy::everywhere(partitions);
        let plan = ExecPlan::with_bands(&p, policy);
        assert_eq!(plan.bands().iter().flatten().count(), 1, "{partitions}");
        assert!(sim(policy) == whole, "bands of {partitions} partitions");
    }
}
