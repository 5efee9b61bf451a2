//! SPMD launch grids in the Rust tile language: `program_id` (symbolic), `num_programs` and
//! `program_ndim` under `trace_grid`; every instance simulated over the shared HBM (1-D and
//! 2-D grids, the id in HBM offsets and inside loops); grid errors; codegen's `LAUNCH_GRID`
//! and `nl.program_id`; the unrolled stream (one instance per one-iteration grid loop); and the
//! cost model's round-robin distribution of instances over a logical core's physical cores.

mod common;

use common::run;
use nki_core::codegen::emit_nki;
use nki_core::cost::{CostTable, estimate, estimate_on_cores};
use nki_core::ir::{LoopKind, Program, Stmt, unroll};
use nki_core::lang::{InputSpec, trace, trace_grid};
use nki_core::prelude::*;
use nki_core::validate::validate;

fn f32_input(shape: &[usize]) -> Vec<InputSpec> {
    vec![InputSpec {
        name: "x".into(),
        shape: shape.to_vec(),
        dtype: DType::F32,
    }]
}

/// Each instance of a 1-D grid copies its `rows / G` rows of `x` through SBUF, in tiles of at
/// most 128 rows (the id in the HBM offsets, inside a loop).
fn copy_rows(grid: usize, rows: usize, cols: usize, target: Target) -> Program {
    let p = trace_grid(
        "copy_rows",
        target,
        &[grid],
        &f32_input(&[rows, cols]),
        |ins| {
            let x = &ins[0];
            let out = shared_hbm(&[rows, cols], DType::F32);
            let share = rows / num_programs(&[0]);
            let first = program_id(0) * share;
            for_each_tile(share, PMAX, |span| {
                let start = first.clone() + span.start;
                let t = sbuf([span.size, cols], DType::F32);
                dma_copy(&t, x.rows(start.clone(), span.size));
                let acc = sbuf([span.size, cols], DType::F32);
                tensor_copy(&acc, &t);
                dma_copy(out.rows(start, span.size), &acc);
            });
            vec![out]
        },
    )
    .unwrap();
    validate(&p).unwrap();
    p
}

#[test]
fn every_instance_of_a_1d_grid_writes_its_slice_of_the_shared_output() {
    let (rows, cols) = (2 * 200, 8);
    let p = copy_rows(2, rows, cols, Target::Trn2);
    assert_eq!(p.grid, vec![2]);
    assert_eq!(p.program_count(), 2);
    let x: Vec<f32> = (0..rows * cols).map(|i| i as f32 * 0.25 - 7.0).collect();
    let out = run(&p, &[&x]);
    assert_eq!(out[0], x, "both halves copied by their own instance");
}

#[test]
fn the_program_id_is_an_affine_index_over_a_grid_loop() {
    let p = copy_rows(4, 4 * 64, 4, Target::Trn2);
    // One grid loop of 4 iterations wraps the body, which is traced once.
    let [Stmt::Loop { var, .. }] = p.body.as_slice() else {
        panic!("expected one grid loop, got {:?}", p.body);
    };
    let decl = &p.loops[var.0 as usize];
    assert_eq!((decl.kind, decl.trip), (LoopKind::Grid { axis: 0 }, 4));
    // Unrolled, each instance is a one-iteration grid loop with constant offsets.
    let u = unroll(&p);
    assert_eq!(u.body.len(), 4);
    for s in &u.body {
        let Stmt::Loop { var, .. } = s else {
            panic!("expected instance loops")
        };
        assert_eq!(u.loops[var.0 as usize].trip, 1);
        assert_eq!(u.loops[var.0 as usize].kind, LoopKind::Grid { axis: 0 });
    }
    assert_eq!(u.instruction_count(), 4 * p.instruction_count());
}

/// A 2-D grid `[A, B]`: instance `(i, j)` copies block `x[i, j]` (shape `[P, F]`) into
/// `out[i, j]`, adding `num_programs(&[0, 1])` and `program_ndim()` so both are checked.
fn blocks(a: usize, b: usize, p: usize, f: usize) -> Program {
    let prog = trace_grid(
        "blocks",
        Target::Trn2,
        &[a, b],
        &f32_input(&[a * b * p, f]),
        |ins| {
            let x = &ins[0];
            let out = shared_hbm(&[a * b * p, f], DType::F32);
            assert_eq!(program_ndim(), 2);
            let total = num_programs(&[0, 1]);
            let (i, j) = (program_id(0), program_id(1));
            let start = i * (b * p) + j * p;
            let t = sbuf([p, f], DType::F32);
            dma_copy(&t, x.rows(start.clone(), p));
            tensor_scalar(&t, &t, BinOp::Add, (total + 10 * program_ndim()) as f32);
            dma_copy(out.rows(start, p), &t);
            vec![out]
        },
    )
    .unwrap();
    validate(&prog).unwrap();
    prog
}

#[test]
fn a_2d_grid_runs_every_instance_in_program_id_order() {
    let (a, b, p, f) = (2, 3, 4, 5);
    let prog = blocks(a, b, p, f);
    assert_eq!(prog.grid, vec![2, 3]);
    let x: Vec<f32> = (0..a * b * p * f).map(|i| i as f32).collect();
    let out = run(&prog, &[&x]);
    let want: Vec<f32> = x.iter().map(|v| v + 6.0 + 20.0).collect();
    assert_eq!(out[0], want);
}

#[test]
fn without_a_grid_the_kernel_is_one_program() {
    let p = trace("one", Target::Trn2, &f32_input(&[4, 4]), |ins| {
        assert_eq!(program_ndim(), 0);
        assert_eq!(num_programs(&[0]), 1);
        assert_eq!(program_id(0), AffineExpr::constant(0));
        let out = shared_hbm(&[4, 4], DType::F32);
        dma_copy(&out, &ins[0]);
        vec![out]
    })
    .unwrap();
    assert!(p.grid.is_empty());
    assert!(
        !p.to_json().contains("grid"),
        "no grid key: cache keys unchanged"
    );
}

#[test]
fn an_axis_outside_the_grid_is_a_trace_error_naming_axis_and_grid() {
    let err = trace_grid("k", Target::Trn2, &[2], &f32_input(&[4, 4]), |ins| {
        let out = shared_hbm(&[4, 4], DType::F32);
        let t = sbuf([2, 4], DType::F32);
        dma_copy(&t, ins[0].rows(program_id(1), 2));
        dma_copy(&out, &ins[0]);
        vec![out]
    })
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("program_id: axis 1 is outside the launch grid (2,)"),
        "{err}"
    );
    assert!(err.contains("spmd.rs"), "names the kernel line: {err}");

    let err = trace_grid("k", Target::Trn2, &[2, 2], &f32_input(&[4, 4]), |ins| {
        let _ = num_programs(&[0, 2]);
        vec![ins[0].clone()]
    })
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("num_programs: axis 2 is outside the launch grid (2, 2)"),
        "{err}"
    );

    let err = trace_grid("k", Target::Trn2, &[2, 0], &f32_input(&[4, 4]), |ins| {
        vec![ins[0].clone()]
    })
    .unwrap_err()
    .to_string();
    assert!(err.contains("no programs along axis 1"), "{err}");
}

#[test]
fn instances_reaching_outside_an_output_are_a_trace_error() {
    // Three instances of 64 rows each over a 128-row output: the third writes rows 128..192.
    let err = trace_grid("over", Target::Trn2, &[3], &f32_input(&[128, 4]), |ins| {
        let out = shared_hbm(&[128, 4], DType::F32);
        let t = sbuf([64, 4], DType::F32);
        dma_copy(&t, ins[0].rows(0, 64));
        dma_copy(out.rows(program_id(0) * 64usize, 64), &t);
        vec![out]
    })
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("the slice [64*i0, 64*i0 + 64) reaches [0, 192)"),
        "the grid loop's range is checked: {err}"
    );
}

#[test]
fn codegen_emits_the_grid_and_the_symbolic_program_id() {
    let src = emit_nki(&blocks(2, 3, 4, 5));
    assert!(src.contains("LAUNCH_GRID = (2, 3)\n"), "{src}");
    assert!(src.contains("i0 = nl.program_id(0)"), "{src}");
    assert!(src.contains("i1 = nl.program_id(1)"), "{src}");
    assert!(src.contains("@nki.jit\ndef blocks(x):"), "{src}");
    // Unrolled (as the frontend traces it): one `if` per instance.
    let unrolled = emit_nki(&unroll(&copy_rows(2, 8, 4, Target::Trn2)));
    assert!(unrolled.contains("if nl.program_id(0) == 0:"), "{unrolled}");
    assert!(unrolled.contains("if nl.program_id(0) == 1:"), "{unrolled}");
}

#[test]
fn the_cost_model_spreads_instances_round_robin_over_the_physical_cores() {
    let one = estimate(&copy_rows(1, 512, 256, Target::Trn2)).total_ns;
    // Two instances, each with the same work as `one`, on Trn2's two cores (LNC=2): about the
    // time of one; on one core (Trn1's LNC=1, or LNC=1 on Trn2) about twice that.
    let two = copy_rows(2, 1024, 256, Target::Trn2);
    let r = estimate(&two);
    assert_eq!(r.core_ns.len(), 2);
    assert!(
        (r.total_ns - one).abs() < 0.05 * one,
        "{} vs {one}",
        r.total_ns
    );
    assert!(
        r.to_string().contains("launch grid over 2 physical cores"),
        "{r}"
    );
    let lnc1 = estimate_on_cores(&two, CostTable::for_target(Target::Trn2), 1);
    assert!(lnc1.core_ns.is_empty());
    assert!(lnc1.total_ns > 1.6 * one, "{} vs {one}", lnc1.total_ns);
    // Four instances on two cores: two each.
    let four = estimate(&copy_rows(4, 2048, 256, Target::Trn2));
    assert!(
        four.total_ns > 1.6 * one && four.total_ns < 2.4 * one,
        "{}",
        four.total_ns
    );
    // Trn1 has one physical core per logical core.
    let trn1 = estimate(&copy_rows(2, 1024, 256, Target::Trn1));
    assert!(trn1.core_ns.is_empty());
}
