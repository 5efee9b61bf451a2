//! `max8`, `nc_find_index8` and `nc_match_replace8`: the eight largest values of each
//! partition (NaN first, ties in row order, rounded to the destination), where given values
//! are (duplicates pairing with occurrences ascending, −1 where absent), and replacing them
//! (duplicates descending, with `dst_idx`); a top-16 of each row in two rounds against a sort;
//! trace-time checks; cost; the NKI calls codegen emits.

mod common;

use common::input;

/// Simulates `p` on `x` and reads every output back as f32s.
fn run(p: &Program, x: &[f32]) -> Vec<Vec<f32>> {
    common::run(p, &[x])
}
use nki_core::codegen::emit_nki;
use nki_core::cost::{Engine, estimate};
use nki_core::ir::Program;
use nki_core::lang::trace;
use nki_core::prelude::*;
use nki_core::validate::validate;

/// The top `k` (a multiple of 8) values of each row of `x` `[rows, cols]` and their indices:
/// `k / 8` rounds of `max8` then `nc_match_replace8` by `-inf` in place with `dst_idx`; also
/// `nc_find_index8` of the first round's values in the original row (output 2).
fn top_k_program(rows: usize, cols: usize, k: usize, data: DType, vals: DType) -> Program {
    trace("top_k", Target::Trn2, &input([rows, cols], data), |h| {
        let top = shared_hbm(&[rows, k], vals);
        let idx = shared_hbm(&[rows, k], DType::I32);
        let first = shared_hbm(&[rows, 8], DType::I32);
        let x = sbuf([rows, cols], data);
        dma_copy(&x, &h[0]);
        let work = sbuf([rows, cols], data);
        tensor_copy(&work, &x);
        let v = sbuf([rows, k], vals);
        let i = sbuf([rows, k], DType::I32);
        for round in 0..k / 8 {
            let vr = v.region().slice(0, rows, round * 8, 8);
            max8(vr.clone(), &work);
            let ir = i.region().slice(0, rows, round * 8, 8);
            nc_match_replace8(&work, &work, vr, f32::NEG_INFINITY, Some(ir));
        }
        let f = sbuf([rows, 8], DType::I32);
        nc_find_index8(&f, &x, v.region().slice(0, rows, 0, 8));
        dma_copy(&top, &v);
        dma_copy(&idx, &i);
        dma_copy(&first, &f);
        vec![top, idx, first]
    })
    .unwrap()
}

/// The reference: indices sorted by value descending (NaN first), ties by index.
fn sorted_indices(row: &[f32]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..row.len()).collect();
    order.sort_by(|&a, &b| {
        let (x, y) = (row[a], row[b]);
        let key = |v: f32| if v.is_nan() { f32::INFINITY } else { v };
        (y.is_nan().cmp(&x.is_nan()))
            .then(key(y).partial_cmp(&key(x)).unwrap())
            .then(a.cmp(&b))
    });
    order
}

fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 100.0
        })
        .collect()
}

#[test]
fn a_top_16_in_two_rounds_matches_a_sort_of_each_row() {
    // [128, 1000] splits rows across threads; the second case has many ties (values in 0..20).
    for (rows, cols, ties) in [(128, 1000, false), (7, 40, true)] {
        let mut x = values(rows * cols, 5);
        if ties {
            x.iter_mut().for_each(|v| *v = (v.abs() % 20.0).floor());
            x[3] = f32::NAN;
            x[cols + 5] = f32::NEG_INFINITY;
        }
        let out = run(&top_k_program(rows, cols, 16, DType::F32, DType::F32), &x);
        for r in 0..rows {
            let row = &x[r * cols..(r + 1) * cols];
            let order = sorted_indices(row);
            for j in 0..16 {
                let (got_v, got_i) = (out[0][r * 16 + j], out[1][r * 16 + j]);
                let want = row[order[j]];
                assert!(
                    got_v.to_bits() == want.to_bits() || (got_v.is_nan() && want.is_nan()),
                    "row {r} rank {j}: {got_v} vs {want}"
                );
                // Ties: max8 keeps row order and match_replace8 pairs equal values with their
                // occurrences from the last slot down, so equal values get the right set of
                // indices (each index holds its value).
                assert_eq!(
                    row[got_i as usize].to_bits(),
                    got_v.to_bits(),
                    "row {r} rank {j}"
                );
            }
            let mut got: Vec<usize> = out[1][r * 16..(r + 1) * 16]
                .iter()
                .map(|&i| i as usize)
                .collect();
            got.sort_unstable();
            let mut want: Vec<usize> = order[..16].to_vec();
            want.sort_unstable();
            if !ties {
                assert_eq!(got, want, "row {r}");
            }
            got.dedup();
            assert_eq!(got.len(), 16, "row {r}: indices are distinct");
            // find_index8 of the first eight: the k-th repetition of a value at its k-th
            // occurrence, i.e. ascending among ties.
            let first: Vec<usize> = out[2][r * 8..(r + 1) * 8]
                .iter()
                .map(|&i| i as usize)
                .collect();
            assert_eq!(first, order[..8].to_vec(), "row {r}");
        }
    }
}

#[test]
fn max8_rounds_to_the_dst_dtype_and_an_fp32_row_does_not_contain_its_bf16_values() {
    let (rows, cols) = (3, 20);
    let x: Vec<f32> = (0..rows * cols).map(|i| 1.0 + i as f32 / 7.0).collect();
    // fp32 data, bf16 values: rounded, so (where rounding changed them) not found in the row.
    let out = run(&top_k_program(rows, cols, 8, DType::F32, DType::BF16), &x);
    for r in 0..rows {
        for j in 0..8 {
            let exact = x[r * cols + cols - 1 - j];
            let want = DType::BF16.round(exact);
            assert_eq!(out[0][r * 8 + j], want);
            let idx = if want == exact {
                (cols - 1 - j) as f32
            } else {
                -1.0
            };
            assert_eq!(out[1][r * 8 + j], idx, "row {r} rank {j}");
            assert_eq!(out[2][r * 8 + j], idx, "row {r} rank {j}");
        }
    }
    assert!(out[1].contains(&-1.0));
    // bf16 data and values: every value is found.
    let out = run(&top_k_program(rows, cols, 8, DType::BF16, DType::BF16), &x);
    let bf16: Vec<f32> = x.iter().map(|v| DType::BF16.round(*v)).collect();
    for r in 0..rows {
        let order = sorted_indices(&bf16[r * cols..(r + 1) * cols]);
        let got: Vec<usize> = out[1][r * 8..(r + 1) * 8]
            .iter()
            .map(|&i| i as usize)
            .collect();
        assert_eq!(got[..], order[..8], "row {r}");
        for j in 0..8 {
            assert_eq!(out[0][r * 8 + j], bf16[r * cols + order[j]]);
        }
    }
}

#[test]
fn the_selection_operands_are_checked_when_traced() {
    let attempt = |f: &dyn Fn()| {
        trace("k", Target::Trn2, &[], |_| {
            let out = shared_hbm(&[4, 8], DType::F32);
            let x = sbuf([4, 8], DType::F32);
            memset(&x, 1.0);
            f();
            dma_copy(&out, &x);
            vec![out]
        })
        .map(|_| ())
        .unwrap_err()
        .to_string()
    };
    let e = attempt(&|| max8(sbuf([4, 8], DType::F32), sbuf([4, 7], DType::F32)));
    assert!(
        e.contains("max8: src has 7 elements per partition; it must have between 8 and 16384"),
        "{e}"
    );
    let e = attempt(&|| max8(sbuf([1, 8], DType::F32), sbuf([1, 16385], DType::F32)));
    assert!(
        e.contains("max8: src has 16385 elements per partition"),
        "{e}"
    );
    let e = attempt(&|| max8(sbuf([4, 16], DType::F32), sbuf([4, 32], DType::F32)));
    assert!(
        e.contains("max8: dst must be (4, 8), eight values per partition, got shape [4, 16]"),
        "{e}"
    );
    let e = attempt(&|| {
        nc_find_index8(
            sbuf([4, 8], DType::F32),
            sbuf([4, 32], DType::F32),
            sbuf([4, 8], DType::F32),
        )
    });
    assert!(
        e.contains(
            "nc_find_index8: dst must be a uint32 tile (indices; int32 is accepted too), got f32"
        ),
        "{e}"
    );
    let e = attempt(&|| {
        nc_find_index8(
            sbuf([4, 8], DType::I32),
            sbuf([4, 32], DType::F32),
            sbuf([2, 8], DType::F32),
        )
    });
    assert!(e.contains("nc_find_index8: vals must be (4, 8)"), "{e}");
    let e = attempt(&|| {
        let d = sbuf([4, 32], DType::F32);
        nc_match_replace8(
            sbuf([4, 30], DType::F32),
            &d,
            sbuf([4, 8], DType::F32),
            0.0,
            None,
        )
    });
    assert!(
        e.contains("nc_match_replace8: data has shape [4, 32] but dst has shape [4, 30]"),
        "{e}"
    );
    let e = attempt(&|| {
        let d = sbuf([4, 32], DType::F32);
        let idx = sbuf([4, 8], DType::BF16);
        nc_match_replace8(&d, &d, sbuf([4, 8], DType::F32), 0.0, Some(idx.region()))
    });
    assert!(
        e.contains("nc_match_replace8: dst_idx must be a uint32 tile"),
        "{e}"
    );
}

#[test]
fn selection_costs_one_vector_pass_over_the_data_and_emits_its_nki_calls() {
    let p = top_k_program(128, 1000, 16, DType::F32, DType::F32);
    validate(&p).unwrap();
    let report = estimate(&p);
    // One pass over [128, 1000] fp32 on Trn2: ⌈1000 / 2⌉ cycles at 0.96 GHz, plus 100 when it
    // reads what the previous vector instruction wrote (max8 the loaded data's copy,
    // match_replace8 max8's values; find_index8 reads the load and max8's values, not what
    // match_replace8 just wrote).
    let pass = 500.0 / 0.96;
    let dependent = pass + 100.0 / 0.96;
    for (name, want) in [
        ("max8", dependent),
        ("nc_match_replace8", dependent),
        ("nc_find_index8", pass),
    ] {
        let slices: Vec<_> = report.slices.iter().filter(|s| s.name == name).collect();
        assert!(!slices.is_empty(), "{name}");
        for s in slices {
            assert_eq!(s.engine, Engine::Vector);
            assert!(((s.end_ns - s.start_ns) - want).abs() < 1e-6, "{s:?}");
        }
    }
    let source = emit_nki(&p);
    for call in [
        "nisa.max8(dst=t2[0:128, 8:16], src=t1)",
        "nisa.nc_match_replace8(dst=t1, data=t1, vals=t2[0:128, 0:8], imm=float('-inf'), dst_idx=t3[0:128, 0:8])",
        "nisa.nc_find_index8(dst=t4, data=t0, vals=t2[0:128, 0:8])",
    ] {
        assert!(source.contains(call), "{call}\n{source}");
    }
    let p = trace("k", Target::Trn2, &[], |_| {
        let out = shared_hbm(&[4, 8], DType::F32);
        let x = sbuf([4, 8], DType::F32);
        memset(&x, 1.0);
        nc_match_replace8(&x, &x, &x, 0.5, None);
        dma_copy(&out, &x);
        vec![out]
    })
    .unwrap();
    let source = emit_nki(&p);
    assert!(
        source.contains("nisa.nc_match_replace8(dst=t0, data=t0, vals=t0, imm=0.5)"),
        "{source}"
    );
}
