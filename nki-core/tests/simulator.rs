//! Simulator behaviour on small traced programs: numerics, poisoning, parallel determinism.

use nki_core::ir::Program;
use nki_core::lang::{InputSpec, trace};
use nki_core::prelude::*;
use nki_core::sim::{HostTensor, HostTensorMut, SimOptions, simulate};
use nki_core::{NkiError, Target};

fn input(name: &str, shape: &[usize], dtype: DType) -> InputSpec {
    InputSpec {
        name: name.into(),
        shape: shape.to_vec(),
        dtype,
    }
}

fn bytes(vals: &[f32], dtype: DType) -> Vec<u8> {
    let mut b = vec![0u8; vals.len() * dtype.size_bytes()];
    for (i, v) in vals.iter().enumerate() {
        dtype.write(&mut b, i, *v);
    }
    b
}

fn floats(b: &[u8], dtype: DType) -> Vec<f32> {
    (0..b.len() / dtype.size_bytes())
        .map(|i| dtype.read(b, i))
        .collect()
}

fn run(program: &Program, ins: &[(&[f32], DType)], parallel: bool) -> Result<Vec<f32>, NkiError> {
    let in_bytes: Vec<Vec<u8>> = ins.iter().map(|(v, d)| bytes(v, *d)).collect();
    let inputs: Vec<HostTensor<'_>> = program
        .inputs()
        .zip(&in_bytes)
        .map(|((_, decl), b)| HostTensor {
            dtype: decl.dtype,
            shape: &decl.shape,
            data: b,
        })
        .collect();
    let out = &program.hbm[program.outputs[0].0 as usize];
    let mut out_bytes = vec![0u8; out.numel() * out.dtype.size_bytes()];
    simulate(
        program,
        &inputs,
        &mut [HostTensorMut {
            dtype: out.dtype,
            shape: &out.shape,
            data: &mut out_bytes,
        }],
        SimOptions {
            parallel,
            ..SimOptions::default()
        },
    )?;
    Ok(floats(&out_bytes, out.dtype))
}

fn ramp(n: usize, scale: f32) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 37 % 101) as f32 - 50.0) * scale)
        .collect()
}

/// A tiled matmul written directly in the tile language (no macro), for simulator tests.
fn matmul_program(m: usize, k: usize, n: usize, dt: DType) -> Program {
    trace(
        "mm",
        Target::Trn2,
        &[input("x", &[m, k], dt), input("w", &[k, n], dt)],
        |h| {
            let (x, w) = (&h[0], &h[1]);
            let out = shared_hbm(&[m, n], dt);
            for_each_tile(m, 128, |mt| {
                for_each_tile(n, 512, |nt| {
                    let acc = psum([mt.size, nt.size], DType::F32);
                    memset(&acc, 0.0);
                    for_each_tile(k, 128, |kt| {
                        let a = sbuf([kt.size, mt.size], dt);
                        dma_copy(
                            &a,
                            x.rows(mt.start.clone(), mt.size)
                                .cols(kt.start.clone(), kt.size)
                                .t(),
                        );
                        let b = sbuf([kt.size, nt.size], dt);
                        dma_copy(
                            &b,
                            w.rows(kt.start.clone(), kt.size)
                                .cols(nt.start.clone(), nt.size),
                        );
                        nc_matmul(&acc, &a, &b, true);
                    });
                    let res = sbuf([mt.size, nt.size], dt);
                    tensor_copy(&res, &acc);
                    dma_copy(
                        out.rows(mt.start.clone(), mt.size)
                            .cols(nt.start.clone(), nt.size),
                        &res,
                    );
                });
            });
            vec![out]
        },
    )
    .unwrap()
}

#[test]
fn tiled_matmul_matches_naive_with_ragged_edges() {
    let (m, k, n) = (300, 260, 700);
    let p = matmul_program(m, k, n, DType::F32);
    nki_core::validate::validate(&p).unwrap();
    let (x, w) = (ramp(m * k, 1e-2), ramp(k * n, 2e-2));
    let got = run(&p, &[(&x, DType::F32), (&w, DType::F32)], true).unwrap();
    for i in (0..m).step_by(7) {
        for j in (0..n).step_by(11) {
            let want: f64 = (0..k)
                .map(|l| x[i * k + l] as f64 * w[l * n + j] as f64)
                .sum();
            let g = got[i * n + j] as f64;
            assert!(
                (g - want).abs() <= 1e-4 * want.abs().max(1.0),
                "[{i},{j}] {g} vs {want}"
            );
        }
    }
    // The m loop runs in parallel, the K accumulation does not; bits must not depend on it.
    assert_eq!(
        got,
        run(&p, &[(&x, DType::F32), (&w, DType::F32)], false).unwrap()
    );
    let plan = nki_core::sim::parallel_loops(&p);
    assert!(plan[0], "the loop over full M tiles is independent");
    assert!(
        plan.iter().filter(|b| **b).count() < plan.len(),
        "K accumulation loops are not parallel"
    );
}

#[test]
fn writes_round_to_nearest_even_in_bf16() {
    let p = trace(
        "rt",
        Target::Trn2,
        &[input("x", &[1, 2], DType::F32)],
        |h| {
            let out = shared_hbm(&[1, 2], DType::BF16);
            let a = sbuf([1, 2], DType::F32);
            dma_copy(&a, &h[0]);
            let b = sbuf([1, 2], DType::BF16);
            tensor_scalar(&b, &a, BinOp::Add, 1.0);
            dma_copy(&out, &b);
            vec![out]
        },
    )
    .unwrap();
    // 1 + 2^-8 is a tie between 1 and 1 + 2^-7: ties go to the even mantissa (1.0).
    // 1 + 3·2^-8 ties between 1 + 2^-7 (odd) and 1 + 2^-6 (even).
    let got = run(&p, &[(&[1.0 / 256.0, 3.0 / 256.0], DType::F32)], true).unwrap();
    assert_eq!(got, vec![1.0, 1.0 + 1.0 / 64.0]);
}

#[test]
fn fresh_tiles_are_poisoned_with_nan() {
    let p = trace(
        "poison",
        Target::Trn2,
        &[input("x", &[2, 4], DType::F32)],
        |h| {
            let out = shared_hbm(&[2, 4], DType::F32);
            let a = sbuf([2, 4], DType::F32);
            dma_copy(a.cols(0, 2), h[0].cols(0, 2));
            dma_copy(&out, &a);
            vec![out]
        },
    )
    .unwrap();
    let got = run(&p, &[(&[1.0; 8], DType::F32)], true).unwrap();
    assert_eq!(&got[..2], &[1.0, 1.0]);
    assert!(
        got[2].is_nan() && got[3].is_nan(),
        "unwritten columns read back as NaN: {got:?}"
    );
}

#[test]
fn activation_reduce_and_column_operands() {
    let p = trace(
        "act",
        Target::Trn2,
        &[input("x", &[3, 4], DType::F32)],
        |h| {
            let out = shared_hbm(&[3, 4], DType::F32);
            let a = sbuf([3, 4], DType::F32);
            dma_copy(&a, &h[0]);
            let sq = sbuf([3, 4], DType::F32);
            let s = sbuf([3, 1], DType::F32);
            activation_reduce(&sq, ActFn::Square, &a, BinOp::Add, &s, None, 2.0);
            let mx = sbuf([3, 1], DType::F32);
            tensor_reduce(&mx, BinOp::Maximum, &a, 1, false);
            // out = (x - max) * sum((2x)²)
            tensor_scalar(&sq, &a, BinOp::Subtract, &mx).then(BinOp::Multiply, &s);
            dma_copy(&out, &sq);
            vec![out]
        },
    )
    .unwrap();
    let x: Vec<f32> = (0..12).map(|i| i as f32 * 0.5 - 2.0).collect();
    let got = run(&p, &[(&x, DType::F32)], true).unwrap();
    for r in 0..3 {
        let row = &x[r * 4..r * 4 + 4];
        let s: f32 = row.iter().map(|v| (2.0 * v) * (2.0 * v)).sum();
        let m = row.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
        for c in 0..4 {
            assert_eq!(got[r * 4 + c], (row[c] - m) * s);
        }
    }
}

#[test]
fn out_of_bounds_slices_are_trace_errors_with_the_source_line() {
    let err = trace(
        "oob",
        Target::Trn2,
        &[input("x", &[100, 4], DType::F32)],
        |h| {
            let out = shared_hbm(&[100, 4], DType::F32);
            affine_range(2, |i| {
                let t = sbuf([64, 4], DType::F32);
                dma_copy(&t, h[0].rows(i * 64usize, 64)); // rows 64..128 of a 100-row tensor
                dma_copy(out.rows(AffineExpr::from(0usize), 64), &t);
            });
            vec![out]
        },
    )
    .unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.starts_with(&format!("trace error at {}:", file!())),
        "{msg}"
    );
    assert!(
        msg.contains(
            "dimension 0 has size 100, but the slice [64*i0, 64*i0 + 64) reaches [0, 128)"
        ),
        "{msg}"
    );
}

#[test]
fn kernel_inputs_are_read_only() {
    let err = trace(
        "ro",
        Target::Trn2,
        &[input("x", &[1, 4], DType::F32)],
        |h| {
            let t = sbuf([1, 4], DType::F32);
            memset(&t, 0.0);
            dma_copy(&h[0], &t);
            vec![]
        },
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("kernel input `x` is read-only"),
        "{err}"
    );
}

#[test]
fn buffers_must_match_the_program() {
    let p = matmul_program(4, 4, 4, DType::F32);
    let err = run(
        &p,
        &[(&[0.0; 16], DType::F32), (&[0.0; 15], DType::F32)],
        true,
    )
    .unwrap_err();
    assert!(
        err.to_string().contains(
            "buffer for w is f32 [4, 4] (60 bytes), but the program expects f32 [4, 4] (64 bytes)"
        ),
        "{err}"
    );
}

/// `out[0, j] = Σ_{i < 4} x[i, j]` for `x` `[4, 3]`, accumulated in a tile declared outside a
/// `sequential_range`, each row through a tile allocated inside it.
fn row_sum_program() -> Program {
    trace(
        "row_sum",
        Target::Trn2,
        &[input("x", &[4, 3], DType::F32)],
        |h| {
            let out = shared_hbm(&[1, 3], DType::F32);
            let acc = sbuf([1, 3], DType::F32);
            memset(&acc, 0.0);
            sequential_range(4, |i| {
                let row = sbuf([1, 3], DType::F32);
                dma_copy(&row, h[0].rows(i, 1));
                tensor_tensor(&acc, &acc, &row, BinOp::Add);
            });
            dma_copy(&out, &acc);
            vec![out]
        },
    )
    .unwrap()
}

/// Rows of [`row_sum_program`]'s input and the sums it must give.
const ROW_SUM_INPUT: [f32; 12] = [
    1.0, 2.0, 3.0, 10.0, 20.0, 30.0, 100.0, 200.0, 300.0, 1000.0, 2000.0, 3000.0,
];
const ROW_SUMS: [f32; 3] = [1111.0, 2222.0, 3333.0];

#[test]
fn sequential_range_carries_state_in_order() {
    let p = row_sum_program();
    nki_core::validate::validate(&p).unwrap();
    assert_eq!(nki_core::sim::parallel_loops(&p), vec![false]);
    assert_eq!(
        run(&p, &[(&ROW_SUM_INPUT, DType::F32)], true).unwrap(),
        ROW_SUMS
    );
}

#[test]
fn column_tiles_of_one_row_block_run_in_parallel() {
    // M = 64 fits one row tile, so only the loop over 512-wide column tiles can be parallel:
    // the row-and-column analysis proves its writes disjoint; the K loop stays sequential.
    let (m, k, n) = (64, 256, 1100);
    let p = matmul_program(m, k, n, DType::F32);
    let plan = nki_core::sim::parallel_loops(&p);
    let kinds: Vec<usize> = p.loops.iter().map(|l| l.trip).collect();
    assert_eq!(
        kinds,
        vec![2, 2, 2],
        "n tiles, K tiles (full-n body), K tiles (n tail)"
    );
    assert_eq!(plan, vec![true, false, false]);
    let (x, w) = (ramp(m * k, 1e-2), ramp(k * n, 2e-2));
    let par = run(&p, &[(&x, DType::F32), (&w, DType::F32)], true).unwrap();
    assert_eq!(
        par,
        run(&p, &[(&x, DType::F32), (&w, DType::F32)], false).unwrap()
    );
}

#[test]
fn overlapping_writes_stay_sequential() {
    // Every iteration writes the same two output rows: never parallel.
    let p = trace(
        "overlap",
        Target::Trn2,
        &[input("x", &[2, 8], DType::F32)],
        |h| {
            let out = shared_hbm(&[2, 8], DType::F32);
            affine_range(4, |_| {
                let t = sbuf([2, 8], DType::F32);
                dma_copy(&t, &h[0]);
                dma_copy(&out, &t);
            });
            vec![out]
        },
    )
    .unwrap();
    assert_eq!(nki_core::sim::parallel_loops(&p), vec![false]);
    // Column windows 4 wide moving by 2: they overlap, so not parallel either.
    let p = trace(
        "stagger",
        Target::Trn2,
        &[input("x", &[2, 16], DType::F32)],
        |h| {
            let out = shared_hbm(&[2, 16], DType::F32);
            affine_range(4, |j| {
                let t = sbuf([2, 4], DType::F32);
                dma_copy(&t, h[0].cols(j.clone() * 2usize, 4));
                dma_copy(out.cols(j * 2usize, 4), &t);
            });
            vec![out]
        },
    )
    .unwrap();
    assert_eq!(nki_core::sim::parallel_loops(&p), vec![false]);
}

#[test]
fn poison_is_elided_only_when_no_read_can_see_an_unwritten_element() {
    let p = trace(
        "touch",
        Target::Trn2,
        &[input("x", &[4, 8], DType::F32)],
        |h| {
            let out = shared_hbm(&[4, 8], DType::F32);
            let full = sbuf([4, 8], DType::F32); // t0: whole-tile DMA first
            dma_copy(&full, &h[0]);
            let part = sbuf([4, 8], DType::F32); // t1: half written, then read whole
            dma_copy(part.cols(0, 4), h[0].cols(0, 4));
            let read_first = sbuf([4, 8], DType::F32); // t2: read (in place) first
            tensor_tensor(&read_first, &read_first, &full, BinOp::Add);
            let acc = psum([4, 8], DType::F32); // t3: accumulating matmul reads it
            let lhs = sbuf([4, 4], DType::F32); // t4: memset overwrites
            memset(&lhs, 1.0);
            nc_matmul(&acc, &lhs, &full, true);
            let halves = sbuf([4, 8], DType::F32); // t5: two column halves, then read whole
            tensor_copy(halves.cols(4, 4), full.cols(4, 4));
            tensor_copy(halves.cols(0, 4), full.cols(0, 4));
            let sink = sbuf([4, 8], DType::F32); // t6: overwritten whole
            tensor_tensor(&sink, &halves, &part, BinOp::Add);
            let rows = sbuf([4, 8], DType::F32); // t7: partition halves, read between them
            tensor_copy(
                rows.region().slice(0, 2, 0, 8),
                full.region().slice(0, 2, 0, 8),
            );
            let probe = sbuf([4, 8], DType::F32); // t8: overwritten whole
            tensor_copy(&probe, &rows);
            tensor_copy(
                rows.region().slice(2, 2, 0, 8),
                full.region().slice(2, 2, 0, 8),
            );
            let left = sbuf([4, 8], DType::F32); // t9: only its written half is ever read
            tensor_copy(left.cols(0, 4), full.cols(0, 4));
            tensor_copy(halves.cols(0, 4), left.cols(0, 4));
            dma_copy(&out, &halves);
            vec![out]
        },
    )
    .unwrap();
    let plan = nki_core::sim::ExecPlan::new(&p);
    assert_eq!(
        plan.poison(),
        [
            false, true, true, true, false, false, false, true, false, false
        ]
    );
    // Elision never changes results: `out` is `x` copied through written halves.
    let x: Vec<f32> = (0..32).map(|i| i as f32).collect();
    let got = run(&p, &[(&x, DType::F32)], true).unwrap();
    assert_eq!(got[..8], x[..8]);
}

#[test]
fn transposed_loads_match_element_by_element_gathers() {
    // x[6, 5] loaded as xᵀ [5, 6] (p_stride 1, f_stride 5) into a sub-region of a larger tile.
    let p = trace(
        "tload",
        Target::Trn2,
        &[input("x", &[6, 5], DType::BF16)],
        |h| {
            let out = shared_hbm(&[5, 6], DType::BF16);
            let t = sbuf([8, 9], DType::BF16);
            memset(&t, 0.0);
            dma_copy(t.region().slice(1, 5, 2, 6), h[0].view().t());
            let o = sbuf([5, 6], DType::BF16);
            tensor_copy(&o, t.region().slice(1, 5, 2, 6));
            dma_copy(&out, &o);
            vec![out]
        },
    )
    .unwrap();
    let x: Vec<f32> = (0..30).map(|i| i as f32).collect();
    let got = run(&p, &[(&x, DType::BF16)], true).unwrap();
    for r in 0..5 {
        for c in 0..6 {
            assert_eq!(got[r * 6 + c], x[c * 5 + r]);
        }
    }
}

/// Adds one to integer indices (integer tensors: exact fp32 inside, rounded back on write).
#[nki_core::kernel(shape(idx = [N]) -> [N], dtype(idx in {i32}) -> idx)]
pub fn next_index(idx: &Hbm) -> Hbm {
    let n = idx.dim(0);
    let out = shared_hbm(&[n], idx.dtype());
    let t = sbuf([1, n], idx.dtype());
    dma_copy(&t, idx.reshape(&[1, n]));
    tensor_scalar(&t, &t, BinOp::Add, 1.0);
    dma_copy(out.reshape(&[1, n]), &t);
    out
}

#[test]
fn integer_tensors_are_exact_below_two_to_the_24() {
    use nki_core::testing::{HostArray, run_kernel};
    let idx = HostArray::new(&[4], DType::I32, [0.0, 5.0, -3.0, 16_777_215.0]);
    let out = run_kernel(&NEXT_INDEX_KERNEL, &[idx], &[], Target::Trn2).unwrap();
    assert_eq!(out[0].dtype, DType::I32);
    assert_eq!(out[0].values, [1.0, 6.0, -2.0, 16_777_216.0]);
    let floats = HostArray::new(&[4], DType::F32, [0.0; 4]);
    let err = run_kernel(&NEXT_INDEX_KERNEL, &[floats], &[], Target::Trn2).unwrap_err();
    assert_eq!(
        err.to_string(),
        "neuron::next_index: idx has dtype torch.float32 (f32), but the contract allows idx in {i32}"
    );
}

/// Transposes a ragged `[100, 70]` tile through PSUM and back.
#[nki_core::kernel(shape(x = [P, F]) -> [F, P], dtype(x in {f32, bf16}) -> x, require(P <= 128, F <= 128))]
pub fn transpose_tile(x: &Hbm) -> Hbm {
    let (p, f) = (x.dim(0), x.dim(1));
    let out = shared_hbm(&[f, p], x.dtype());
    let t = sbuf([p, f], x.dtype());
    dma_copy(&t, x);
    let tp = psum([f, p], x.dtype());
    nc_transpose(&tp, &t);
    let back = sbuf([f, p], x.dtype());
    tensor_copy(&back, &tp);
    dma_copy(&out, &back);
    out
}

#[test]
fn nc_transpose_is_exact_in_every_dtype() {
    use nki_core::testing::{HostArray, run_kernel};
    for dtype in [DType::F32, DType::BF16] {
        let (p, f) = (100, 70);
        let x = HostArray::new(&[p, f], dtype, (0..p * f).map(|i| (i as f32 * 0.37).sin()));
        let y = run_kernel(
            &TRANSPOSE_TILE_KERNEL,
            std::slice::from_ref(&x),
            &[],
            Target::Trn2,
        )
        .unwrap();
        assert_eq!(y[0].shape, vec![f, p]);
        for i in 0..p {
            for j in 0..f {
                assert_eq!(
                    y[0].values[j * p + i],
                    x.values[i * f + j],
                    "{dtype} [{i}, {j}]"
                );
            }
        }
    }
}

/// Gathers `x[idx[i]]`-style class indices: declares that `idx` holds indices in `[0, 10)` or
/// `-100`, and copies it through.
#[nki_core::kernel(shape(idx = [N]) -> [N], dtype(idx in {i32}) -> idx)]
pub fn checked_index(idx: &Hbm) -> Hbm {
    idx.require_indices(0..10, Some(-100));
    let n = idx.dim(0);
    let out = shared_hbm(&[n], idx.dtype());
    let t = sbuf([1, n], idx.dtype());
    dma_copy(&t, idx.reshape(&[1, n]));
    dma_copy(out.reshape(&[1, n]), &t);
    out
}

#[test]
fn declared_index_domains_are_checked_on_the_data() {
    use nki_core::testing::{HostArray, run_kernel};
    let ok = HostArray::new(&[4], DType::I32, [0.0, 9.0, -100.0, 3.0]);
    let out = run_kernel(&CHECKED_INDEX_KERNEL, &[ok], &[], Target::Trn2).unwrap();
    assert_eq!(out[0].values, [0.0, 9.0, -100.0, 3.0]);
    for (bad, at) in [(10.0, 1), (-1.0, 3)] {
        let mut values = [0.0, 1.0, 2.0, 3.0];
        values[at] = bad;
        let idx = HostArray::new(&[4], DType::I32, values);
        let err = run_kernel(&CHECKED_INDEX_KERNEL, &[idx], &[], Target::Trn2).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "neuron::checked_index: idx[{at}] = {bad} is out of range: the kernel takes indices in [0, 10) or -100"
            )
        );
    }
}

#[test]
fn tiles_are_released_after_their_last_use_in_the_block_that_allocates_them() {
    // The accumulator lives across the loop and is released after the store that follows it;
    // the loop's row tile is released inside the body, after the add that reads it last.
    let p = row_sum_program();
    let plan = nki_core::sim::ExecPlan::new(&p);
    let allocs = |body: &[nki_core::ir::Stmt]| -> Vec<nki_core::ir::TileId> {
        body.iter()
            .filter_map(|s| match s {
                nki_core::ir::Stmt::Alloc { tile } => Some(*tile),
                _ => None,
            })
            .collect()
    };
    let loop_body = p
        .body
        .iter()
        .find_map(|s| match s {
            nki_core::ir::Stmt::Loop { body, .. } => Some(body.as_slice()),
            _ => None,
        })
        .expect("the program has a loop");
    assert_eq!(plan.loop_block(), [1]);
    let (acc, row) = (allocs(&p.body)[0], allocs(loop_body)[0]);
    let last = |body: &[nki_core::ir::Stmt]| body.len() - 1;
    assert_eq!(plan.release()[0][last(&p.body)], vec![acc]);
    assert_eq!(plan.release()[1][last(loop_body)], vec![row]);
    let released: usize = plan.release().iter().flatten().map(Vec::len).sum();
    assert_eq!(
        released,
        2,
        "each tile is released once: {:?}",
        plan.release()
    );
    assert_eq!(
        run(&p, &[(&ROW_SUM_INPUT, DType::F32)], true).unwrap(),
        ROW_SUMS
    );
}

/// Loads that fill a whole fp32 tile read the input in place; such a tile is copied before it
/// is written (here in place, in a parallel loop's iterations), so results are those of a copy
/// and the input is untouched. A load into part of a tile copies as before.
#[test]
fn whole_tile_loads_read_inputs_in_place_until_written() {
    let (rows, cols) = (5, 8);
    let p = trace(
        "alias",
        Target::Trn2,
        &[input("x", &[rows, cols], DType::F32)],
        |h| {
            let out = shared_hbm(&[rows, cols], DType::F32);
            for_each_tile(cols, 4, |ct| {
                let piece = |t: &Tile| dma_copy(t, h[0].cols(ct.start.clone(), ct.size));
                let (t, u) = (
                    sbuf([rows, ct.size], DType::F32),
                    sbuf([rows, ct.size], DType::F32),
                );
                piece(&t);
                piece(&u);
                // t ← 2t in place, then t ← t + u: 3x, while u still reads the input.
                tensor_scalar(&t, &t, BinOp::Multiply, 2.0);
                tensor_tensor(&t, &t, &u, BinOp::Add);
                // + x through a partial load, + x rounded to bf16 from u: 4x + round(x).
                let wide = sbuf([rows, ct.size + 1], DType::F32);
                memset(&wide, 0.0);
                dma_copy(wide.cols(0, ct.size), h[0].cols(ct.start.clone(), ct.size));
                let half = sbuf([rows, ct.size], DType::BF16);
                tensor_copy(&half, &u);
                tensor_tensor(&t, &t, wide.cols(0, ct.size), BinOp::Add);
                tensor_tensor(&t, &t, &half, BinOp::Add);
                dma_copy(out.rows(0, rows).cols(ct.start.clone(), ct.size), &t);
            });
            vec![out]
        },
    )
    .unwrap();
    assert!(
        nki_core::sim::parallel_loops(&p).iter().any(|&par| par),
        "the column loop runs in parallel"
    );
    let x: Vec<f32> = (0..rows * cols).map(|i| 1.0 + i as f32 / 3.0).collect();
    let want: Vec<f32> = x
        .iter()
        .map(|&v| 4.0 * v + half::bf16::from_f32(v).to_f32())
        .collect();
    let before = bytes(&x, DType::F32);
    for parallel in [true, false] {
        assert_eq!(run(&p, &[(&x, DType::F32)], parallel).unwrap(), want);
    }
    assert_eq!(bytes(&x, DType::F32), before);
}
