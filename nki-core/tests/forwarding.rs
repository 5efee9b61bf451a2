//! Store forwarding (`sim/forward.rs`): an instruction whose destination tile the next statement
//! stores to HBM, as its last use, hands its rows straight to the store. The plan pairs exactly
//! the statements the rules allow, and the outputs are the same bits with forwarding on and off,
//! for every instruction that forwards, tile and tensor dtypes that differ, rows split across
//! threads and a strided store.

use nki_core::ir::{Op, Program, Stmt};
use nki_core::lang::{InputSpec, trace};
use nki_core::prelude::*;
use nki_core::sim::{ExecPlan, SimOptions, simulate_to_vecs};

/// The instructions that write every element of their destination row by row.
#[derive(Clone, Copy, Debug)]
enum Writer {
    TensorTensor,
    TensorScalar,
    Activation,
    TensorCopy,
}

const WRITERS: [Writer; 4] = [
    Writer::TensorTensor,
    Writer::TensorScalar,
    Writer::Activation,
    Writer::TensorCopy,
];

fn input(name: &str, shape: &[usize], dtype: DType) -> InputSpec {
    InputSpec {
        name: name.into(),
        shape: shape.to_vec(),
        dtype,
    }
}

/// `[rows, 2 · cols]` from two `[rows, cols]` inputs: each row tile's left half is `writer`'s
/// result computed into a `tile`-dtype tile and stored straight after (a store with a row
/// stride of `2 · cols`), the right half a copy of `x` stored later.
fn program(writer: Writer, rows: usize, cols: usize, tile: DType, out: DType) -> Program {
    trace(
        "forwarding",
        Target::Trn2,
        &[
            input("x", &[rows, cols], DType::F32),
            input("y", &[rows, cols], DType::BF16),
        ],
        |h| {
            let o = shared_hbm(&[rows, 2 * cols], out);
            let (xv, yv) = (h[0].reshape(&[rows, cols]), h[1].reshape(&[rows, cols]));
            let ov = o.reshape(&[rows, 2 * cols]);
            for_each_tile(rows, 128, |r| {
                let x = sbuf([r.size, cols], DType::F32);
                let y = sbuf([r.size, cols], DType::F32);
                dma_copy(&x, xv.clone().rows(r.start.clone(), r.size));
                dma_copy(&y, yv.clone().rows(r.start.clone(), r.size));
                let t = sbuf([r.size, cols], tile);
                match writer {
                    Writer::TensorTensor => {
                        tensor_tensor(&t, &x, &y, BinOp::Multiply);
                    }
                    Writer::TensorScalar => {
                        tensor_scalar(&t, &x, BinOp::Add, 0.375).then(BinOp::Multiply, 3.0);
                    }
                    Writer::Activation => activation(&t, ActFn::Silu, &x, None, 1.5),
                    Writer::TensorCopy => tensor_copy(&t, &x),
                }
                dma_copy(ov.clone().rows(r.start.clone(), r.size).cols(0, cols), &t);
                dma_copy(
                    ov.clone().rows(r.start.clone(), r.size).cols(cols, cols),
                    &x,
                );
            });
            vec![o]
        },
    )
    .unwrap()
}

fn values(n: usize, seed: usize, dtype: DType) -> Vec<u8> {
    let mut bytes = vec![0u8; n * dtype.size_bytes()];
    for i in 0..n {
        let v = ((i * 37 + seed) % 1009) as f32 / 97.0 - 5.123_456_7;
        dtype.write(&mut bytes, i, v);
    }
    bytes
}

fn run(p: &Program, forward_stores: bool, parallel: bool) -> Vec<Vec<u8>> {
    let [rows, cols] = [p.hbm[0].shape[0], p.hbm[0].shape[1]];
    let (x, y) = (
        values(rows * cols, 1, DType::F32),
        values(rows * cols, 2, DType::BF16),
    );
    let opts = SimOptions {
        forward_stores,
        parallel,
        ..SimOptions::default()
    };
    simulate_to_vecs(p, &[&x, &y], opts).unwrap()
}

/// The statements the plan pairs, as (instruction name, next instruction name).
fn pairs(p: &Program) -> Vec<(&'static str, &'static str)> {
    fn walk(body: &[Stmt], forward: &[Vec<bool>], block: &mut usize, out: &mut Vec<(&str, &str)>) {
        let id = *block;
        for (i, s) in body.iter().enumerate() {
            if forward[id][i] {
                let (Stmt::Inst(a), Stmt::Inst(b)) = (s, &body[i + 1]) else {
                    panic!("a pair of statements that are not instructions");
                };
                out.push((a.op.name(), b.op.name()));
            }
            if let Stmt::Loop { body, .. } | Stmt::DeviceLoop { body, .. } = s {
                *block += 1;
                walk(body, forward, block, out);
            }
        }
    }
    let plan = ExecPlan::new(p);
    let mut out = Vec::new();
    walk(&p.body, plan.forward(), &mut 0, &mut out);
    out
}

#[test]
fn each_writer_forwards_with_the_same_bits() {
    // 300 rows: two full row tiles and a ragged one; 300 columns of 128 rows exceed the size
    // at which rows split across threads.
    for writer in WRITERS {
        for (tile, out) in [
            (DType::F32, DType::F32),
            (DType::F32, DType::BF16),
            (DType::BF16, DType::F32),
            (DType::BF16, DType::F16),
        ] {
            let p = program(writer, 300, 300, tile, out);
            let name = format!("{writer:?} into {tile:?}, stored as {out:?}");
            assert!(
                !pairs(&p).is_empty(),
                "{name}: the plan pairs the instruction with its store"
            );
            let unforwarded = run(&p, false, false);
            for parallel in [false, true] {
                assert!(
                    run(&p, true, parallel) == unforwarded,
                    "{name} (parallel {parallel}): forwarding changed the output"
                );
            }
            // Banded runs forward the pairs inside a run band by band (a pair never splits a
            // run).
            for partitions in [7, 32] {
                let opts = SimOptions {
                    bands: nki_core::sim::BandPolicy::everywhere(partitions),
                    ..SimOptions::default()
                };
                let [rows, cols] = [300, 300];
                let (x, y) = (
                    values(rows * cols, 1, DType::F32),
                    values(rows * cols, 2, DType::BF16),
                );
                assert!(
                    simulate_to_vecs(&p, &[&x, &y], opts).unwrap() == unforwarded,
                    "{name}: bands of {partitions} with forwarding changed the output"
                );
            }
        }
    }
}

#[test]
fn only_a_store_that_is_the_tiles_last_use_is_paired() {
    // Stored, then read again: the tile must hold the result.
    let read_after = trace(
        "read_after",
        Target::Trn2,
        &[input("x", &[8, 16], DType::F32)],
        |h| {
            let (a, b) = (
                shared_hbm(&[8, 16], DType::F32),
                shared_hbm(&[8, 16], DType::F32),
            );
            let x = sbuf([8, 16], DType::F32);
            dma_copy(&x, &h[0]);
            let t = sbuf([8, 16], DType::F32);
            tensor_scalar(&t, &x, BinOp::Multiply, 2.0);
            dma_copy(&a, &t);
            let u = sbuf([8, 16], DType::F32);
            tensor_scalar(&u, &t, BinOp::Add, 1.0);
            dma_copy(&b, &u);
            vec![a, b]
        },
    )
    .unwrap();
    assert_eq!(pairs(&read_after), vec![("tensor_scalar", "dma_copy")]);

    // Reads its own tile on other partitions than it writes: rows computed in order see the
    // rows written before them, so the tile must be written.
    let shifted = trace(
        "shifted",
        Target::Trn2,
        &[input("x", &[8, 16], DType::F32)],
        |h| {
            let o = shared_hbm(&[4, 16], DType::F32);
            let t = sbuf([8, 16], DType::F32);
            dma_copy(&t, &h[0]);
            let (top, bottom) = (t.region().slice(0, 4, 0, 16), t.region().slice(4, 4, 0, 16));
            tensor_scalar(top.clone(), bottom, BinOp::Add, 1.0);
            dma_copy(&o, top);
            vec![o]
        },
    )
    .unwrap();
    assert_eq!(pairs(&shifted), vec![]);

    // A store of part of what the instruction wrote.
    let part = trace(
        "part",
        Target::Trn2,
        &[input("x", &[8, 16], DType::F32)],
        |h| {
            let o = shared_hbm(&[4, 16], DType::F32);
            let (x, t) = (sbuf([8, 16], DType::F32), sbuf([8, 16], DType::F32));
            dma_copy(&x, &h[0]);
            tensor_copy(&t, &x);
            dma_copy(&o, t.region().slice(0, 4, 0, 16));
            vec![o]
        },
    )
    .unwrap();
    assert_eq!(pairs(&part), vec![]);
    for p in [&read_after, &shifted, &part] {
        let x = values(8 * 16, 3, DType::F32);
        let opts = |forward_stores| SimOptions {
            forward_stores,
            ..SimOptions::default()
        };
        assert_eq!(
            simulate_to_vecs(p, &[&x], opts(true)).unwrap(),
            simulate_to_vecs(p, &[&x], opts(false)).unwrap(),
            "{}",
            p.name
        );
    }
}

/// The HBM side of the first store that follows an instruction writing the region it stores.
fn paired_store(body: &mut [Stmt]) -> Option<&mut nki_core::ir::HbmAccess> {
    use nki_core::ir::DmaOperand;
    let at = (1..body.len()).find(|&i| match (&body[i - 1], &body[i]) {
        (Stmt::Inst(w), Stmt::Inst(s)) => match &s.op {
            Op::DmaCopy {
                dst: DmaOperand::Hbm { .. },
                src: DmaOperand::Tile { region },
                ..
            } => w.op.tile_writes().contains(&region),
            _ => false,
        },
        _ => false,
    });
    match at {
        Some(i) => match &mut body[i] {
            Stmt::Inst(s) => match &mut s.op {
                Op::DmaCopy {
                    dst: DmaOperand::Hbm { access },
                    ..
                } => Some(access),
                _ => None,
            },
            _ => None,
        },
        None => body.iter_mut().find_map(|s| match s {
            Stmt::Loop { body, .. } => paired_store(body),
            _ => None,
        }),
    }
}

#[test]
fn a_failing_store_fails_as_it_does_unforwarded() {
    // The store writes past the end of its tensor: the pair runs as written and the store
    // reports the access.
    let mut p = program(Writer::TensorTensor, 8, 16, DType::F32, DType::F32);
    paired_store(&mut p.body).expect("a paired store").p_stride = 64;
    assert_eq!(pairs(&p).len(), 1, "still paired by the plan");
    let x = values(8 * 16, 1, DType::F32);
    let y = values(8 * 16, 2, DType::BF16);
    let message = |forward_stores| {
        let opts = SimOptions {
            forward_stores,
            ..SimOptions::default()
        };
        simulate_to_vecs(&p, &[&x, &y], opts)
            .unwrap_err()
            .to_string()
    };
    let unforwarded = message(false);
    assert!(unforwarded.contains("out-of-bounds"), "{unforwarded}");
    assert_eq!(message(true), unforwarded);
}

/// `out = xᵀ` for `x: [rows, cols]` (both ≤ 128): transposed on the tensor engine into a PSUM
/// tile of `psum_dtype`, copied into an SBUF tile of `held_dtype`, stored.
fn transposed(rows: usize, cols: usize, psum_dtype: DType, held_dtype: DType) -> Program {
    trace(
        "transposed",
        Target::Trn2,
        &[input("x", &[rows, cols], DType::F32)],
        |h| {
            let out = shared_hbm(&[cols, rows], DType::F32);
            let x = sbuf([rows, cols], DType::F32);
            dma_copy(&x, &h[0]);
            // Allocated first, as kernels hold transposed tiles: the copy follows the transpose.
            let held = sbuf([cols, rows], held_dtype);
            let t = psum([cols, rows], psum_dtype);
            nc_transpose(&t, &x);
            tensor_copy(&held, &t);
            dma_copy(&out, &held);
            vec![out]
        },
    )
    .unwrap()
}

#[test]
fn a_transpose_goes_straight_into_its_copy() {
    let (rows, cols) = (100, 70);
    let x = values(rows * cols, 5, DType::F32);
    let opts = |forward_stores| SimOptions {
        forward_stores,
        ..SimOptions::default()
    };
    for (psum_dtype, held_dtype, paired) in [
        (DType::F32, DType::F32, true),
        (DType::BF16, DType::BF16, true),
        // The copy rounds: it must run.
        (DType::F32, DType::BF16, false),
    ] {
        let p = transposed(rows, cols, psum_dtype, held_dtype);
        // Unpaired, the copy's store is forwarded instead.
        let want = if paired {
            vec![("nc_transpose", "tensor_copy")]
        } else {
            vec![("tensor_copy", "dma_copy")]
        };
        assert_eq!(pairs(&p), want, "{psum_dtype:?} into {held_dtype:?}");
        let forwarded = simulate_to_vecs(&p, &[&x], opts(true)).unwrap();
        assert_eq!(
            forwarded,
            simulate_to_vecs(&p, &[&x], opts(false)).unwrap(),
            "{psum_dtype:?} into {held_dtype:?}"
        );
        // And it is the transpose, rounded to the tiles' dtype.
        let got: Vec<f32> = forwarded[0]
            .chunks(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        let xs: Vec<f32> = x
            .chunks(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        for (k, g) in got.iter().enumerate() {
            let (c, r) = (k / rows, k % rows);
            let v = held_dtype.round(psum_dtype.round(xs[r * cols + c]));
            assert_eq!(
                *g, v,
                "{psum_dtype:?} into {held_dtype:?}: element ({c}, {r})"
            );
        }
    }
}
