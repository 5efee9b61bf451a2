//! When a run is handed to the simulator's threads: `ExecPlan::work`, the size it is decided
//! from, and the threshold (`sim::split_min_work`).

use nki_core::Target;
use nki_core::ir::Program;
use nki_core::lang::{InputSpec, trace};
use nki_core::prelude::*;
use nki_core::sim::{ExecPlan, SPLIT_MIN_WORK, set_split_min_work, split_min_work};

fn input(name: &str, shape: &[usize]) -> InputSpec {
    InputSpec {
        name: name.into(),
        shape: shape.to_vec(),
        dtype: DType::F32,
    }
}

/// `out = x + 1` on one `[p, f]` tile: load, add, store.
fn add_one(p: usize, f: usize) -> Program {
    trace("add_one", Target::Trn2, &[input("x", &[p, f])], |h| {
        let out = shared_hbm(&[p, f], DType::F32);
        let t = sbuf([p, f], DType::F32);
        dma_copy(&t, &h[0]);
        tensor_scalar(&t, &t, BinOp::Add, 1.0);
        dma_copy(&out, &t);
        vec![out]
    })
    .unwrap()
}

/// `x · w` for `[k, m]ᵀ · [k, n]` in one matmul, `reps` times in a loop.
fn matmul(k: usize, m: usize, n: usize, reps: usize) -> Program {
    trace(
        "mm",
        Target::Trn2,
        &[input("x", &[k, m]), input("w", &[k, n])],
        |h| {
            let out = shared_hbm(&[m, n], DType::F32);
            let a = sbuf([k, m], DType::F32);
            let b = sbuf([k, n], DType::F32);
            dma_copy(&a, &h[0]);
            dma_copy(&b, &h[1]);
            let acc = psum([m, n], DType::F32);
            for_each_tile(reps, 1, |_| nc_matmul(&acc, &a, &b, false));
            let res = sbuf([m, n], DType::F32);
            tensor_copy(&res, &acc);
            dma_copy(&out, &res);
            vec![out]
        },
    )
    .unwrap()
}

#[test]
fn work_counts_tile_elements_per_iteration_and_a_matmuls_multiply_adds() {
    // Load 16, add 16 + 16, store 16.
    assert_eq!(ExecPlan::new(&add_one(4, 4)).work(), 64);
    assert_eq!(ExecPlan::new(&add_one(128, 512)).work(), 4 * 128 * 512);
    let (k, m, n) = (128, 64, 256);
    let loads = k * m + k * n;
    let one = (k * m + k * n + m * n + k * m * n) as u64;
    let copy_out = (2 * m * n + m * n) as u64;
    assert_eq!(
        ExecPlan::new(&matmul(k, m, n, 1)).work(),
        loads as u64 + one + copy_out
    );
    assert_eq!(
        ExecPlan::new(&matmul(k, m, n, 8)).work(),
        loads as u64 + 8 * one + copy_out
    );
}

#[test]
fn small_runs_stay_on_the_calling_thread_unless_the_threshold_says_otherwise() {
    let small = ExecPlan::new(&add_one(4, 4));
    let large = ExecPlan::new(&matmul(128, 128, 512, 4096));
    assert!(
        small.work() < SPLIT_MIN_WORK,
        "a 4x4 call must never wake the pool"
    );
    if std::env::var_os(nki_core::sim::SPLIT_MIN_WORK_ENV).is_none() {
        assert_eq!(split_min_work(), SPLIT_MIN_WORK);
    }
    set_split_min_work(SPLIT_MIN_WORK);
    assert!(!small.worth_splitting());
    assert!(
        !small.hand_to_pool(),
        "a small run stays on the caller, idle or busy"
    );
    assert!(large.worth_splitting(), "work {}", large.work());
    set_split_min_work(0);
    assert!(small.worth_splitting());
    assert!(
        small.hand_to_pool(),
        "threshold 0 hands every run over, busy or not"
    );
    set_split_min_work(u64::MAX);
    assert!(!large.worth_splitting());
    assert!(!large.hand_to_pool());
    set_split_min_work(SPLIT_MIN_WORK);
}
