//! Band-by-band execution (`nki_core::sim::BandPolicy`) on a small traced program with loads,
//! elementwise work, a row reduction, a few-column matmul accumulating across the run into PSUM
//! and stores: the plan bands the loop body, the bits match instruction-by-instruction
//! execution, and a band that panics makes the run panic instead of leaving the other bands
//! waiting for it.

use nki_core::ir::{Op, Program, Stmt};
use nki_core::lang::{InputSpec, trace};
use nki_core::prelude::*;
use nki_core::sim::{BandPolicy, ExecPlan, SimOptions, simulate_to_vecs};

fn input(name: &str, shape: &[usize]) -> InputSpec {
    InputSpec {
        name: name.into(),
        shape: shape.to_vec(),
        dtype: DType::F32,
    }
}

/// `out = exp(x + y − rowsum(x + y)/64)`-like work on `[rows, 40]`, and `sums = onesᵀ·(x + y)`
/// (two weighted column sums) accumulated in PSUM by the loop body's matmul.
fn program(rows: usize) -> Program {
    trace(
        "banded",
        Target::Trn2,
        &[input("x", &[rows, 40]), input("y", &[rows, 40])],
        |h| {
            let out = shared_hbm(&[rows, 40], DType::F32);
            let sums = shared_hbm(&[2, 40], DType::F32);
            let acc = psum([2, 40], DType::F32);
            memset(&acc, 0.0);
            let weights = sbuf([rows, 2], DType::F32);
            memset(weights.cols(0, 1), 1.0);
            memset(weights.cols(1, 1), 0.5);
            sequential_range(1, |_| {
                let (xt, yt) = (sbuf([rows, 40], DType::F32), sbuf([rows, 40], DType::F32));
                dma_copy(&xt, &h[0]);
                dma_copy(&yt, &h[1]);
                let s = sbuf([rows, 40], DType::F32);
                tensor_tensor(&s, &xt, &yt, BinOp::Add);
                let total = sbuf([rows, 1], DType::F32);
                tensor_reduce(&total, BinOp::Add, &s, 1, true);
                let o = sbuf([rows, 40], DType::F32);
                activation(&o, ActFn::Exp, &s, Some(total.region()), 1.0 / 64.0);
                nc_matmul(&acc, &weights, &s, true);
                dma_copy(&out, &o);
            });
            let r = sbuf([2, 40], DType::F32);
            tensor_copy(&r, &acc);
            dma_copy(&sums, &r);
            vec![out, sums]
        },
    )
    .unwrap()
}

fn values(n: usize, seed: usize) -> Vec<u8> {
    (0..n)
        .flat_map(|i| (((i * 37 + seed) % 101) as f32 / 50.0 - 1.0).to_le_bytes())
        .collect()
}

fn run(p: &Program, bands: BandPolicy, parallel: bool) -> Vec<Vec<u8>> {
    let rows = p.hbm[0].shape[0];
    let (x, y) = (values(rows * 40, 1), values(rows * 40, 2));
    simulate_to_vecs(
        p,
        &[&x, &y],
        SimOptions {
            parallel,
            bands,
            ..SimOptions::default()
        },
    )
    .unwrap()
}

#[test]
fn the_loop_body_runs_band_by_band_with_the_same_bits() {
    let p = program(100);
    let whole = run(&p, BandPolicy::never(), false);
    for partitions in [1, 3, 7, 32, 99] {
        let policy = BandPolicy::everywhere(partitions);
        let plan = ExecPlan::with_bands(&p, policy);
        let regions: Vec<_> = plan.bands().iter().flatten().collect();
        // The loop body (block 1), matmul included; the memsets of the accumulator and the
        // copy out of it stay outside.
        assert_eq!(plan.bands()[0], vec![], "partitions {partitions}");
        assert_eq!(regions.len(), 1, "partitions {partitions}");
        assert_eq!(regions[0].matmuls.len(), 1);
        assert_eq!(regions[0].partitions, 100);
        for parallel in [false, true] {
            assert!(
                run(&p, policy, parallel) == whole,
                "bands of {partitions} partitions (parallel {parallel}) change the outputs"
            );
        }
    }
    // The default policy leaves a run this small alone.
    let default = ExecPlan::new(&p);
    assert!(default.bands().iter().all(Vec::is_empty));
}

/// The loop body's matmul, to break.
fn matmul_in(body: &mut [Stmt]) -> Option<&mut Op> {
    body.iter_mut().find_map(|s| match s {
        Stmt::Inst(inst) if matches!(inst.op, Op::NcMatmul { .. }) => Some(&mut inst.op),
        Stmt::Loop { body, .. } => matmul_in(body),
        _ => None,
    })
}

#[test]
fn a_band_that_panics_does_not_leave_the_others_waiting() {
    let mut p = program(128);
    // A hand-built program (`simulate` does not validate): the stationary operand starts past
    // the end of its tile, so every band's share of the matmul panics on its slice.
    if let Some(Op::NcMatmul { stationary, .. }) = matmul_in(&mut p.body) {
        stationary.f0 = 1 << 20;
    }
    let policy = BandPolicy::everywhere(8);
    let plan = ExecPlan::with_bands(&p, policy);
    assert_eq!(
        plan.bands().iter().flatten().count(),
        1,
        "the loop body is banded"
    );
    let result = std::panic::catch_unwind(|| run(&p, policy, true));
    assert!(result.is_err(), "the malformed matmul panics");
}
