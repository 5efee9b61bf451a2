//! GpSimd's gathers within SBUF. `local_gather`: each group of 16 partitions gathers runs of
//! `num_elem_per_idx` elements at its shared offsets (flattened partition first, the first
//! `num_valid_indices`), against the docs' NumPy reference; `nc_n_gather`: every partition
//! gathers its own elements, against `np.take_along_axis`. Their trace checks, validation rules
//! (dtypes, index dtypes, partition multiple, `num_elem_per_idx`, index counts, PSUM), the
//! simulator's error for an index out of range, both in place, cost and codegen.

mod common;

use common::{run, values};
use nki_core::NkiError;
use nki_core::codegen::emit_nki;
use nki_core::cost::{Engine, estimate};
use nki_core::ir::Program;
use nki_core::lang::{InputSpec, trace};
use nki_core::prelude::*;
use nki_core::sim::{SimOptions, simulate_to_vecs};
use nki_core::validate::validate;

/// Inputs `data` `[p, f]` in `dtype` and `index` `[p, k]` in `index_dtype`.
fn inputs((p, f, k): (usize, usize, usize), dtype: DType, index_dtype: DType) -> Vec<InputSpec> {
    vec![
        InputSpec {
            name: "data".into(),
            shape: vec![p, f],
            dtype,
        },
        InputSpec {
            name: "index".into(),
            shape: vec![p, k],
            dtype: index_dtype,
        },
    ]
}

/// `local_gather` of `data` `[p, f]` by the uint16 `index` `[p, k]` into a `[p, out]` tile
/// (`out` = valid · n), stored to output 0.
fn local_gather_program(
    (p, f, k): (usize, usize, usize),
    dtype: DType,
    n: usize,
    valid: Option<usize>,
) -> Program {
    let out = valid.unwrap_or(16 * k) * n;
    trace(
        "k",
        Target::Trn2,
        &inputs((p, f, k), dtype, DType::U16),
        move |h| {
            let result = shared_hbm(&[p, out], dtype);
            let src = sbuf([p, f], dtype);
            dma_copy(&src, &h[0]);
            let index = sbuf([p, k], DType::U16);
            dma_copy(&index, &h[1]);
            let dst = sbuf([p, out], dtype);
            local_gather(&dst, &src, &index, n, valid);
            dma_copy(&result, &dst);
            vec![result]
        },
    )
    .unwrap()
}

/// The docs' NumPy semantics: per core, `index[rows].flatten(order='F')[:valid]`, and each
/// partition takes `n` elements at each offset.
fn local_gathered(
    data: &[f32],
    index: &[f32],
    (p, f, k): (usize, usize, usize),
    n: usize,
    valid: usize,
) -> Vec<f32> {
    let mut out = Vec::new();
    for core in 0..p / 16 {
        let rows = core * 16..core * 16 + 16;
        let flat: Vec<usize> = (0..k)
            .flat_map(|c| rows.clone().map(move |r| index[r * k + c] as usize))
            .take(valid)
            .collect();
        for r in rows {
            for &o in &flat {
                out.extend_from_slice(&data[r * f + o..r * f + o + n]);
            }
        }
    }
    out
}

/// Offsets `0..limit` (whole runs of `n`), pseudo-random, as f32s.
fn offsets(count: usize, limit: usize, n: usize, seed: u64) -> Vec<f32> {
    values(count, seed, 1.0)
        .iter()
        .map(|v| (((v + 0.5) * (limit / n) as f32) as usize).min(limit / n - 1) * n)
        .map(|o| o as f32)
        .collect()
}

#[test]
fn local_gather_takes_runs_at_each_cores_offsets() {
    // (shape, num_elem_per_idx, num_valid_indices).
    type Case = ((usize, usize, usize), usize, Option<usize>);
    let cases: &[Case] = &[
        ((128, 2048, 4), 4, Some(64)),
        ((128, 512, 4), 1, None),
        ((32, 96, 3), 32, Some(5)),
        ((16, 40, 1), 8, Some(16)),
    ];
    for &((p, f, k), n, valid) in cases {
        for dtype in [DType::F32, DType::BF16] {
            let data: Vec<f32> = values(p * f, 5, 50.0)
                .iter()
                .map(|v| dtype.round(*v))
                .collect();
            let index = offsets(p * k, f, n, 11);
            let prog = local_gather_program((p, f, k), dtype, n, valid);
            validate(&prog).unwrap();
            let got = run(&prog, &[&data, &index]);
            let want = local_gathered(&data, &index, (p, f, k), n, valid.unwrap_or(16 * k));
            assert_eq!(
                got[0], want,
                "{p}x{f} by {k}, n={n}, valid={valid:?} {dtype}"
            );
        }
    }
}

/// `nc_n_gather` of `data` `[p, f]` by the uint32 `indices` `[p, k]`, stored to output 0.
fn n_gather_program((p, f, k): (usize, usize, usize), dtype: DType) -> Program {
    trace(
        "k",
        Target::Trn2,
        &inputs((p, f, k), dtype, DType::U32),
        move |h| {
            let result = shared_hbm(&[p, k], dtype);
            let data = sbuf([p, f], dtype);
            dma_copy(&data, &h[0]);
            let indices = sbuf([p, k], DType::U32);
            dma_copy(&indices, &h[1]);
            let dst = sbuf([p, k], dtype);
            nc_n_gather(&dst, &data, &indices);
            dma_copy(&result, &dst);
            vec![result]
        },
    )
    .unwrap()
}

#[test]
fn nc_n_gather_takes_each_partitions_own_elements() {
    for (p, f, k) in [(128, 512, 16), (32, 64, 10), (7, 1000, 700)] {
        for dtype in [DType::F32, DType::BF16, DType::I32] {
            let data: Vec<f32> = values(p * f, 2, 1000.0)
                .iter()
                .map(|v| dtype.round(*v))
                .collect();
            let indices = offsets(p * k, f, 1, 13);
            let prog = n_gather_program((p, f, k), dtype);
            validate(&prog).unwrap();
            let got = run(&prog, &[&data, &indices]);
            // np.take_along_axis(data, indices, axis=-1).
            let want: Vec<f32> = (0..p * k)
                .map(|i| data[i / k * f + indices[i] as usize])
                .collect();
            assert_eq!(got[0], want, "{p}x{f} by {k} {dtype}");
        }
    }
}

#[test]
fn an_index_out_of_range_is_a_simulation_error() {
    let sim_error = |prog: &Program, data: &[f32], index: &[f32], idt: DType| {
        let enc = |v: &[f32], dt: DType| {
            let mut b = vec![0; v.len() * dt.size_bytes()];
            v.iter()
                .enumerate()
                .for_each(|(i, x)| dt.write(&mut b, i, *x));
            b
        };
        let (d, i) = (enc(data, DType::F32), enc(index, idt));
        simulate_to_vecs(prog, &[&d, &i], SimOptions::default())
            .unwrap_err()
            .to_string()
    };
    let prog = n_gather_program((4, 8, 2), DType::F32);
    let mut indices = vec![1.0; 8];
    indices[5] = 8.0;
    let e = sim_error(&prog, &values(32, 1, 1.0), &indices, DType::U32);
    assert!(e.contains("indices[2, 1] is 8; it must be in 0..8"), "{e}");
    let prog = local_gather_program((16, 10, 1), DType::F32, 4, None);
    let mut index = vec![0.0; 16];
    index[9] = 7.0;
    let e = sim_error(&prog, &values(160, 1, 1.0), &index, DType::U16);
    assert!(
        e.contains(
            "index[9, 0] (offset 9 of its core) is 7; it plus 4 elements must stay within 10"
        ),
        "{e}"
    );
}

#[test]
fn shapes_are_checked_when_traced() {
    let attempt = |f: fn()| {
        trace("k", Target::Trn2, &[], move |_| {
            let out = shared_hbm(&[1, 1], DType::F32);
            f();
            vec![out]
        })
        .map(|_| ())
        .unwrap_err()
        .to_string()
    };
    let e = attempt(|| {
        let (src, index, dst) = (
            sbuf([32, 8], DType::F32),
            sbuf([16, 1], DType::U16),
            sbuf([32, 16], DType::F32),
        );
        local_gather(&dst, &src, &index, 1, None);
    });
    assert!(
        e.contains(
            "local_gather: src_buffer has 32 partitions, index 16 and dst 32; they must match"
        ),
        "{e}"
    );
    let e = attempt(|| {
        let (src, index, dst) = (
            sbuf([16, 8], DType::F32),
            sbuf([16, 2], DType::U16),
            sbuf([16, 16], DType::F32),
        );
        local_gather(&dst, &src, &index, 2, Some(10));
    });
    assert!(
        e.contains(
            "local_gather: dst has 16 elements per partition but 10 indices of 2 elements gather 20"
        ),
        "{e}"
    );
    let e = attempt(|| {
        let (data, indices, dst) = (
            sbuf([8, 8], DType::F32),
            sbuf([4, 2], DType::U32),
            sbuf([4, 2], DType::F32),
        );
        nc_n_gather(&dst, &data, &indices);
    });
    assert!(
        e.contains("nc_n_gather: data has 8 partitions but indices 4; they must match"),
        "{e}"
    );
    let e = attempt(|| {
        let (data, indices, dst) = (
            sbuf([8, 8], DType::F32),
            sbuf([8, 2], DType::U32),
            sbuf([8, 3], DType::F32),
        );
        nc_n_gather(&dst, &data, &indices);
    });
    assert!(
        e.contains(
            "nc_n_gather: dst has shape [8, 3] but indices [8, 2]; dst takes the indices' shape"
        ),
        "{e}"
    );
}

/// A `local_gather` or `nc_n_gather` (`n_gather`) over tiles of the given partitions, dtypes
/// and buffers, validated: the rule broken and its message.
struct Case {
    n_gather: bool,
    partitions: usize,
    index_free: usize,
    dtypes: (DType, DType, DType),
    psum_src: bool,
    n: usize,
    valid: Option<usize>,
}

impl Case {
    fn local() -> Case {
        Case {
            n_gather: false,
            partitions: 16,
            index_free: 2,
            dtypes: (DType::F32, DType::U16, DType::F32),
            psum_src: false,
            n: 1,
            valid: None,
        }
    }

    fn rule(self) -> (&'static str, String, String) {
        let p = trace("k", Target::Trn2, &[], move |_| {
            let out = shared_hbm(&[1, 1], DType::F32);
            let (sdt, idt, ddt) = self.dtypes;
            let src = if self.psum_src {
                psum([self.partitions, 64], sdt)
            } else {
                sbuf([self.partitions, 64], sdt)
            };
            memset(&src, 0.0);
            let index = sbuf([self.partitions, self.index_free], idt);
            memset(&index, 0.0);
            if self.n_gather {
                let dst = sbuf([self.partitions, self.index_free], ddt);
                nc_n_gather(&dst, &src, &index);
            } else {
                let valid = self.valid.unwrap_or(16 * self.index_free);
                let dst = sbuf([self.partitions, valid * self.n], ddt);
                local_gather(&dst, &src, &index, self.n, self.valid);
            }
            vec![out]
        })
        .unwrap();
        match validate(&p).unwrap_err() {
            NkiError::Validation(v) => (v.rule, v.actual, v.message),
            e => panic!("{e}"),
        }
    }
}

#[test]
fn validation_names_each_documented_rule() {
    let (r, actual, m) = Case {
        dtypes: (DType::F32, DType::U16, DType::BF16),
        ..Case::local()
    }
    .rule();
    assert_eq!((r, actual.as_str()), ("gather-dtype", "bf16"));
    assert!(
        m.contains("local_gather writes src_buffer's dtype unconverted"),
        "{m}"
    );
    let (r, actual, m) = Case {
        dtypes: (DType::F32, DType::I32, DType::F32),
        ..Case::local()
    }
    .rule();
    assert_eq!((r, actual.as_str()), ("gather-index-dtype", "i32"));
    assert!(m.contains("its indices must be uint16"), "{m}");
    let (r, actual, m) = Case {
        partitions: 24,
        ..Case::local()
    }
    .rule();
    assert_eq!((r, actual.as_str()), ("local-gather-partitions", "24"));
    assert!(m.contains("must be a multiple of 16"), "{m}");
    let (r, actual, _) = Case {
        n: 3,
        ..Case::local()
    }
    .rule();
    assert_eq!((r, actual.as_str()), ("local-gather-elems-per-index", "3"));
    let (r, actual, m) = Case {
        valid: Some(33),
        ..Case::local()
    }
    .rule();
    assert_eq!((r, actual.as_str()), ("local-gather-indices", "33"));
    assert!(
        m.contains("num_valid_indices is 33 but each core's 16 partitions of index hold 32"),
        "{m}"
    );
    let (r, actual, m) = Case {
        index_free: 257,
        ..Case::local()
    }
    .rule();
    assert_eq!((r, actual.as_str()), ("local-gather-indices", "4112"));
    assert!(m.contains("at most 4096 indices"), "{m}");
    let (r, _, m) = Case {
        psum_src: true,
        ..Case::local()
    }
    .rule();
    assert_eq!(r, "gpsimd-psum");
    assert!(m.contains("local_gather runs on GpSimd"), "{m}");
    let n_gather = || Case {
        n_gather: true,
        dtypes: (DType::F32, DType::U32, DType::F32),
        ..Case::local()
    };
    let (r, actual, _) = Case {
        dtypes: (DType::BF16, DType::U32, DType::F32),
        ..n_gather()
    }
    .rule();
    assert_eq!((r, actual.as_str()), ("gather-dtype", "f32"));
    let (r, actual, m) = Case {
        dtypes: (DType::F32, DType::U16, DType::F32),
        ..n_gather()
    }
    .rule();
    assert_eq!((r, actual.as_str()), ("gather-index-dtype", "u16"));
    assert!(
        m.contains("nc_n_gather: indices t1 is u16; its indices must be uint32"),
        "{m}"
    );
    let (r, _, m) = Case {
        psum_src: true,
        ..n_gather()
    }
    .rule();
    assert_eq!(r, "gpsimd-psum");
    assert!(m.contains("nc_n_gather runs on GpSimd"), "{m}");
}

#[test]
fn run_on_gpsimd_and_emit_their_nki_calls() {
    let p = local_gather_program((32, 64, 2), DType::F32, 2, Some(20));
    let slice = estimate(&p)
        .slices
        .into_iter()
        .find(|s| s.name == "local_gather")
        .unwrap();
    assert_eq!(slice.engine, Engine::GpSimd);
    let source = emit_nki(&p);
    assert!(
        source.contains(
            "nisa.local_gather(dst=t2, src_buffer=t0, index=t1, num_elem_per_idx=2, \
             num_valid_indices=20)"
        ),
        "{source}"
    );
    assert!(source.contains("dtype=nl.uint16"), "{source}");
    let p = local_gather_program((16, 64, 2), DType::F32, 1, None);
    assert!(
        emit_nki(&p)
            .contains("nisa.local_gather(dst=t2, src_buffer=t0, index=t1, num_elem_per_idx=1)")
    );
    let p = n_gather_program((8, 64, 4), DType::BF16);
    let slice = estimate(&p)
        .slices
        .into_iter()
        .find(|s| s.name == "nc_n_gather")
        .unwrap();
    assert_eq!(slice.engine, Engine::GpSimd);
    assert!(
        emit_nki(&p).contains("nisa.nc_n_gather(dst=t2, data=t0, indices=t1)"),
        "{}",
        emit_nki(&p)
    );
}

#[test]
fn both_gathers_work_in_place() {
    // local_gather over its own src_buffer: [16, 32] by 16 offsets of 2 elements each.
    let data = values(16 * 32, 4, 20.0);
    let index = offsets(16, 32, 2, 9);
    let p = trace(
        "k",
        Target::Trn2,
        &inputs((16, 32, 1), DType::F32, DType::U16),
        |h| {
            let result = shared_hbm(&[16, 32], DType::F32);
            let src = sbuf([16, 32], DType::F32);
            dma_copy(&src, &h[0]);
            let idx = sbuf([16, 1], DType::U16);
            dma_copy(&idx, &h[1]);
            local_gather(&src, &src, &idx, 2, None);
            dma_copy(&result, &src);
            vec![result]
        },
    )
    .unwrap();
    validate(&p).unwrap();
    let got = run(&p, &[&data, &index]);
    assert_eq!(got[0], local_gathered(&data, &index, (16, 32, 1), 2, 16));
    // nc_n_gather over its own data: a [16, 8] tile by [16, 8] indices.
    let data = values(16 * 8, 6, 20.0);
    let indices = offsets(16 * 8, 8, 1, 21);
    let p = trace(
        "k",
        Target::Trn2,
        &inputs((16, 8, 8), DType::F32, DType::U32),
        |h| {
            let result = shared_hbm(&[16, 8], DType::F32);
            let d = sbuf([16, 8], DType::F32);
            dma_copy(&d, &h[0]);
            let i = sbuf([16, 8], DType::U32);
            dma_copy(&i, &h[1]);
            nc_n_gather(&d, &d, &i);
            dma_copy(&result, &d);
            vec![result]
        },
    )
    .unwrap();
    let got = run(&p, &[&data, &indices]);
    let want: Vec<f32> = (0..16 * 8)
        .map(|i| data[i / 8 * 8 + indices[i] as usize])
        .collect();
    assert_eq!(got[0], want);
}
