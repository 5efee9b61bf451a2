//! `iota`, the vector engine's comparison operators and `range_select`: simulated values,
//! validation (targets, buffers, dtypes), trace-time operand checks, the engines the cost model
//! puts them on, and the NKI Python code generation emits for them.

use nki_core::codegen::emit_nki;
use nki_core::cost::{Engine, estimate};
use nki_core::ir::Program;
use nki_core::lang::{InputSpec, trace};
use nki_core::prelude::*;
use nki_core::testing::{HostArray, run_kernel};
use nki_core::validate::validate;
use nki_core::{KernelDef, NkiError, Signature};

/// `(one_hot, masked)`: `one_hot[p, f] = (f == idx[p])` built from an `iota` of the column
/// indices compared with the index column (`tensor_scalar` with `nl.equal`), and
/// `masked = x · one_hot`.
#[nki_core::kernel(
    shape(x = [P, N], idx = [P, 1]) -> (one_hot = [P, N], masked = [P, N]),
    dtype(x in {f32, bf16}, idx in {f32}) -> (f32, x),
    require(P <= 128, N <= 4096),
)]
pub fn one_hot_rows(x: &Hbm, idx: &Hbm) -> (Hbm, Hbm) {
    let (p, n) = (x.dim(0), x.dim(1));
    let one_hot = shared_hbm(&[p, n], DType::F32);
    let masked = shared_hbm(&[p, n], x.dtype());
    let col = sbuf([p, 1], DType::F32);
    dma_copy(&col, idx);
    let cols = sbuf([p, n], DType::F32);
    iota(&cols, 0, 0, 1);
    let hot = sbuf([p, n], DType::F32);
    tensor_scalar(&hot, &cols, BinOp::Equal, &col);
    dma_copy(&one_hot, &hot);
    let xt = sbuf([p, n], x.dtype());
    dma_copy(&xt, x);
    tensor_tensor(&xt, &xt, &hot, BinOp::Multiply);
    dma_copy(&masked, &xt);
    (one_hot, masked)
}

/// `(picked, selected)`: `picked[p] = x[p, idx[p]]` and `selected` is `x` at `idx[p]` and
/// `-inf` elsewhere, from one `range_select` per half of the columns (the second with
/// `range_start` at its first column) keeping `idx ≤ i < idx + 1` and reducing with max, then
/// the maximum of the two halves.
#[nki_core::kernel(
    shape(x = [P, N], idx = [P, 1]) -> (picked = [P, 1], selected = [P, N]),
    dtype(x in {f32, bf16}, idx in {f32}) -> (f32, x),
    require(P <= 128, N <= 4096),
)]
pub fn gather_columns(x: &Hbm, idx: &Hbm) -> (Hbm, Hbm) {
    let (p, n) = (x.dim(0), x.dim(1));
    let picked = shared_hbm(&[p, 1], DType::F32);
    let selected = shared_hbm(&[p, n], x.dtype());
    let lo = sbuf([p, 1], DType::F32);
    dma_copy(&lo, idx);
    let hi = sbuf([p, 1], DType::F32);
    tensor_scalar(&hi, &lo, BinOp::Add, 1.0);
    let xt = sbuf([p, n], x.dtype());
    dma_copy(&xt, x);
    let out = sbuf([p, n], x.dtype());
    let halves = sbuf([p, 2], DType::F32);
    let half = n.div_ceil(2);
    for (k, (c0, cols)) in [(0, half), (half, n - half)].into_iter().enumerate() {
        if cols == 0 {
            memset(halves.region().slice(0, p, k, 1), f32::NEG_INFINITY);
            continue;
        }
        range_select(
            out.region().slice(0, p, c0, cols),
            xt.region().slice(0, p, c0, cols),
            BinOp::GreaterEqual,
            BinOp::Less,
            &lo,
            &hi,
            Some(halves.region().slice(0, p, k, 1)),
            BinOp::Maximum,
            c0 as f32,
            f32::NEG_INFINITY,
        );
    }
    let best = sbuf([p, 1], DType::F32);
    tensor_reduce(&best, BinOp::Maximum, &halves, 1, false);
    dma_copy(&picked, &best);
    dma_copy(&selected, &out);
    (picked, selected)
}

fn program_of(def: &KernelDef, shapes: &[(&[u64], DType)], target: Target) -> Program {
    let sig = Signature::new(shapes, &[], target);
    def.check(&sig).and_then(|c| c.trace()).unwrap()
}

fn ramp(n: usize) -> impl Iterator<Item = f32> {
    (0..n).map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.25)
}

#[test]
fn iota_and_equal_build_a_one_hot_of_each_row_index() {
    let (p, n) = (100, 70);
    for dtype in [DType::F32, DType::BF16] {
        let x = HostArray::new(&[p, n], dtype, ramp(p * n));
        // Indices in range, one past the end (no hot column) and a fraction (none either).
        let idx: Vec<f32> = (0..p)
            .map(|r| match r % 10 {
                7 => n as f32,
                8 => 2.5,
                _ => ((r * 13) % n) as f32,
            })
            .collect();
        let idx = HostArray::new(&[p, 1], DType::F32, idx);
        let out = run_kernel(
            &ONE_HOT_ROWS_KERNEL,
            &[x.clone(), idx.clone()],
            &[],
            Target::Trn2,
        )
        .unwrap();
        let (hot, masked) = (&out[0], &out[1]);
        assert_eq!((hot.dtype, masked.dtype), (DType::F32, dtype));
        for r in 0..p {
            for f in 0..n {
                let want = if f as f32 == idx.values[r] { 1.0 } else { 0.0 };
                assert_eq!(hot.values[r * n + f], want, "{dtype} one_hot[{r}, {f}]");
                assert_eq!(
                    masked.values[r * n + f],
                    x.values[r * n + f] * want,
                    "{dtype} masked[{r}, {f}]"
                );
            }
        }
    }
}

#[test]
fn iota_writes_an_affine_function_of_the_region_indices_in_the_dst_dtype() {
    let p = trace("iota_grid", Target::Trn2, &[], |_| {
        let out_i = shared_hbm(&[4, 6], DType::I32);
        let out_b = shared_hbm(&[3, 5], DType::BF16);
        let t = sbuf([8, 10], DType::I32);
        memset(&t, -1.0);
        // value = 5 - 3·p + 2·f over the region rows 2..6, columns 3..9.
        iota(t.region().slice(2, 4, 3, 6), 5, -3, 2);
        let o = sbuf([4, 6], DType::I32);
        tensor_copy(&o, t.region().slice(2, 4, 3, 6));
        dma_copy(&out_i, &o);
        let b = sbuf([3, 5], DType::BF16);
        // 257 + 1000·p + f: not every value is a bf16 (8 significant bits).
        iota(&b, 257, 1000, 1);
        dma_copy(&out_b, &b);
        vec![out_i, out_b]
    })
    .unwrap();
    validate(&p).unwrap();
    let outs = nki_core::sim::simulate_to_vecs(&p, &[], Default::default()).unwrap();
    let ints: Vec<f32> = (0..24).map(|i| DType::I32.read(&outs[0], i)).collect();
    for r in 0..4 {
        for f in 0..6 {
            assert_eq!(ints[r * 6 + f], (5 - 3 * r as i32 + 2 * f as i32) as f32);
        }
    }
    for r in 0..3 {
        for f in 0..5 {
            let exact = (257 + 1000 * r + f) as f32;
            let got = DType::BF16.read(&outs[1], r * 5 + f);
            assert_eq!(got, half::bf16::from_f32(exact).to_f32(), "[{r}, {f}]");
        }
    }
}

#[test]
fn iota_pattern_walks_several_progressions_as_nested_loops() {
    let p = trace("iota_nested", Target::Trn2, &[], |_| {
        let out = shared_hbm(&[2, 6], DType::I32);
        let t = sbuf([2, 6], DType::I32);
        // Columns in transposed order: f = 2·i + j holds 7 + 10·p + i + 3·j.
        iota_pattern(&t, 7, 10, &[(1, 3), (3, 2)]);
        dma_copy(&out, &t);
        vec![out]
    })
    .unwrap();
    validate(&p).unwrap();
    let outs = nki_core::sim::simulate_to_vecs(&p, &[], Default::default()).unwrap();
    for r in 0..2 {
        for i in 0..3 {
            for j in 0..2 {
                let got = DType::I32.read(&outs[0], r * 6 + 2 * i + j);
                assert_eq!(got, (7 + 10 * r + i + 3 * j) as f32, "[{r}, {i}, {j}]");
            }
        }
    }
    let err = trace("iota_short", Target::Trn2, &[], |_| {
        let out = shared_hbm(&[2, 6], DType::I32);
        let t = sbuf([2, 6], DType::I32);
        iota_pattern(&t, 0, 0, &[(1, 4)]);
        dma_copy(&out, &t);
        vec![out]
    })
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("iota: pattern covers 4 elements per partition but dst has 6"),
        "{err}"
    );
}

#[test]
fn range_select_gathers_one_column_per_row_with_range_start_and_max_reduce() {
    let (p, n) = (128, 300);
    for dtype in [DType::F32, DType::BF16] {
        let x = HostArray::new(&[p, n], dtype, ramp(p * n));
        // Indices in both halves (the second through range_start) and the first/last columns.
        let idx: Vec<f32> = (0..p)
            .map(|r| match r {
                0 => 0.0,
                1 => (n - 1) as f32,
                2 => 150.0,
                _ => ((r * 7919) % n) as f32,
            })
            .collect();
        let idx = HostArray::new(&[p, 1], DType::F32, idx);
        let out = run_kernel(
            &GATHER_COLUMNS_KERNEL,
            &[x.clone(), idx.clone()],
            &[],
            Target::Trn2,
        )
        .unwrap();
        let (picked, selected) = (&out[0], &out[1]);
        for r in 0..p {
            let i = idx.values[r] as usize;
            assert_eq!(picked.values[r], x.values[r * n + i], "{dtype} picked[{r}]");
            for f in 0..n {
                let want = if f == i {
                    x.values[r * n + f]
                } else {
                    f32::NEG_INFINITY
                };
                assert_eq!(
                    selected.values[r * n + f],
                    want,
                    "{dtype} selected[{r}, {f}]"
                );
            }
        }
    }
}

#[test]
fn range_select_without_reduce_and_an_empty_range_writes_on_false() {
    // Rows keep 2 < i ≤ 5 of i = f + 10 (nothing: every i ≥ 10), or 10 ≤ i ≤ 12 on row 1.
    let p = trace(
        "range",
        Target::Trn3,
        &[InputSpec {
            name: "x".into(),
            shape: vec![2, 4],
            dtype: DType::F32,
        }],
        |h| {
            let out = shared_hbm(&[2, 4], DType::F32);
            let x = sbuf([2, 4], DType::F32);
            dma_copy(&x, &h[0]);
            let (lo, hi) = (sbuf([2, 1], DType::F32), sbuf([2, 1], DType::F32));
            iota(&lo, 2, 8, 0); // 2, 10
            iota(&hi, 5, 7, 0); // 5, 12
            range_select(
                &x,
                &x,
                BinOp::Greater,
                BinOp::LessEqual,
                &lo,
                &hi,
                None,
                BinOp::Maximum,
                10.0,
                7.5,
            );
            dma_copy(&out, &x);
            vec![out]
        },
    )
    .unwrap();
    validate(&p).unwrap();
    let x: Vec<f32> = (1..=8).map(|v| v as f32).collect();
    let bytes: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
    let out = nki_core::sim::simulate_to_vecs(&p, &[&bytes], Default::default()).unwrap();
    let got: Vec<f32> = (0..8).map(|i| DType::F32.read(&out[0], i)).collect();
    // Row 1: i = 10, 11, 12, 13 against 10 < i ≤ 12.
    assert_eq!(got, [7.5, 7.5, 7.5, 7.5, 7.5, 6.0, 7.0, 7.5]);
}

#[test]
fn comparisons_are_one_or_zero_and_nan_compares_false_except_not_equal() {
    let nan = f32::NAN;
    let cases: [(f32, f32); 6] = [
        (1.0, 1.0),
        (1.0, 2.0),
        (2.0, 1.0),
        (nan, 1.0),
        (1.0, nan),
        (nan, nan),
    ];
    let want = |op: BinOp, a: f32, b: f32| -> f32 {
        let t = match op {
            BinOp::Equal => a == b,
            BinOp::NotEqual => a != b,
            BinOp::Greater => a > b,
            BinOp::GreaterEqual => a >= b,
            BinOp::Less => a < b,
            BinOp::LessEqual => a <= b,
            other => panic!("{other:?} is not a comparison"),
        };
        if t { 1.0 } else { 0.0 }
    };
    let comparisons: Vec<BinOp> = BinOp::ALL
        .iter()
        .copied()
        .filter(|o| o.is_comparison())
        .collect();
    assert_eq!(comparisons.len(), 6);
    for op in &comparisons {
        assert_eq!(op.reduce_identity(), None, "{op:?}");
        assert_eq!(BinOp::from_nki_name(&op.nki_name()[3..]), Some(*op));
        for (a, b) in cases {
            assert_eq!(op.apply(a, b), want(*op, a, b), "{op:?}({a}, {b})");
        }
        // NaN: false for everything but not_equal.
        assert_eq!(op.apply(nan, nan), f32::from(*op == BinOp::NotEqual));
    }
    // The same through the simulator: tensor_tensor per pair, and tensor_scalar against an
    // immediate and a column (op0), and as op1 after an add.
    let a: Vec<f32> = cases.iter().map(|c| c.0).collect();
    let b: Vec<f32> = cases.iter().map(|c| c.1).collect();
    let k = comparisons.len();
    let ops = comparisons.clone();
    let p = trace(
        "compare",
        Target::Trn2,
        &[
            InputSpec {
                name: "a".into(),
                shape: vec![1, 6],
                dtype: DType::F32,
            },
            InputSpec {
                name: "b".into(),
                shape: vec![1, 6],
                dtype: DType::F32,
            },
        ],
        move |h| {
            let out = shared_hbm(&[4 * k, 6], DType::F32);
            let (ta, tb) = (sbuf([1, 6], DType::F32), sbuf([1, 6], DType::F32));
            dma_copy(&ta, &h[0]);
            dma_copy(&tb, &h[1]);
            let col = sbuf([1, 1], DType::F32);
            memset(&col, 1.0);
            for (j, op) in ops.into_iter().enumerate() {
                let r = sbuf([1, 6], DType::F32);
                tensor_tensor(&r, &ta, &tb, op);
                dma_copy(out.rows(4 * j, 1), &r);
                let s = sbuf([1, 6], DType::F32);
                tensor_scalar(&s, &ta, op, 1.0);
                dma_copy(out.rows(4 * j + 1, 1), &s);
                let c = sbuf([1, 6], DType::F32);
                tensor_scalar(&c, &ta, op, &col);
                dma_copy(out.rows(4 * j + 2, 1), &c);
                let t = sbuf([1, 6], DType::F32);
                tensor_scalar(&t, &ta, BinOp::Add, 0.0).then(op, f32::NAN);
                dma_copy(out.rows(4 * j + 3, 1), &t);
            }
            vec![out]
        },
    )
    .unwrap();
    validate(&p).unwrap();
    let bytes = |v: &[f32]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
    let (ab, bb) = (bytes(&a), bytes(&b));
    let out = nki_core::sim::simulate_to_vecs(&p, &[&ab, &bb], Default::default()).unwrap();
    let got: Vec<f32> = (0..4 * k * 6)
        .map(|i| DType::F32.read(&out[0], i))
        .collect();
    for (j, op) in comparisons.iter().enumerate() {
        for i in 0..6 {
            assert_eq!(got[4 * j * 6 + i], want(*op, a[i], b[i]), "{op:?} tt {i}");
            assert_eq!(
                got[(4 * j + 1) * 6 + i],
                want(*op, a[i], 1.0),
                "{op:?} ts {i}"
            );
            assert_eq!(
                got[(4 * j + 2) * 6 + i],
                want(*op, a[i], 1.0),
                "{op:?} col {i}"
            );
            assert_eq!(
                got[(4 * j + 3) * 6 + i],
                want(*op, a[i], nan),
                "{op:?} op1 {i}"
            );
        }
    }
}

fn validation_rule(p: &Program) -> (&'static str, String, String, String) {
    match validate(p).unwrap_err() {
        NkiError::Validation(v) => (v.rule, v.limit, v.actual, v.message),
        other => panic!("expected a validation error, got {other}"),
    }
}

#[test]
fn range_select_needs_neuroncore_v3_and_fp32_bounds() {
    let shapes: [(&[u64], DType); 2] = [(&[128, 64], DType::F32), (&[128, 1], DType::F32)];
    let trn1 = program_of(&GATHER_COLUMNS_KERNEL, &shapes, Target::Trn1);
    let (rule, limit, actual, message) = validation_rule(&trn1);
    assert_eq!(rule, "isa-target");
    assert_eq!(limit, "NeuronCore-v3 (trn2) or newer");
    assert_eq!(actual, "trn1 (NeuronCore-v2)");
    assert!(
        message.starts_with("range_select needs NeuronCore-v3 (Trn2) or newer"),
        "{message}"
    );
    let err = run_kernel(
        &GATHER_COLUMNS_KERNEL,
        &[
            HostArray::new(&[128, 64], DType::F32, ramp(128 * 64)),
            HostArray::new(&[128, 1], DType::F32, [0.0; 128]),
        ],
        &[],
        Target::Trn1,
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("[isa-target]") && err.contains("range_select needs NeuronCore-v3"),
        "{err}"
    );
    for target in [Target::Trn2, Target::Trn3] {
        validate(&program_of(&GATHER_COLUMNS_KERNEL, &shapes, target)).unwrap();
    }

    let bf16_bounds = trace("k", Target::Trn2, &[], |_| {
        let out = shared_hbm(&[4, 8], DType::F32);
        let x = sbuf([4, 8], DType::F32);
        memset(&x, 1.0);
        let lo = sbuf([4, 1], DType::BF16);
        memset(&lo, 0.0);
        let hi = sbuf([4, 1], DType::F32);
        memset(&hi, 3.0);
        range_select(
            &x,
            &x,
            BinOp::GreaterEqual,
            BinOp::Less,
            &lo,
            &hi,
            None,
            BinOp::Maximum,
            0.0,
            0.0,
        );
        dma_copy(&out, &x);
        vec![out]
    })
    .unwrap();
    let (rule, limit, actual, _) = validation_rule(&bf16_bounds);
    assert_eq!(
        (rule, limit.as_str(), actual.as_str()),
        ("range-select-dtype", "f32", "bf16")
    );
}

#[test]
fn iota_cannot_write_psum() {
    let mut line = 0;
    let p = trace("k", Target::Trn2, &[], |_| {
        let out = shared_hbm(&[4, 8], DType::F32);
        let acc = psum([4, 8], DType::F32);
        line = line!() + 1;
        iota(&acc, 0, 8, 1);
        let s = sbuf([4, 8], DType::F32);
        tensor_copy(&s, &acc);
        dma_copy(&out, &s);
        vec![out]
    })
    .unwrap();
    let (rule, limit, actual, message) = validation_rule(&p);
    assert_eq!(
        (rule, limit.as_str(), actual.as_str()),
        ("gpsimd-psum", "sbuf", "psum")
    );
    assert!(
        message.contains("iota runs on GpSimd, which cannot access PSUM"),
        "{message}"
    );
    let text = validate(&p).unwrap_err().to_string();
    assert!(text.contains(&format!("{}:{line}", file!())), "{text}");
}

#[test]
fn range_select_operands_are_checked_when_traced() {
    let attempt = |comp0: BinOp, reduce_op: BinOp, bound_rows: usize| {
        trace("k", Target::Trn2, &[], |_| {
            let out = shared_hbm(&[4, 8], DType::F32);
            let x = sbuf([4, 8], DType::F32);
            memset(&x, 1.0);
            let b = sbuf([bound_rows, 1], DType::F32);
            memset(&b, 0.0);
            let res = sbuf([4, 1], DType::F32);
            range_select(
                &x,
                &x,
                comp0,
                BinOp::Less,
                &b,
                &b,
                Some(res.region()),
                reduce_op,
                0.0,
                0.0,
            );
            dma_copy(&out, &x);
            vec![out]
        })
        .map(|_| ())
        .unwrap_err()
        .to_string()
    };
    let e = attempt(BinOp::NotEqual, BinOp::Maximum, 4);
    assert!(
        e.contains("range_select: comp_op0 is nl.not_equal, but it must be one of nl.equal, nl.less, nl.less_equal, nl.greater, nl.greater_equal"),
        "{e}"
    );
    let e = attempt(BinOp::Add, BinOp::Maximum, 4);
    assert!(e.contains("comp_op0 is nl.add"), "{e}");
    let e = attempt(BinOp::Equal, BinOp::Subtract, 4);
    assert!(
        e.contains("range_select: Subtract is not a reduction operator"),
        "{e}"
    );
    let e = attempt(BinOp::Equal, BinOp::Maximum, 2);
    assert!(
        e.contains("range_select: bound0 must be a (4, 1) column"),
        "{e}"
    );
}

#[test]
fn cost_puts_iota_on_gpsimd_and_range_select_on_the_vector_engine_at_tensor_scalar_cost() {
    let shapes: [(&[u64], DType); 2] = [(&[128, 600], DType::F32), (&[128, 1], DType::F32)];
    let report = estimate(&program_of(&GATHER_COLUMNS_KERNEL, &shapes, Target::Trn2));
    let selects: Vec<_> = report
        .slices
        .iter()
        .filter(|s| s.name == "range_select")
        .collect();
    assert_eq!(selects.len(), 2);
    assert!(selects.iter().all(|s| s.engine == Engine::Vector));
    // A tensor_scalar over the same [128, 300] fp32 region: max(64, ⌈300 / 2⌉) cycles at
    // 0.96 GHz; the first also pays 100 for reading what the previous vector instruction wrote.
    let want = [(150.0 + 100.0) / 0.96, 150.0 / 0.96];
    for (s, want) in selects.iter().zip(want) {
        assert!(((s.end_ns - s.start_ns) - want).abs() < 1e-6, "{s:?}");
    }

    let report = estimate(&program_of(&ONE_HOT_ROWS_KERNEL, &shapes, Target::Trn2));
    let iotas: Vec<_> = report.slices.iter().filter(|s| s.name == "iota").collect();
    assert_eq!(iotas.len(), 1);
    assert_eq!(iotas[0].engine, Engine::GpSimd);
    // As memset into SBUF: max(64, N) GpSimd cycles at 1.2 GHz.
    let want = 600.0 / 1.2;
    assert!(((iotas[0].end_ns - iotas[0].start_ns) - want).abs() < 1e-6);
    let gpsimd = report
        .engines
        .iter()
        .find(|e| e.engine == Engine::GpSimd)
        .unwrap();
    assert_eq!(gpsimd.instructions, 1);
}

#[test]
fn codegen_emits_the_nki_calls() {
    let shapes: [(&[u64], DType); 2] = [(&[128, 64], DType::F32), (&[128, 1], DType::F32)];
    let one_hot = emit_nki(&program_of(&ONE_HOT_ROWS_KERNEL, &shapes, Target::Trn2));
    assert!(
        one_hot.contains(
            "nisa.iota(dst=t1, pattern=[[1, 64]], offset=0, channel_multiplier=0)  # nki-core/tests/iota_select.rs:"
        ),
        "{one_hot}"
    );
    assert!(
        one_hot.contains("nisa.tensor_scalar(dst=t2, data=t1, op0=nl.equal, operand0=t0)"),
        "{one_hot}"
    );
    let gather = emit_nki(&program_of(&GATHER_COLUMNS_KERNEL, &shapes, Target::Trn2));
    for (c0, c1) in [(0, 32), (32, 64)] {
        let call = format!(
            "nisa.range_select(dst=t3[0:128, {c0}:{c1}], on_true_tile=t2[0:128, {c0}:{c1}], \
             comp_op0=nl.greater_equal, comp_op1=nl.less, bound0=t0, bound1=t1, \
             reduce_cmd=nisa.reduce_cmd.reset_reduce, reduce_res=t4[0:128, {k}:{k1}], \
             reduce_op=nl.maximum, range_start={c0}, on_false_value=float('-inf'))",
            k = c0 / 32,
            k1 = c0 / 32 + 1
        );
        assert!(gather.contains(&call), "{call}\n{gather}");
    }
    // Without a reduction neither reduce keyword appears; range_start and on_false_value are
    // always explicit.
    let p = trace("k", Target::Trn2, &[], |_| {
        let out = shared_hbm(&[4, 8], DType::F32);
        let x = sbuf([4, 8], DType::F32);
        iota(&x, -3, 8, 1);
        let b = sbuf([4, 1], DType::F32);
        iota(&b, 2, 0, 0);
        range_select(
            &x,
            &x,
            BinOp::Equal,
            BinOp::LessEqual,
            &b,
            &b,
            None,
            BinOp::Maximum,
            0.0,
            0.5,
        );
        dma_copy(&out, &x);
        vec![out]
    })
    .unwrap();
    let source = emit_nki(&p);
    assert!(
        source.contains("nisa.iota(dst=t0, pattern=[[1, 8]], offset=-3, channel_multiplier=8)"),
        "{source}"
    );
    assert!(
        source.contains(
            "nisa.range_select(dst=t0, on_true_tile=t0, comp_op0=nl.equal, comp_op1=nl.less_equal, \
             bound0=t1, bound1=t1, range_start=0, on_false_value=0.5)"
        ),
        "{source}"
    );
}
