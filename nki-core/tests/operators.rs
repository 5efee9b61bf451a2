//! The ALU operators as instructions use them: the bitvec operators on integer bit patterns
//! (`tensor_tensor`, `tensor_scalar`, `tensor_reduce`, `tensor_partition_reduce`), the logical,
//! power and absolute operators in fp32, the trace-time rules (unary operators, operator
//! families, integer tiles), the `operator-target` and PSUM rules of validation, the newer
//! activation functions, and agreement with the `nki_spec` operator and activation tables.

mod common;

use common::{named_inputs, run, values};
use nki_core::NkiError;
use nki_core::codegen::emit_nki;
use nki_core::ir::{ActFn, BinOp, ElementwiseEngine, Program};
use nki_core::lang::trace;
use nki_core::prelude::*;
use nki_core::validate::validate;

/// `out = a <op> b` by `tensor_tensor` on `[rows, cols]` tiles of `dt`, into `out_dt`.
fn binary(op: BinOp, dt: DType, out_dt: DType, rows: usize, cols: usize) -> Program {
    trace(
        "k",
        Target::Trn2,
        &named_inputs(&["a", "b"], [rows, cols], dt),
        |h| {
            let result = shared_hbm(&[rows, cols], out_dt);
            let (a, b) = (sbuf([rows, cols], dt), sbuf([rows, cols], dt));
            dma_copy(&a, &h[0]);
            dma_copy(&b, &h[1]);
            let y = sbuf([rows, cols], out_dt);
            tensor_tensor(&y, &a, &b, op);
            dma_copy(&result, &y);
            vec![result]
        },
    )
    .unwrap()
}

/// `out = (x <op0> s0) [<op1> s1]` by `tensor_scalar` on one row of `dt`, into `out_dt`.
fn scalar(
    op0: (BinOp, f32),
    op1: Option<(BinOp, f32)>,
    dt: DType,
    out_dt: DType,
    n: usize,
) -> Program {
    trace("k", Target::Trn2, &named_inputs(&["x"], [1, n], dt), |h| {
        let result = shared_hbm(&[1, n], out_dt);
        let x = sbuf([1, n], dt);
        dma_copy(&x, &h[0]);
        let y = sbuf([1, n], out_dt);
        let ts = tensor_scalar(&y, &x, op0.0, op0.1);
        if let Some((op, v)) = op1 {
            ts.then(op, v);
        }
        dma_copy(&result, &y);
        vec![result]
    })
    .unwrap()
}

/// A trace-time error's text.
fn trace_error(f: impl FnOnce() + 'static) -> String {
    let inputs = named_inputs(&["x"], [4, 8], DType::I32);
    match trace("k", Target::Trn2, &inputs, move |h| {
        let out = shared_hbm(&[4, 8], DType::I32);
        let x = sbuf([4, 8], DType::I32);
        dma_copy(&x, &h[0]);
        f();
        dma_copy(&out, &x);
        vec![out]
    }) {
        Err(NkiError::Trace { message, .. }) => message,
        other => panic!("expected a trace error, got {other:?}"),
    }
}

#[test]
fn bitwise_tensor_tensor_works_on_patterns_in_every_integer_dtype() {
    let a = [0.0, 5.0, -1.0, 12.0, -128.0, 127.0, 3.0, -7.0];
    let b = [0.0, 3.0, 6.0, 10.0, 1.0, -1.0, 2.0, 9.0];
    for dt in [DType::I8, DType::I16, DType::I32] {
        for (op, f) in [
            (BinOp::BitwiseAnd, (|x, y| x & y) as fn(i64, i64) -> i64),
            (BinOp::BitwiseOr, |x, y| x | y),
            (BinOp::BitwiseXor, |x, y| x ^ y),
        ] {
            let got = run(&binary(op, dt, dt, 1, 8), &[&a, &b]).remove(0);
            let want: Vec<f32> = a
                .iter()
                .zip(&b)
                .map(|(x, y)| f(*x as i64, *y as i64) as f32)
                .collect();
            assert_eq!(got, want, "{op:?} {dt}");
        }
    }
    // Unsigned: the same patterns, zero-extended.
    let (ua, ub) = ([0.0, 255.0, 170.0, 15.0], [255.0, 15.0, 85.0, 240.0]);
    let got = run(
        &binary(BinOp::BitwiseXor, DType::U8, DType::U8, 1, 4),
        &[&ua, &ub],
    )
    .remove(0);
    assert_eq!(got, [255.0, 240.0, 255.0, 255.0]);
}

#[test]
fn shifts_keep_the_low_bits_of_the_destination_and_shift_in_zeros() {
    let x = [1.0, 3.0, -2.0, 255.0, 1.0];
    let n = [4.0, 7.0, 1.0, 1.0, 40.0];
    // int8: 3 << 7 = 384 keeps its low byte (-128); 255 is not an int8, so int16 inputs.
    let got = run(
        &binary(BinOp::LeftShift, DType::I16, DType::I8, 1, 5),
        &[&x, &n],
    )
    .remove(0);
    assert_eq!(got, [16.0, -128.0, -4.0, -2.0, 0.0]);
    // Logical right shift on the 32-bit pattern: -2 >> 1 is 0x7FFF_FFFF, whose low 16 bits
    // read as int16 are -1.
    let got = run(
        &binary(BinOp::RightShift, DType::I16, DType::I16, 1, 5),
        &[&x, &n],
    )
    .remove(0);
    assert_eq!(got, [0.0, 0.0, -1.0, 127.0, 0.0]);
    let got = run(
        &binary(BinOp::RightShift, DType::I16, DType::U16, 1, 5),
        &[&x, &n],
    )
    .remove(0);
    assert_eq!(got, [0.0, 0.0, 65535.0, 127.0, 0.0]);
}

#[test]
fn invert_is_a_unary_tensor_scalar_operator_with_a_zero_operand() {
    let x = [0.0, 1.0, 200.0, 255.0];
    let got = run(
        &scalar((BinOp::Invert, 0.0), None, DType::U8, DType::U8, 4),
        &[&x],
    )
    .remove(0);
    assert_eq!(got, [255.0, 254.0, 55.0, 0.0]);
    let got = run(
        &scalar((BinOp::Invert, 0.0), None, DType::U8, DType::I32, 4),
        &[&x],
    )
    .remove(0);
    assert_eq!(got, [-1.0, -2.0, -201.0, -256.0]);
    // Two bitvec operators chain on the pattern: (x & 0x0F) << 4.
    let got = run(
        &scalar(
            (BinOp::BitwiseAnd, 15.0),
            Some((BinOp::LeftShift, 4.0)),
            DType::U8,
            DType::U8,
            4,
        ),
        &[&x],
    )
    .remove(0);
    assert_eq!(got, [0.0, 16.0, 128.0, 240.0]);
}

#[test]
fn bitwise_reductions_fold_rows_from_their_identity() {
    let rows = 3;
    let data = [
        12.0, 10.0, 14.0, 15.0, 1.0, 2.0, 4.0, 8.0, -1.0, -1.0, 0.0, -1.0,
    ];
    for (op, want) in [
        (BinOp::BitwiseAnd, [8.0, 0.0, 0.0]),
        (BinOp::BitwiseOr, [15.0, 15.0, -1.0]),
        (BinOp::BitwiseXor, [7.0, 15.0, -1.0]),
    ] {
        let p = trace(
            "k",
            Target::Trn2,
            &named_inputs(&["x"], [rows, 4], DType::I32),
            |h| {
                let out = shared_hbm(&[rows, 1], DType::I32);
                let x = sbuf([rows, 4], DType::I32);
                dma_copy(&x, &h[0]);
                let r = sbuf([rows, 1], DType::I32);
                tensor_reduce(&r, op, &x, 1, false);
                dma_copy(&out, &r);
                vec![out]
            },
        )
        .unwrap();
        assert_eq!(run(&p, &[&data]).remove(0), want, "{op:?}");
    }
    // Across partitions, on GpSimd.
    let p = trace(
        "k",
        Target::Trn2,
        &named_inputs(&["x"], [rows, 4], DType::I32),
        |h| {
            let out = shared_hbm(&[1, 4], DType::I32);
            let x = sbuf([rows, 4], DType::I32);
            dma_copy(&x, &h[0]);
            let r = sbuf([1, 4], DType::I32);
            tensor_partition_reduce(&r, BinOp::BitwiseOr, &x);
            dma_copy(&out, &r);
            vec![out]
        },
    )
    .unwrap();
    assert_eq!(run(&p, &[&data]).remove(0), [-1.0, -1.0, 14.0, -1.0]);
}

#[test]
fn logical_power_and_absolute_operators_compute_in_fp32() {
    let a = [0.0, 2.0, -3.0, 0.5, f32::NAN, -2.0];
    let b = [1.0, 0.0, 2.0, -4.0, 0.0, 3.0];
    type Reference = fn(f32, f32) -> f32;
    let cases: [(BinOp, Reference); 6] = [
        (BinOp::LogicalAnd, |x, y| {
            f32::from(u8::from(x != 0.0 && y != 0.0))
        }),
        (BinOp::LogicalOr, |x, y| {
            f32::from(u8::from(x != 0.0 || y != 0.0))
        }),
        (BinOp::LogicalXor, |x, y| {
            f32::from(u8::from((x != 0.0) != (y != 0.0)))
        }),
        (BinOp::Power, f32::powf),
        (BinOp::AbsMax, |x, y| x.abs().max(y.abs())),
        (BinOp::AbsMin, |x, y| x.abs().min(y.abs())),
    ];
    for (op, f) in cases {
        let p = binary(op, DType::F32, DType::F32, 1, 6);
        let got = run(&p, &[&a, &b]).remove(0);
        let want: Vec<f32> = a.iter().zip(&b).map(|(x, y)| f(*x, *y)).collect();
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&got), bits(&want), "{op:?}");
    }
    // Unary arithmetic operators in tensor_scalar: |x|, then 1/√.
    let x = [4.0, -16.0, 0.25, -1.0];
    let got = run(
        &scalar(
            (BinOp::Abs, 0.0),
            Some((BinOp::Rsqrt, 0.0)),
            DType::F32,
            DType::F32,
            4,
        ),
        &[&x],
    )
    .remove(0);
    assert_eq!(got, [0.5, 0.25, 2.0, 1.0]);
}

#[test]
fn operator_misuse_is_a_trace_error_naming_the_instruction() {
    let e = trace_error(|| {
        let (a, b) = (sbuf([4, 8], DType::I32), sbuf([4, 8], DType::I32));
        memset(&b, 1.0);
        tensor_tensor(&a, &b, &b, BinOp::Abs);
    });
    assert!(
        e.contains("tensor_tensor: op=nl.abs is a unary operator"),
        "{e}"
    );
    let e = trace_error(|| {
        let (a, b) = (sbuf([4, 8], DType::I32), sbuf([4, 8], DType::I32));
        memset(&b, 1.0);
        tensor_scalar(&a, &b, BinOp::Invert, 3.0);
    });
    assert!(
        e.contains("op0=nl.invert is a unary operator, so operand0 must be None or 0 (got 3)"),
        "{e}"
    );
    let e = trace_error(|| {
        let (a, b) = (sbuf([4, 8], DType::I32), sbuf([4, 8], DType::I32));
        memset(&b, 1.0);
        tensor_scalar(&a, &b, BinOp::BitwiseAnd, 3.0).then(BinOp::Add, 1.0);
    });
    assert!(
        e.contains("op0=nl.bitwise_and and op1=nl.add must both be bitvec or both arithmetic"),
        "{e}"
    );
    let e = trace_error(|| {
        let (a, b) = (sbuf([4, 8], DType::F32), sbuf([4, 8], DType::I32));
        memset(&b, 1.0);
        tensor_scalar(&a, &b, BinOp::BitwiseAnd, 3.0);
    });
    assert!(
        e.contains("tensor_scalar: the bitvec operator nl.bitwise_and works on integer bit patterns, but tile"),
        "{e}"
    );
    assert!(e.contains("is f32"), "{e}");
    let e = trace_error(|| {
        let (r, b) = (sbuf([4, 1], DType::I32), sbuf([4, 8], DType::I32));
        memset(&b, 1.0);
        tensor_reduce(&r, BinOp::BitwiseOr, &b, 1, true);
    });
    assert!(
        e.contains("tensor_reduce: negate=True with the bitvec operator nl.bitwise_or"),
        "{e}"
    );
    let e = trace_error(|| {
        let (a, b) = (sbuf([4, 8], DType::I32), sbuf([4, 8], DType::I32));
        memset(&b, 1.0);
        scalar_tensor_tensor(&a, &b, BinOp::BitwiseXor, 1.0, BinOp::Add, &b);
    });
    assert!(
        e.contains("scalar_tensor_tensor: nl.bitwise_xor is a bitvec operator"),
        "{e}"
    );
    let e = trace_error(|| {
        let (r, b) = (sbuf([4, 1], DType::I32), sbuf([4, 8], DType::I32));
        memset(&b, 1.0);
        tensor_reduce(&r, BinOp::Subtract, &b, 1, false);
    });
    assert!(e.contains("without saying what it folds"), "{e}");
}

#[test]
fn trn3_only_operators_fail_validation_on_older_targets() {
    let trace_for = |target: Target, op: BinOp| {
        trace(
            "k",
            target,
            &named_inputs(&["a"], [2, 4], DType::F32),
            |h| {
                let out = shared_hbm(&[2, 4], DType::F32);
                let a = sbuf([2, 4], DType::F32);
                dma_copy(&a, &h[0]);
                let y = sbuf([2, 4], DType::F32);
                tensor_tensor(&y, &a, &a, op);
                dma_copy(&out, &y);
                vec![out]
            },
        )
        .unwrap()
    };
    for op in [BinOp::AbsMax, BinOp::AbsMin] {
        assert!(validate(&trace_for(Target::Trn3, op)).is_ok());
        let Err(NkiError::Validation(v)) = validate(&trace_for(Target::Trn2, op)) else {
            panic!("{op:?} validated on trn2");
        };
        assert_eq!(v.rule, "operator-target");
        assert!(v.message.contains(op.nki_name()), "{}", v.message);
        assert!(v.limit.contains("NeuronCore-v4"), "{}", v.limit);
    }
    assert!(validate(&trace_for(Target::Trn1, BinOp::Power)).is_ok());
}

#[test]
fn power_runs_on_gpsimd_so_its_tiles_cannot_be_in_psum() {
    let p = trace(
        "k",
        Target::Trn2,
        &named_inputs(&["a"], [2, 4], DType::F32),
        |h| {
            let out = shared_hbm(&[2, 4], DType::F32);
            let a = sbuf([2, 4], DType::F32);
            dma_copy(&a, &h[0]);
            let y = psum([2, 4], DType::F32);
            tensor_tensor(&y, &a, &a, BinOp::Power);
            let z = sbuf([2, 4], DType::F32);
            tensor_copy(&z, &y);
            dma_copy(&out, &z);
            vec![out]
        },
    )
    .unwrap();
    let Err(NkiError::Validation(v)) = validate(&p) else {
        panic!("power into PSUM validated");
    };
    assert_eq!(v.rule, "gpsimd-psum");
    assert!(v.message.contains("nl.power"), "{}", v.message);
}

#[test]
fn the_newer_activation_functions_run_on_the_scalar_engine() {
    let x = values(64, 3, 6.0);
    for func in [
        ActFn::GeluSigmoid,
        ActFn::GeluSigmoidDx,
        ActFn::Softplus,
        ActFn::Mish,
        ActFn::Erf,
        ActFn::ErfDx,
        ActFn::Sin,
        ActFn::Arctan,
        ActFn::Sign,
        ActFn::Abs,
    ] {
        let p = trace(
            "k",
            Target::Trn2,
            &named_inputs(&["x"], [2, 32], DType::F32),
            |h| {
                let out = shared_hbm(&[2, 32], DType::BF16);
                let t = sbuf([2, 32], DType::F32);
                dma_copy(&t, &h[0]);
                let y = sbuf([2, 32], DType::BF16);
                activation(&y, func, &t, None, 1.0);
                dma_copy(&out, &y);
                vec![out]
            },
        )
        .unwrap();
        let got = run(&p, &[&x]).remove(0);
        let want: Vec<f32> = x
            .iter()
            .map(|v| DType::BF16.round(func.apply(*v)))
            .collect();
        assert_eq!(got, want, "{func:?}");
        assert!(emit_nki(&p).contains(func.nki_name()), "{func:?}");
    }
}

#[test]
fn codegen_spells_every_new_operator() {
    for op in [BinOp::BitwiseAnd, BinOp::LeftShift, BinOp::RightShift] {
        let src = emit_nki(&binary(op, DType::I32, DType::I32, 2, 4));
        assert!(src.contains(&format!("op={}", op.nki_name())), "{src}");
    }
    let src = emit_nki(&scalar((BinOp::Invert, 0.0), None, DType::U8, DType::U8, 4));
    assert!(src.contains("op0=nl.invert"), "{src}");
    let _ = ElementwiseEngine::Vector;
}

#[test]
fn the_enums_implement_every_operator_and_activation_the_spec_tables_list() {
    // Not ALU values of these instructions: average (tensor_partition_reduce, not yet) and
    // bypass (activate2's no-op stage).
    for spec in nki_spec::OPERATORS {
        let found = BinOp::from_nki_name(spec.name);
        assert_eq!(
            found.is_none(),
            ["average", "bypass"].contains(&spec.name),
            "{}",
            spec.name
        );
    }
    for op in BinOp::ALL {
        assert_eq!(op.spec().is_none(), *op == BinOp::Divide, "{op:?}");
        if let Some(spec) = op.spec() {
            assert_eq!(
                op.reduce_identity().is_some(),
                spec.reduce && *op != BinOp::Subtract,
                "{op:?}"
            );
        }
    }
    for spec in nki_spec::ACTIVATIONS {
        assert!(ActFn::from_nki_name(spec.name).is_some(), "{}", spec.name);
    }
    assert_eq!(ActFn::ALL.len(), nki_spec::ACTIVATIONS.len());
}
