//! Registers, device loops and `dma_compute`: each against a hand-computed reference — loops
//! whose trip counts come from the data (`dynamic_range` with register bounds, `while_loop` on a
//! flag), register moves and stores, the loop index written each iteration, a loop of zero
//! trips; the trace checks, validation rules and simulation errors; cost and codegen; and that
//! the simulator keeps such programs sequential.

mod common;

use common::run;
use nki_core::NkiError;
use nki_core::codegen::emit_nki;
use nki_core::cost::estimate;
use nki_core::ir::{LoopControl, Program, RegisterValue, Stmt, stream_difference, unroll};
use nki_core::lang::{InputSpec, trace};
use nki_core::prelude::*;
use nki_core::sim::parallel_loops;
use nki_core::validate::validate;

fn int_input(name: &str, shape: &[usize]) -> InputSpec {
    InputSpec {
        name: name.into(),
        shape: shape.to_vec(),
        dtype: DType::I32,
    }
}

fn f32_input(name: &str, shape: &[usize]) -> InputSpec {
    InputSpec {
        name: name.into(),
        shape: shape.to_vec(),
        dtype: DType::F32,
    }
}

fn program(inputs: &[InputSpec], body: impl FnOnce(&[Hbm]) -> Vec<Hbm>) -> Program {
    let p = trace("k", Target::Trn2, inputs, body).unwrap();
    validate(&p).unwrap();
    p
}

/// `acc` starts at 0 and gains `x` once per iteration of a loop from `lo` to `n` (read from the
/// input) by `step`; the index of each iteration is stored into `idx[0, i]` of an int32 output.
fn counted(step: u32) -> Program {
    program(&[int_input("n", &[1, 1]), f32_input("x", &[4, 8])], |ins| {
        let acc_out = shared_hbm(&[4, 8], DType::F32);
        let last = shared_hbm(&[1, 1], DType::I32);
        let x = sbuf([4, 8], DType::F32);
        dma_copy(&x, &ins[1]);
        let acc = sbuf([4, 8], DType::F32);
        memset(&acc, 0.0);
        let n_sb = sbuf([1, 1], DType::I32);
        dma_copy(&n_sb, &ins[0]);
        let n = register_alloc(None);
        register_load(&n, &n_sb);
        let lo = register_alloc(Some(1));
        let seen = sbuf([1, 1], DType::I32);
        memset(&seen, -1.0);
        dynamic_range(lo, n, step, |i| {
            tensor_tensor(&acc, &acc, &x, BinOp::Add);
            register_store(&seen, &i);
        });
        dma_copy(&acc_out, &acc);
        dma_copy(&last, &seen);
        vec![acc_out, last]
    })
}

#[test]
fn a_dynamic_range_runs_as_often_as_its_register_bounds_say() {
    let x: Vec<f32> = (0..32).map(|i| i as f32 * 0.5 - 3.0).collect();
    for (n, step, trips, last) in [
        (5, 1, 4, 4),
        (6, 2, 3, 5),
        (1, 1, 0, -1),
        (-3, 1, 0, -1),
        (8, 3, 3, 7),
    ] {
        let p = counted(step);
        let out = run(&p, &[&[n as f32], &x]);
        let want: Vec<f32> = x.iter().map(|v| v * trips as f32).collect();
        assert_eq!(out[0], want, "n={n} step={step}");
        assert_eq!(out[1], vec![last as f32], "n={n} step={step}");
    }
}

#[test]
fn a_while_loop_runs_until_its_condition_register_is_zero() {
    // count = n; while count: acc += x; count -= 1 (in SBUF), reloaded into the register.
    let p = program(&[int_input("n", &[1, 1]), f32_input("x", &[2, 3])], |ins| {
        let out = shared_hbm(&[2, 3], DType::F32);
        let x = sbuf([2, 3], DType::F32);
        dma_copy(&x, &ins[1]);
        let acc = sbuf([2, 3], DType::F32);
        memset(&acc, 0.0);
        let count = sbuf([1, 1], DType::I32);
        dma_copy(&count, &ins[0]);
        let reg = register_alloc(None);
        register_load(&reg, &count);
        while_loop(&reg, || {
            tensor_tensor(&acc, &acc, &x, BinOp::Add);
            tensor_scalar(&count, &count, BinOp::Subtract, 1.0);
            register_load(&reg, &count);
        });
        dma_copy(&out, &acc);
        vec![out]
    });
    let x = [1.0, 2.0, -0.5, 4.0, 0.25, 8.0];
    for n in [0, 1, 3, 7] {
        let out = run(&p, &[&[n as f32], &x]);
        assert_eq!(out[0], x.map(|v| v * n as f32), "n={n}");
    }
}

#[test]
fn register_move_and_store_carry_values_and_narrow_stores_saturate() {
    let p = program(&[int_input("v", &[1, 1])], |ins| {
        let out = shared_hbm(&[1, 4], DType::I32);
        let small = shared_hbm(&[1, 1], DType::I8);
        let a = register_alloc(Some(7));
        let b = register_alloc(None);
        register_move(&b, a);
        let c = register_alloc(None);
        register_load(&c, &ins[0]);
        let t = sbuf([1, 4], DType::I32);
        register_store(t.cols(0, 1), &a);
        register_store(t.cols(1, 1), &b);
        register_store(t.cols(2, 1), &c);
        register_move(&a, -42);
        register_store(t.cols(3, 1), &a);
        dma_copy(&out, &t);
        // Straight to HBM, saturating to int8.
        register_store(&small, &c);
        vec![out, small]
    });
    let out = run(&p, &[&[1000.0]]);
    assert_eq!(out[0], vec![7.0, 7.0, 1000.0, -42.0]);
    assert_eq!(out[1], vec![127.0]);
}

#[test]
fn nested_device_loops_multiply_their_trip_counts() {
    // for i in 0..n: for j in 0..i: acc += 1  → n(n-1)/2
    let p = program(&[int_input("n", &[1, 1])], |ins| {
        let out = shared_hbm(&[1, 1], DType::F32);
        let acc = sbuf([1, 1], DType::F32);
        memset(&acc, 0.0);
        let n = register_alloc(None);
        register_load(&n, &ins[0]);
        dynamic_range(0, n, 1, |i| {
            dynamic_range(0, i, 1, |_| {
                tensor_scalar(&acc, &acc, BinOp::Add, 1.0);
            });
        });
        dma_copy(&out, &acc);
        vec![out]
    });
    for n in [0, 1, 4, 9] {
        assert_eq!(run(&p, &[&[n as f32]])[0], vec![(n * (n - 1) / 2) as f32]);
    }
}

#[test]
fn writing_the_index_register_does_not_change_the_iterations() {
    let p = program(&[], |_| {
        let out = shared_hbm(&[1, 1], DType::F32);
        let acc = sbuf([1, 1], DType::F32);
        memset(&acc, 0.0);
        dynamic_range(0, 3, 1, |i| {
            register_move(&i, 100);
            tensor_scalar(&acc, &acc, BinOp::Add, 1.0);
        });
        dma_copy(&out, &acc);
        vec![out]
    });
    assert_eq!(run(&p, &[])[0], vec![3.0]);
}

#[test]
fn a_device_loop_is_traced_once_and_stays_a_loop_when_unrolled() {
    let p = counted(1);
    let loops: Vec<_> = p
        .body
        .iter()
        .filter(|s| matches!(s, Stmt::DeviceLoop { .. }))
        .collect();
    assert_eq!(loops.len(), 1);
    assert_eq!(p.device_loops.len(), 1);
    let LoopControl::Range {
        start, stop, step, ..
    } = p.device_loops[0].control
    else {
        panic!("a range");
    };
    assert_eq!(step, 1);
    assert!(matches!(start, RegisterValue::Reg { .. }));
    assert!(matches!(stop, RegisterValue::Reg { .. }));
    let u = unroll(&p);
    assert_eq!(u.device_loops.len(), 1);
    assert_eq!(stream_difference(&p, &p), None);
    let x: Vec<f32> = (0..32).map(|i| i as f32).collect();
    assert_eq!(run(&u, &[&[4.0], &x]), run(&p, &[&[4.0], &x]));
}

#[test]
fn unwritten_registers_and_endless_loops_are_simulation_errors() {
    let p = program(&[], |_| {
        let out = shared_hbm(&[1, 1], DType::I32);
        let r = register_alloc(None);
        register_store(&out, &r);
        vec![out]
    });
    let err = nki_core::sim::simulate_to_vecs(&p, &[], Default::default()).unwrap_err();
    assert!(
        err.to_string().contains("read before anything wrote it"),
        "{err}"
    );
    let p = program(&[], |_| {
        let out = shared_hbm(&[1, 1], DType::I32);
        let r = register_alloc(Some(1));
        while_loop(&r, || {});
        register_store(&out, &r);
        vec![out]
    });
    let err = nki_core::sim::simulate_to_vecs(&p, &[], Default::default()).unwrap_err();
    assert!(err.to_string().contains("without ending"), "{err}");
}

#[test]
fn register_operands_are_checked_at_the_call() {
    let err = |body: fn()| {
        trace("k", Target::Trn2, &[], |_| {
            body();
            vec![]
        })
        .unwrap_err()
        .to_string()
    };
    let e = err(|| {
        let r = register_alloc(None);
        register_load(&r, sbuf([1, 2], DType::I32));
    });
    assert!(e.contains("src must be one element"), "{e}");
    let e = err(|| {
        let r = register_alloc(None);
        register_load(&r, sbuf([1, 1], DType::F32));
    });
    assert!(e.contains("a register holds an integer"), "{e}");
    let e = err(|| {
        dynamic_range(0, 4, 0, |_| {});
    });
    assert!(e.contains("step must be a positive integer"), "{e}");
    let e = err(|| {
        let stray = Register::from_id(nki_core::ir::RegisterId(9));
        while_loop(&stray, || {});
    });
    assert!(e.contains("does not belong to this kernel's trace"), "{e}");
    let e = err(|| {
        dma_compute(sbuf([2, 2], DType::F32), vec![], DmaComputeArgs::add());
    });
    assert!(e.contains("srcs is empty"), "{e}");
    let e = err(|| {
        let a = sbuf([2, 2], DType::F32);
        dma_compute(
            &a,
            vec![(&sbuf([2, 3], DType::F32)).into()],
            DmaComputeArgs::add(),
        );
    });
    assert!(e.contains("srcs[0] has 6 elements, dst 4"), "{e}");
}

#[test]
fn a_psum_register_source_fails_validation() {
    let p = trace("k", Target::Trn2, &[], |_| {
        let r = register_alloc(None);
        let t = psum([1, 1], DType::I32);
        register_load(&r, &t);
        vec![]
    })
    .unwrap();
    let Err(NkiError::Validation(v)) = validate(&p) else {
        panic!("expected a validation error");
    };
    assert_eq!(v.rule, "dma-psum");
}

/// `dst = a + b + c` element by element, the operands in different layouts and places.
#[test]
fn dma_compute_sums_its_sources_in_fp32_into_dst() {
    let p = program(
        &[
            f32_input("a", &[4, 6]),
            f32_input("b", &[4, 6]),
            f32_input("c", &[6, 4]),
        ],
        |ins| {
            let out = shared_hbm(&[4, 6], DType::BF16);
            let sb = sbuf([4, 6], DType::F32);
            dma_copy(&sb, &ins[1]);
            let dst = sbuf([4, 6], DType::BF16);
            dma_compute(
                &dst,
                vec![
                    (&ins[0]).into(),
                    (&sb).into(),
                    ins[2].reshape(&[4, 6]).into(),
                ],
                DmaComputeArgs::add(),
            );
            dma_copy(&out, &dst);
            // HBM to HBM, the destination one of the sources (read before written).
            let out2 = shared_hbm(&[4, 6], DType::F32);
            dma_copy(&out2, &sb);
            dma_compute(
                &out2,
                vec![(&out2).into(), (&ins[0]).into()],
                DmaComputeArgs::add(),
            );
            vec![out, out2]
        },
    );
    let a: Vec<f32> = (0..24).map(|i| i as f32 * 0.37 - 2.0).collect();
    let b: Vec<f32> = (0..24).map(|i| (i * i) as f32 * 0.01).collect();
    let c: Vec<f32> = (0..24).map(|i| 1.0 / (i as f32 + 1.0)).collect();
    let out = run(&p, &[&a, &b, &c]);
    let want: Vec<f32> = (0..24)
        .map(|k| half::bf16::from_f32(a[k] + b[k] + c[k]).to_f32())
        .collect();
    assert_eq!(out[0], want);
    let want2: Vec<f32> = (0..24).map(|k| b[k] + a[k]).collect();
    assert_eq!(out[1], want2);
}

#[test]
fn dma_compute_rules_follow_the_docs() {
    let rule = |args: DmaComputeArgs, n: usize| {
        let p = trace("k", Target::Trn2, &[], |_| {
            let d = sbuf([2, 2], DType::F32);
            let srcs = (0..n).map(|_| (&d).into()).collect();
            dma_compute(&d, srcs, args);
            vec![]
        })
        .unwrap();
        match validate(&p) {
            Err(NkiError::Validation(v)) => v.rule,
            other => panic!("expected a validation error, got {other:?}"),
        }
    };
    let op = DmaComputeArgs {
        reduce_op: BinOp::Maximum,
        ..DmaComputeArgs::add()
    };
    assert_eq!(rule(op, 2), "dma-compute-op");
    let scaled = DmaComputeArgs {
        scales: Some(vec![1.0, 2.0]),
        ..DmaComputeArgs::add()
    };
    assert_eq!(rule(scaled, 2), "dma-compute-scales");
    assert_eq!(rule(DmaComputeArgs::add(), 17), "dma-compute-sources");
}

#[test]
fn loops_with_registers_never_run_in_parallel() {
    let p = program(&[], |_| {
        let out = shared_hbm(&[4, 1], DType::I32);
        let r = register_alloc(Some(0));
        affine_range(4, |i| {
            let t = sbuf([1, 1], DType::I32);
            register_store(&t, &r);
            dma_copy(out.view().rows(i, 1), &t);
        });
        vec![out]
    });
    assert_eq!(parallel_loops(&p), vec![false]);
}

#[test]
fn cost_charges_a_register_bounded_loop_once_and_a_constant_range_its_trips() {
    let body = |n: Option<i32>| {
        program(
            &[int_input("n", &[1, 1]), f32_input("x", &[128, 512])],
            move |ins| {
                let out = shared_hbm(&[128, 512], DType::F32);
                let x = sbuf([128, 512], DType::F32);
                dma_copy(&x, &ins[1]);
                let stop: RegisterValue = match n {
                    Some(v) => v.into(),
                    None => {
                        let r = register_alloc(None);
                        register_load(&r, &ins[0]);
                        r.into()
                    }
                };
                dynamic_range(0, stop, 1, |_| {
                    tensor_scalar(&x, &x, BinOp::Multiply, 2.0);
                });
                dma_copy(&out, &x);
                vec![out]
            },
        )
    };
    let vector_ns = |p: &Program| {
        let r = estimate(p);
        r.slices
            .iter()
            .filter(|s| s.engine == nki_core::cost::Engine::Vector)
            .count()
    };
    assert_eq!(vector_ns(&body(None)), 1);
    assert_eq!(vector_ns(&body(Some(5))), 5);
}

#[test]
fn codegen_spells_registers_and_device_loops_as_nki() {
    let p = program(&[int_input("n", &[1, 1])], |ins| {
        let out = shared_hbm(&[1, 1], DType::I32);
        let n = register_alloc(None);
        register_load(&n, &ins[0]);
        let flag = register_alloc(Some(1));
        dynamic_range(2, n, 3, |i| {
            register_move(&flag, i);
        });
        while_loop(&flag, || {
            register_move(&flag, 0);
        });
        register_store(&out, &flag);
        vec![out]
    });
    let src = emit_nki(&p);
    for line in [
        "r0 = nisa.register_alloc()",
        "nisa.register_load(dst=r0, src=n[0:1, 0:1])",
        "r1 = nisa.register_alloc(x=1)",
        "for r2 in nl.dynamic_range(2, r0, 3):",
        "nisa.register_move(dst=r1, src=r2)",
        "def _while1(r1):",
        "nisa.register_move(dst=r1, src=0)",
        "return r1",
        "nl.while_loop(r1, _while1)",
        "nisa.register_store(dst=out0[0:1, 0:1], src=r1)",
    ] {
        assert!(src.contains(line), "missing `{line}` in\n{src}");
    }
}

/// A device loop whose body has a long partition-local run and an independent `affine_range`:
/// banded or not, on the pool or not, the same bits, and the inner loop may run in parallel.
#[test]
fn device_loop_bodies_band_and_parallelise_with_the_same_bits() {
    use nki_core::sim::{BandPolicy, ExecPlan, SimOptions, simulate_to_vecs};
    // Each iteration: t = f¹⁰(acc) stored to `out` (a banded run), acc's row 0 stored to each
    // row of `rows` (a parallel loop), then acc += 1.
    let p = program(
        &[int_input("n", &[1, 1]), f32_input("x", &[128, 64])],
        |ins| {
            let out = shared_hbm(&[128, 64], DType::F32);
            let rows = shared_hbm(&[4, 64], DType::F32);
            let acc = sbuf([128, 64], DType::F32);
            dma_copy(&acc, &ins[1]);
            let n = register_alloc(None);
            register_load(&n, &ins[0]);
            dynamic_range(0, n, 1, |_| {
                let t = sbuf([128, 64], DType::F32);
                tensor_scalar(&t, &acc, BinOp::Multiply, 0.75).then(BinOp::Add, 0.125);
                for _ in 0..9 {
                    tensor_scalar(&t, &t, BinOp::Multiply, 0.75).then(BinOp::Add, 0.125);
                }
                dma_copy(&out, &t);
                affine_range(4, |i| {
                    let r = sbuf([1, 64], DType::F32);
                    tensor_copy(&r, acc.region().slice(0, 1, 0, 64));
                    dma_copy(rows.view().rows(i, 1), &r);
                });
                tensor_scalar(&acc, &acc, BinOp::Add, 1.0);
            });
            vec![out, rows]
        },
    );
    assert_eq!(parallel_loops(&p), vec![true]);
    // Block 1 is the device loop's body: its ten tensor_scalars and the store are a banded run.
    let eager = BandPolicy {
        partitions: 16,
        min_instructions: 1,
        min_mean_elements: 1,
    };
    assert!(!ExecPlan::with_bands(&p, eager).bands()[1].is_empty());
    let x: Vec<f32> = (0..128 * 64).map(|i| (i % 97) as f32 * 0.01).collect();
    let mut n_bytes = vec![0u8; 4];
    DType::I32.write(&mut n_bytes, 0, 3.0);
    let mut x_bytes = vec![0u8; x.len() * 4];
    for (i, v) in x.iter().enumerate() {
        DType::F32.write(&mut x_bytes, i, *v);
    }
    let run_with = |opts: SimOptions| simulate_to_vecs(&p, &[&n_bytes, &x_bytes], opts).unwrap();
    let reference = run_with(SimOptions {
        parallel: false,
        bands: BandPolicy {
            partitions: 128,
            min_instructions: usize::MAX,
            min_mean_elements: usize::MAX,
        },
        ..SimOptions::default()
    });
    for bands in [BandPolicy::default(), eager] {
        for parallel in [false, true] {
            assert_eq!(
                run_with(SimOptions {
                    parallel,
                    bands,
                    ..SimOptions::default()
                }),
                reference
            );
        }
    }
    // The last iteration saw acc = x + 2.
    let want: Vec<f32> = x
        .iter()
        .map(|v| (0..10).fold(v + 1.0 + 1.0, |a, _| a * 0.75 + 0.125))
        .collect();
    let got: Vec<f32> = (0..want.len())
        .map(|i| DType::F32.read(&reference[0], i))
        .collect();
    assert_eq!(got, want);
    let row0: Vec<f32> = (0..64).map(|i| DType::F32.read(&reference[1], i)).collect();
    let acc0: Vec<f32> = x[..64].iter().map(|v| v + 1.0 + 1.0).collect();
    assert_eq!(row0, acc0);
}

/// A uint32 element of 2^31 or more arrives in the register as its bits read as int32.
#[test]
fn a_large_uint32_loads_as_its_int32_bits() {
    let p = program(
        &[InputSpec {
            name: "v".into(),
            shape: vec![1, 1],
            dtype: DType::U32,
        }],
        |ins| {
            let out = shared_hbm(&[1, 1], DType::I32);
            let r = register_alloc(None);
            register_load(&r, &ins[0]);
            register_store(&out, &r);
            vec![out]
        },
    );
    // 3·10⁹ is exact in fp32; its bits as int32 are −1294967296, stored rounded to fp32.
    let got = run(&p, &[&[3.0e9]]);
    assert_eq!(got[0], vec![(3_000_000_000u32 as i32) as f32]);
}
