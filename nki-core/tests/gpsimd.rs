//! GpSimd's `sequence_bounds` (each element's run of equal segment ids, id 0 padding), against
//! the docs' reference algorithm and example; `nonzero_with_count` (the indices of the nonzero
//! elements of partitions 0, 16, ..., 112, padded, then their count), against a loop, the other
//! partitions untouched; `topk` (the largest values of 16-partition snakes, ascending, as a
//! snake), against a sort, with ties and NaN. Their trace checks, dtype, size, PSUM and target
//! rules, cost and codegen; banded runs leave `nonzero_with_count` and `topk` whole.

mod common;

use common::{run, values};
use nki_core::NkiError;
use nki_core::codegen::emit_nki;
use nki_core::cost::{Engine, estimate};
use nki_core::ir::Program;
use nki_core::lang::{InputSpec, trace};
use nki_core::prelude::*;
use nki_core::validate::validate;

fn spec(shape: [usize; 2], dtype: DType) -> Vec<InputSpec> {
    vec![InputSpec {
        name: "x".into(),
        shape: shape.to_vec(),
        dtype,
    }]
}

fn rule_of(p: &Program) -> (String, String) {
    match validate(p).unwrap_err() {
        NkiError::Validation(v) => (v.rule.to_string(), v.message),
        e => panic!("{e}"),
    }
}

/// The trace error of a kernel body (on `target`, no inputs or outputs).
fn trace_err(body: impl Fn()) -> String {
    trace("k", Target::Trn2, &[], |_| {
        body();
        vec![]
    })
    .map(|_| ())
    .unwrap_err()
    .to_string()
}

/// `sequence_bounds` of the `(1, n)` ids (input, `dtype`) into a `(1, 2, n)` tile (output).
fn bounds_program(n: usize, dtype: DType, out_dtype: DType) -> Program {
    trace("k", Target::Trn2, &spec([1, n], dtype), move |h| {
        let out = shared_hbm(&[1, 2 * n], out_dtype);
        let ids = sbuf([1, n], dtype);
        dma_copy(&ids, &h[0]);
        let dst = sbuf([1, 2, n], out_dtype);
        sequence_bounds(&dst, &ids);
        dma_copy(&out, &dst);
        vec![out]
    })
    .unwrap()
}

/// The docs' reference: starts forward, ends (exclusive) backward, id 0 padding (n and −1).
fn bounds_reference(ids: &[f32]) -> Vec<f32> {
    let n = ids.len();
    let (mut lo, mut hi) = (vec![0.0; n], vec![0.0; n]);
    for i in 0..n {
        lo[i] = match i {
            _ if ids[i] == 0.0 => n as f32,
            0 => 0.0,
            _ if ids[i] == ids[i - 1] => lo[i - 1],
            _ => i as f32,
        };
    }
    for i in (0..n).rev() {
        hi[i] = match i {
            _ if ids[i] == 0.0 => -1.0,
            _ if i == n - 1 => n as f32,
            _ if ids[i] == ids[i + 1] => hi[i + 1],
            _ => (i + 1) as f32,
        };
    }
    lo.extend(hi);
    lo
}

#[test]
fn sequence_bounds_gives_each_elements_segment() {
    // The docs' example.
    let ids = [0.0, 1.0, 1.0, 2.0, 2.0, 2.0, 0.0, 3.0, 3.0];
    let p = bounds_program(9, DType::I32, DType::I32);
    validate(&p).unwrap();
    let want = [
        9.0, 1.0, 1.0, 3.0, 3.0, 3.0, 9.0, 7.0, 7.0, //
        -1.0, 3.0, 3.0, 6.0, 6.0, 6.0, -1.0, 9.0, 9.0,
    ];
    assert_eq!(run(&p, &[&ids])[0], want);
    // Sorted random ids (as the docs' test draws them), and runs of one id split by another.
    for n in [1, 32, 500] {
        let mut ids: Vec<f32> = values(n, 4, 20.0)
            .iter()
            .map(|v| (v + 10.0).floor().max(0.0))
            .collect();
        ids.sort_by(f32::total_cmp);
        for dtype in [DType::F32, DType::I32] {
            let p = bounds_program(n, dtype, dtype);
            assert_eq!(run(&p, &[&ids])[0], bounds_reference(&ids), "{n} {dtype}");
        }
    }
    let ids = [5.0, 5.0, 2.0, 5.0, 0.0, 0.0, 7.0];
    let p = bounds_program(7, DType::F32, DType::F32);
    assert_eq!(run(&p, &[&ids])[0], bounds_reference(&ids));
}

#[test]
fn sequence_bounds_checks_its_shape_partitions_dtypes_and_buffer() {
    let e = trace_err(|| {
        let ids = sbuf([1, 8], DType::F32);
        let dst = sbuf([1, 8], DType::F32);
        sequence_bounds(&dst, &ids);
    });
    assert!(
        e.contains(
            "sequence_bounds: dst must have shape [1, 16] (a start and an end for each segment \
             id), got shape [1, 8]"
        ),
        "{e}"
    );
    let (r, m) = rule_of(&bounds_program(8, DType::BF16, DType::F32));
    assert_eq!(r, "sequence-bounds-dtype");
    assert!(
        m.contains("sequence_bounds: segment_ids t0 must be float32 or int32, got bf16"),
        "{m}"
    );
    let (r, m) = rule_of(&bounds_program(8, DType::F32, DType::I16));
    assert_eq!(r, "sequence-bounds-dtype");
    assert!(
        m.contains("dst t1 must be float32 or int32, got i16"),
        "{m}"
    );
    let p = |np: usize, psum_ids: bool| {
        trace("k", Target::Trn2, &[], move |_| {
            let out = shared_hbm(&[np, 16], DType::F32);
            let ids = if psum_ids {
                psum([np, 8], DType::F32)
            } else {
                sbuf([np, 8], DType::F32)
            };
            memset(&ids, 1.0);
            let dst = sbuf([np, 16], DType::F32);
            sequence_bounds(&dst, &ids);
            dma_copy(&out, &dst);
            vec![out]
        })
        .unwrap()
    };
    let (r, m) = rule_of(&p(2, false));
    assert_eq!(r, "sequence-bounds-partitions");
    assert!(
        m.contains("sequence_bounds: segment_ids must be one partition, (1, N), got 2 partitions"),
        "{m}"
    );
    let (r, m) = rule_of(&p(1, true));
    assert_eq!(r, "gpsimd-psum");
    assert!(m.contains("sequence_bounds runs on GpSimd"), "{m}");
}

/// `nonzero_with_count` of `x` `[rows, cols]` (input, `dtype`) into a `[rows, cols + 1]` int32
/// tile first set to 99 (output), on `target`.
fn nonzero_program(
    (rows, cols): (usize, usize),
    dtype: DType,
    (offset, padding): (i32, i32),
    target: Target,
) -> Program {
    trace("k", target, &spec([rows, cols], dtype), move |h| {
        let out = shared_hbm(&[rows, cols + 1], DType::I32);
        let x = sbuf([rows, cols], dtype);
        dma_copy(&x, &h[0]);
        let dst = sbuf([rows, cols + 1], DType::I32);
        memset(&dst, 99.0);
        nonzero_with_count(&dst, &x, offset, padding);
        dma_copy(&out, &dst);
        vec![out]
    })
    .unwrap()
}

#[test]
fn nonzero_with_count_fills_the_first_partition_of_each_core() {
    // The docs' example row, in partition 0.
    let p = nonzero_program((1, 8), DType::F32, (16, -1), Target::Trn2);
    validate(&p).unwrap();
    let x = [0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 0.0, 0.0];
    assert_eq!(
        run(&p, &[&x])[0],
        [17.0, 18.0, 21.0, -1.0, -1.0, -1.0, -1.0, -1.0, 3.0]
    );
    let (rows, cols) = (128, 40);
    for dtype in [DType::F32, DType::I32] {
        let x: Vec<f32> = values(rows * cols, 6, 4.0)
            .iter()
            .map(|v| if v.abs() < 1.0 { 0.0 } else { v.round() })
            .collect();
        let p = nonzero_program((rows, cols), dtype, (-5, 7), Target::Trn3);
        let got = run(&p, &[&x]).remove(0);
        for r in 0..rows {
            let row = &got[r * (cols + 1)..(r + 1) * (cols + 1)];
            if r % 16 != 0 {
                assert!(row.iter().all(|&v| v == 99.0), "row {r}: {row:?}");
                continue;
            }
            let mut want: Vec<f32> = (0..cols)
                .filter(|&c| x[r * cols + c] != 0.0)
                .map(|c| c as f32 - 5.0)
                .collect();
            let count = want.len() as f32;
            want.resize(cols, 7.0);
            want.push(count);
            assert_eq!(row, want.as_slice(), "row {r} {dtype}");
        }
    }
}

#[test]
fn nonzero_with_count_checks_its_shape_dtypes_and_target() {
    let e = trace_err(|| {
        let x = sbuf([16, 8], DType::F32);
        let dst = sbuf([16, 8], DType::I32);
        nonzero_with_count(&dst, &x, 0, -1);
    });
    assert!(
        e.contains(
            "nonzero_with_count: dst must have shape [16, 9] (src's partitions, one more element \
             for the count), got shape [16, 8]"
        ),
        "{e}"
    );
    let (r, m) = rule_of(&nonzero_program(
        (16, 8),
        DType::BF16,
        (0, -1),
        Target::Trn2,
    ));
    assert_eq!(r, "nonzero-dtype");
    assert!(
        m.contains("nonzero_with_count: src t0 must be float32 or int32, got bf16"),
        "{m}"
    );
    let (r, m) = rule_of(&nonzero_program((16, 8), DType::F32, (0, -1), Target::Trn1));
    assert_eq!(r, "isa-target");
    assert!(m.contains("nonzero_with_count needs NeuronCore-v3"), "{m}");
    let p = trace("k", Target::Trn2, &[], |_| {
        let out = shared_hbm(&[16, 9], DType::F32);
        let x = sbuf([16, 8], DType::F32);
        memset(&x, 1.0);
        let dst = sbuf([16, 9], DType::F32);
        nonzero_with_count(&dst, &x, 0, -1);
        dma_copy(&out, &dst);
        vec![out]
    })
    .unwrap();
    let (r, m) = rule_of(&p);
    assert_eq!(r, "nonzero-dtype");
    assert!(m.contains("dst t1 must be int32, got f32"), "{m}");
}

/// `topk` of `x` `[rows, cols]` (input, bf16) with `n` and `k` into `val_dst` / `idx_dst` first
/// set to −5 / 77 (outputs 0 and 1, bf16 and uint32).
fn topk_program((rows, cols): (usize, usize), n: usize, k: usize, src_dt: DType) -> Program {
    trace("k", Target::Trn2, &spec([rows, cols], src_dt), move |h| {
        let vals = shared_hbm(&[rows, k], DType::BF16);
        let idxs = shared_hbm(&[rows, k], DType::U32);
        let x = sbuf([rows, cols], src_dt);
        dma_copy(&x, &h[0]);
        let v = sbuf([rows, k], DType::BF16);
        memset(&v, -5.0);
        let i = sbuf([rows, k], DType::U32);
        memset(&i, 77.0);
        topk(&v, &i, &x, n);
        dma_copy(&vals, &v);
        dma_copy(&idxs, &i);
        vec![vals, idxs]
    })
    .unwrap()
}

/// The reference: every group's snake sorted, the `k` largest (lower index first among equal
/// values, NaN largest) written ascending as a snake over a `[rows, k]` tile of −5 / 77.
fn topk_reference(x: &[f32], (rows, cols): (usize, usize), n: usize, k: usize) -> [Vec<f32>; 2] {
    let (mut vals, mut idxs) = (vec![-5.0; rows * k], vec![77.0; rows * k]);
    let key = |v: f32| if v.is_nan() { f32::INFINITY } else { v };
    for g in 0..rows / 16 {
        let mut snake: Vec<(f32, usize)> = (0..n)
            .map(|e| (x[(16 * g + e % 16) * cols + e / 16], e))
            .collect();
        // Descending, NaN first, equal values by index.
        snake.sort_by(|a, b| {
            let nan = b.0.is_nan().cmp(&a.0.is_nan());
            nan.then(key(b.0).total_cmp(&key(a.0))).then(a.1.cmp(&b.1))
        });
        snake.truncate(k);
        snake.sort_by(|a, b| {
            let nan = a.0.is_nan().cmp(&b.0.is_nan());
            nan.then(key(a.0).total_cmp(&key(b.0))).then(a.1.cmp(&b.1))
        });
        for (j, (v, e)) in snake.into_iter().enumerate() {
            let at = (16 * g + j % 16) * k + j / 16;
            vals[at] = v;
            idxs[at] = e as f32;
        }
    }
    [vals, idxs]
}

fn same_bits(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()))
}

#[test]
fn topk_selects_the_largest_of_each_snake_in_ascending_order() {
    // (shape, n, k): a snake shorter than its columns, K spanning several columns, K = n.
    for ((rows, cols), n, k) in [
        ((16, 3), 42, 8),
        ((128, 40), 640, 37),
        ((32, 2), 20, 20),
        ((16, 1), 8, 1),
    ] {
        let x: Vec<f32> = values(rows * cols, n as u64, 50.0)
            .iter()
            .map(|v| DType::BF16.round(*v))
            .collect();
        let p = topk_program((rows, cols), n, k, DType::BF16);
        validate(&p).unwrap();
        let got = run(&p, &[&x]);
        let want = topk_reference(&x, (rows, cols), n, k);
        assert_eq!(got[0], want[0], "{rows}x{cols} n={n} k={k}");
        assert_eq!(got[1], want[1], "{rows}x{cols} n={n} k={k}");
    }
    // Ties (few distinct values: the lower indices win at the K-th value), -0.0 equal to 0.0,
    // and a NaN ranked above everything.
    let (rows, cols) = (16, 4);
    let mut x: Vec<f32> = (0..rows * cols).map(|i| (i % 3) as f32 - 1.0).collect();
    x[5] = -0.0;
    x[17] = f32::NAN;
    let p = topk_program((rows, cols), 60, 25, DType::BF16);
    let got = run(&p, &[&x]);
    let want = topk_reference(&x, (rows, cols), 60, 25);
    assert!(same_bits(&got[0], &want[0]), "{:?}\n{:?}", got[0], want[0]);
    assert_eq!(got[1], want[1]);
    // The NaN is the last (largest) result, at snake position 24: partition 8, column 1.
    assert!(got[0][8 * 25 + 1].is_nan());
    assert_eq!(got[1][8 * 25 + 1], snake_index(17, cols) as f32);
}

/// The snake index of element `i` of a row-major `[16, cols]` tile.
fn snake_index(i: usize, cols: usize) -> usize {
    (i % cols) * 16 + i / cols
}

#[test]
fn topk_checks_its_limits_dtypes_and_buffers() {
    let rule = |p: Program| rule_of(&p);
    let cases = [
        (
            topk_program((16, 3), 7, 4, DType::BF16),
            "topk-limits",
            "topk: n is 7",
        ),
        (
            topk_program((16, 3), 40, 41, DType::BF16),
            "topk-limits",
            "topk: K (val_dst's free size) is 41, more than n = 40",
        ),
        (
            topk_program((16, 2), 40, 8, DType::BF16),
            "topk-limits",
            "topk: src has 2 elements per partition; a snake of n = 40 needs 3",
        ),
        (
            topk_program((24, 3), 40, 8, DType::BF16),
            "topk-limits",
            "topk: src has 24 partitions; each snake is 16 partitions",
        ),
        (
            topk_program((16, 3), 40, 8, DType::F32),
            "topk-dtype",
            "topk: src t0 must be bfloat16, got f32",
        ),
    ];
    for (p, r, message) in cases {
        let (got, m) = rule(p);
        assert_eq!(got, r, "{m}");
        assert!(m.contains(message), "{m}");
    }
    let with = |idx_dt: DType, psum_vals: bool| {
        trace("k", Target::Trn2, &[], move |_| {
            let out = shared_hbm(&[16, 8], DType::F32);
            let x = sbuf([16, 4], DType::BF16);
            memset(&x, 1.0);
            let v = if psum_vals {
                psum([16, 8], DType::BF16)
            } else {
                sbuf([16, 8], DType::BF16)
            };
            let i = sbuf([16, 8], idx_dt);
            topk(&v, &i, &x, 64);
            dma_copy(&out, &i);
            vec![out]
        })
        .unwrap()
    };
    let (r, m) = rule(with(DType::I32, false));
    assert_eq!(r, "topk-dtype");
    assert!(
        m.contains("topk: idx_dst t2 must be uint32, got i32"),
        "{m}"
    );
    let (r, m) = rule(with(DType::U32, true));
    assert_eq!(r, "gpsimd-psum");
    assert!(
        m.contains("topk runs on GpSimd, which cannot access PSUM; use SBUF tiles (val_dst t1)"),
        "{m}"
    );
    let e = trace_err(|| {
        let x = sbuf([16, 4], DType::BF16);
        let v = sbuf([16, 8], DType::BF16);
        let i = sbuf([16, 4], DType::U32);
        topk(&v, &i, &x, 64);
    });
    assert!(
        e.contains("topk: idx_dst must have shape [16, 8] (val_dst's shape), got shape [16, 4]"),
        "{e}"
    );
}

#[test]
fn they_run_on_gpsimd_and_emit_their_nki_calls() {
    let t = topk_program((16, 3), 42, 8, DType::BF16);
    let report = estimate(&t);
    let s = report.slices.iter().find(|s| s.name == "topk").unwrap();
    assert_eq!(s.engine, Engine::GpSimd);
    // NKI's estimate, 4·n + K cycles, at Trn2's 1.2 GHz GpSimd clock, plus the 100-cycle static
    // overhead of reading what the previous GpSimd instruction wrote.
    let want = (4.0 * 42.0 + 8.0 + 100.0) / 1.2;
    assert!((s.end_ns - s.start_ns - want).abs() < 1e-6, "{s:?}");
    let source = emit_nki(&t);
    assert!(
        source.contains("nisa.topk(val_dst=t1, idx_dst=t2, src=t0, n=42)"),
        "{source}"
    );
    let nz = nonzero_program((16, 8), DType::F32, (3, -2), Target::Trn2);
    let report = estimate(&nz);
    let s = report
        .slices
        .iter()
        .find(|s| s.name == "nonzero_with_count")
        .unwrap();
    assert_eq!(s.engine, Engine::GpSimd);
    let source = emit_nki(&nz);
    assert!(
        source.contains("nisa.nonzero_with_count(dst=t1, src=t0, index_offset=3, padding_val=-2)"),
        "{source}"
    );
    let b = bounds_program(8, DType::F32, DType::F32);
    let report = estimate(&b);
    let s = report
        .slices
        .iter()
        .find(|s| s.name == "sequence_bounds")
        .unwrap();
    assert_eq!(s.engine, Engine::GpSimd);
    let source = emit_nki(&b);
    assert!(
        source.contains("nisa.sequence_bounds(dst=t1, segment_ids=t0)"),
        "{source}"
    );
}

#[test]
fn banded_runs_leave_nonzero_with_count_and_topk_whole() {
    use nki_core::sim::{BandPolicy, SimOptions, simulate_to_vecs};
    let (rows, cols) = (128, 20);
    let p = trace(
        "banded",
        Target::Trn2,
        &spec([rows, cols], DType::F32),
        |h| {
            let counts = shared_hbm(&[rows, cols + 1], DType::I32);
            let top = shared_hbm(&[rows, 24], DType::BF16);
            sequential_range(1, |_| {
                let x = sbuf([rows, cols], DType::F32);
                dma_copy(&x, &h[0]);
                let n = sbuf([rows, cols + 1], DType::I32);
                memset(&n, 0.0);
                nonzero_with_count(&n, &x, 0, -1);
                let b = sbuf([rows, cols], DType::BF16);
                tensor_copy(&b, &x);
                let (v, i) = (sbuf([rows, 24], DType::BF16), sbuf([rows, 24], DType::U32));
                memset(&v, 0.0);
                memset(&i, 0.0);
                topk(&v, &i, &b, 16 * cols);
                dma_copy(&counts, &n);
                dma_copy(&top, &v);
            });
            vec![counts, top]
        },
    )
    .unwrap();
    let x: Vec<u8> = values(rows * cols, 12, 4.0)
        .iter()
        .map(|v| if v.abs() < 1.0 { 0.0 } else { *v })
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
    for partitions in [1, 8, 32] {
        assert!(
            sim(BandPolicy::everywhere(partitions)) == whole,
            "bands of {partitions} partitions"
        );
    }
}
