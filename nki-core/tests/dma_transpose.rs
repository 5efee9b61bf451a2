//! `dma_transpose`: 2-D, 3-D and 4-D sources from HBM (whole tensors and strided views) and
//! from SBUF, against an independent NumPy-style `np.transpose(x, axes)`; its trace checks
//! (rank, axes, priority, shapes), its validation rules (target, dtype, PSUM, dge_mode,
//! oob_mode, the hardware DGE limits, priority's target), cost and codegen.

mod common;

use common::{run, values};
use nki_core::NkiError;
use nki_core::codegen::emit_nki;
use nki_core::cost::{Engine, estimate};
use nki_core::ir::Program;
use nki_core::lang::{InputSpec, trace};
use nki_core::prelude::*;
use nki_core::validate::validate;

/// One input `x` of any rank.
fn input_of(shape: &[usize], dtype: DType) -> Vec<InputSpec> {
    vec![InputSpec {
        name: "x".into(),
        shape: shape.to_vec(),
        dtype,
    }]
}

/// `np.transpose(x.reshape(dims), axes).flatten()`, walking the destination's indices.
fn reference(x: &[f32], dims: &[usize], axes: &[usize]) -> Vec<f32> {
    let out: Vec<usize> = axes.iter().map(|&a| dims[a]).collect();
    let strides: Vec<usize> = (0..dims.len())
        .map(|d| dims[d + 1..].iter().product())
        .collect();
    let total: usize = dims.iter().product();
    (0..total)
        .map(|flat| {
            let mut rem = flat;
            let mut at = 0;
            for i in (0..out.len()).rev() {
                at += (rem % out[i]) * strides[axes[i]];
                rem /= out[i];
            }
            x[at]
        })
        .collect()
}

/// The permuted dims of `dims`.
fn permuted(dims: &[usize]) -> Vec<usize> {
    dma_transpose_axes(dims.len())
        .unwrap()
        .iter()
        .map(|&a| dims[a])
        .collect()
}

/// `x` (shape `dims`, in `dtype`) transposed into an SBUF tile of the permuted dims, stored
/// to output 0; from HBM directly, or (`via_sbuf`) loaded into an SBUF tile of `dims` first.
fn transpose_program(dims: &[usize], dtype: DType, via_sbuf: bool, target: Target) -> Program {
    let dims = dims.to_vec();
    trace("k", target, &input_of(&dims, dtype), move |h| {
        let out_dims = permuted(&dims);
        let result = shared_hbm(&out_dims, dtype);
        let out = sbuf_dims(&out_dims, dtype);
        if via_sbuf {
            let x = sbuf_dims(&dims, dtype);
            dma_copy(&x, &h[0]);
            dma_transpose(&out, &x, DmaTransposeArgs::default());
        } else {
            dma_transpose(&out, &h[0], DmaTransposeArgs::default());
        }
        dma_copy(&result, &out);
        vec![result]
    })
    .unwrap()
}

/// An SBUF tile of 2 to 4 dims.
fn sbuf_dims(dims: &[usize], dtype: DType) -> Tile {
    match dims {
        [a, b] => sbuf([*a, *b], dtype),
        [a, b, c] => sbuf([*a, *b, *c], dtype),
        [a, b, c, d] => sbuf([*a, *b, *c, *d], dtype),
        _ => unreachable!("2 to 4 dims"),
    }
}

#[test]
fn transposes_two_three_and_four_dims_from_hbm_and_sbuf() {
    let shapes: &[&[usize]] = &[
        &[16, 128],
        &[130, 7],
        &[3, 5, 4],
        &[16, 2, 9],
        &[2, 3, 4, 5],
        &[1, 4, 2, 16],
    ];
    for dims in shapes {
        let axes = dma_transpose_axes(dims.len()).unwrap();
        let n: usize = dims.iter().product();
        for dtype in [DType::F32, DType::BF16] {
            let x: Vec<f32> = values(n, 7, 64.0).iter().map(|v| dtype.round(*v)).collect();
            let want = reference(&x, dims, axes);
            for via_sbuf in [false, true] {
                if via_sbuf && dims[0] > 128 {
                    continue; // an SBUF source has at most 128 partitions
                }
                let p = transpose_program(dims, dtype, via_sbuf, Target::Trn2);
                validate(&p).unwrap();
                let got = run(&p, &[&x]);
                assert_eq!(got[0], want, "{dims:?} {dtype} via_sbuf={via_sbuf}");
            }
        }
    }
}

#[test]
fn transposes_a_strided_view_and_a_region() {
    // Rows 2..18 and columns 1..9 of a [20, 12] tensor into a [8, 16] region of a bigger tile.
    let x = values(20 * 12, 3, 10.0);
    let p = trace("k", Target::Trn3, &input_of(&[20, 12], DType::F32), |h| {
        let result = shared_hbm(&[8, 16], DType::F32);
        let out = sbuf([32, 40], DType::F32);
        memset(&out, 0.0);
        let view = h[0].view().rows(2, 16).cols(1, 8);
        let region = out.region().slice(4, 8, 10, 16);
        dma_transpose(&region, view, DmaTransposeArgs::default());
        dma_copy(&result, &region);
        vec![result]
    })
    .unwrap();
    validate(&p).unwrap();
    let got = run(&p, &[&x]);
    let want: Vec<f32> = (0..8)
        .flat_map(|c| (0..16).map(move |r| (r, c)))
        .map(|(r, c)| x[(2 + r) * 12 + 1 + c])
        .collect();
    assert_eq!(got[0], want);
}

/// The trace error of a `dma_transpose` from a tile `[4, 8]` seen as `dims` into a `dst` of
/// `dst_shape`, with `args`.
fn trace_error(dims: &[usize], dst_shape: [usize; 2], args: DmaTransposeArgs) -> String {
    let dims = dims.to_vec();
    trace("k", Target::Trn3, &[], move |_| {
        let out = shared_hbm(&[1, 1], DType::F32);
        let x = sbuf([4, 8], DType::F32);
        memset(&x, 0.0);
        let y = sbuf(dst_shape, DType::F32);
        dma_transpose(&y, TransposeSrc::tile(x.region(), dims), args);
        vec![out]
    })
    .map(|_| ())
    .unwrap_err()
    .to_string()
}

#[test]
fn rank_axes_priority_and_shapes_are_checked_when_traced() {
    let d = DmaTransposeArgs::default;
    let e = trace_error(&[4, 2, 2, 1, 2], [2, 16], d());
    assert!(
        e.contains("dma_transpose: src has shape [4, 2, 2, 1, 2]; dma_transpose takes a 2-D, 3-D or 4-D source"),
        "{e}"
    );
    let e = trace_error(&[4, 4], [8, 4], d());
    assert!(
        e.contains("dma_transpose: src dims [4, 4] do not cover its region of [4, 8]"),
        "{e}"
    );
    let axes = DmaTransposeArgs {
        axes: Some(vec![0, 2, 1]),
        ..d()
    };
    let e = trace_error(&[4, 2, 4], [4, 8], axes);
    assert!(
        e.contains(
            "dma_transpose: axes=[0, 2, 1] for a 3-D src; the supported permutation is [2, 1, 0]"
        ),
        "{e}"
    );
    let e = trace_error(
        &[4, 8],
        [8, 4],
        DmaTransposeArgs {
            priority: Some(4),
            ..d()
        },
    );
    assert!(
        e.contains("dma_transpose: priority is 4; DMA priorities are 0..=3"),
        "{e}"
    );
    let e = trace_error(&[4, 8], [4, 8], d());
    assert!(
        e.contains(
            "dma_transpose: dst has shape [4, 8] but src [4, 8] transposed is [8, 4] ([8, 4])"
        ),
        "{e}"
    );
    // The rank's own axes are accepted.
    let ok = trace("k", Target::Trn3, &[], |_| {
        let out = shared_hbm(&[1, 1], DType::F32);
        let x = sbuf([4, 2, 4], DType::F32);
        memset(&x, 0.0);
        let y = sbuf([4, 2, 4], DType::F32);
        let axes = DmaTransposeArgs {
            axes: Some(vec![2, 1, 0]),
            ..d()
        };
        dma_transpose(&y, &x, axes);
        vec![out]
    });
    assert!(ok.is_ok());
}

/// A `[rows, cols]` `dtype` input transposed from HBM (or from an SBUF copy in `buffer`)
/// into a `dst_dtype` tile in `dst_buffer`, with `args`, on `target`.
fn variant(
    (rows, cols): (usize, usize),
    (dtype, dst_dtype): (DType, DType),
    (from_psum, dst_buffer_psum): (bool, bool),
    args: DmaTransposeArgs,
    target: Target,
) -> Program {
    trace("k", target, &input_of(&[rows, cols], dtype), move |h| {
        let result = shared_hbm(&[cols, rows], dst_dtype);
        let out = if dst_buffer_psum {
            psum([cols, rows], dst_dtype)
        } else {
            sbuf([cols, rows], dst_dtype)
        };
        if from_psum {
            let x = psum([rows, cols], dtype);
            memset(&x, 1.0);
            dma_transpose(&out, &x, args);
        } else {
            dma_transpose(&out, &h[0], args);
        }
        let copy = sbuf([cols, rows], dst_dtype);
        tensor_copy(&copy, &out);
        dma_copy(&result, &copy);
        vec![result]
    })
    .unwrap()
}

fn rule(p: &Program) -> (String, String, String) {
    match validate(p).unwrap_err() {
        NkiError::Validation(v) => (v.rule.to_string(), v.actual, v.message),
        e => panic!("{e}"),
    }
}

#[test]
fn validation_names_each_documented_rule() {
    let d = DmaTransposeArgs::default;
    let f32s = (DType::F32, DType::F32);
    let bf16s = (DType::BF16, DType::BF16);
    let hbm = (false, false);
    // NeuronCore-v3 and newer.
    let (r, actual, m) = rule(&variant((16, 8), f32s, hbm, d(), Target::Trn1));
    assert_eq!(r, "isa-target");
    assert!(actual.contains("NeuronCore-v2"), "{actual}");
    assert!(m.contains("dma_transpose needs NeuronCore-v3"), "{m}");
    // One dtype on both sides.
    let (r, actual, m) = rule(&variant(
        (16, 8),
        (DType::F32, DType::BF16),
        hbm,
        d(),
        Target::Trn2,
    ));
    assert_eq!(
        (r.as_str(), actual.as_str()),
        ("dma-transpose-dtype", "bf16")
    );
    assert!(m.contains("src is f32 but dst t0 is bf16"), "{m}");
    // DMA never reaches PSUM, on either side.
    let (r, _, m) = rule(&variant((16, 8), f32s, (false, true), d(), Target::Trn2));
    assert_eq!(r, "dma-psum");
    assert!(m.contains("dst t0"), "{m}");
    let (r, _, m) = rule(&variant((16, 8), f32s, (true, false), d(), Target::Trn2));
    assert_eq!(r, "dma-psum");
    assert!(m.contains("src t1"), "{m}");
    // dge_mode: unknown or hwdge for a direct source (and none, which AWS's library passes).
    let args = DmaTransposeArgs {
        dge_mode: DgeMode::Swdge,
        ..d()
    };
    let (r, actual, _) = rule(&variant((16, 8), bf16s, hbm, args, Target::Trn2));
    assert_eq!(
        (r.as_str(), actual.as_str()),
        ("dma-transpose-dge-mode", "swdge")
    );
    let none = DmaTransposeArgs {
        dge_mode: DgeMode::None,
        ..d()
    };
    validate(&variant((16, 8), bf16s, hbm, none, Target::Trn2)).unwrap();
    let skip = DmaTransposeArgs {
        oob_mode: OobMode::Skip,
        ..d()
    };
    let (r, actual, m) = rule(&variant((16, 8), bf16s, hbm, skip, Target::Trn2));
    assert_eq!(
        (r.as_str(), actual.as_str()),
        ("dma-transpose-oob-mode", "skip")
    );
    assert!(m.contains("only valid for an indirect source"), "{m}");
    // The hardware DGE's limits.
    let hwdge = || DmaTransposeArgs {
        dge_mode: DgeMode::Hwdge,
        ..d()
    };
    validate(&variant((16, 128), bf16s, hbm, hwdge(), Target::Trn2)).unwrap();
    let (r, actual, m) = rule(&variant((8, 16), bf16s, hbm, hwdge(), Target::Trn2));
    assert_eq!((r.as_str(), actual.as_str()), ("dma-transpose-hwdge", "8"));
    assert!(m.contains("a 2-D src must have 16 rows"), "{m}");
    // "src.shape[-1] <= 128" is the destination's partition limit.
    let (r, actual, _) = rule(&variant((16, 130), bf16s, hbm, hwdge(), Target::Trn2));
    assert_eq!((r.as_str(), actual.as_str()), ("partition-dim", "130"));
    let (r, actual, m) = rule(&variant((16, 8), f32s, hbm, hwdge(), Target::Trn2));
    assert_eq!(
        (r.as_str(), actual.as_str()),
        ("dma-transpose-hwdge", "f32")
    );
    assert!(m.contains("moves 2-byte elements"), "{m}");
    // priority is NeuronCore-v4 and newer.
    let prio = || DmaTransposeArgs {
        priority: Some(1),
        ..d()
    };
    let (r, actual, _) = rule(&variant((16, 8), f32s, hbm, prio(), Target::Trn2));
    assert_eq!(r, "dma-priority-target");
    assert!(actual.contains("NeuronCore-v3"), "{actual}");
    validate(&variant((16, 8), f32s, hbm, prio(), Target::Trn3)).unwrap();
}

#[test]
fn the_hardware_dge_limits_of_three_and_four_dims() {
    let hwdge = DmaTransposeArgs {
        dge_mode: DgeMode::Hwdge,
        ..DmaTransposeArgs::default()
    };
    let check = |dims: &[usize]| {
        let dims = dims.to_vec();
        let args = hwdge.clone();
        let p = trace("k", Target::Trn2, &input_of(&dims, DType::BF16), move |h| {
            let out_dims = permuted(&dims);
            let result = shared_hbm(&out_dims, DType::BF16);
            let out = sbuf_dims(&out_dims, DType::BF16);
            dma_transpose(&out, &h[0], args);
            dma_copy(&result, &out);
            vec![result]
        })
        .unwrap();
        validate(&p).map_err(|e| match e {
            NkiError::Validation(v) => v.rule,
            e => panic!("{e}"),
        })
    };
    assert_eq!(check(&[2, 8, 64]), Ok(()));
    assert_eq!(check(&[4, 1, 4, 32]), Ok(()));
    assert_eq!(check(&[3, 16, 8]), Err("dma-transpose-hwdge"));
    assert_eq!(check(&[2, 3, 4]), Err("dma-transpose-hwdge"));
}

#[test]
fn runs_on_all_dma_engines_no_faster_than_a_copy_and_emits_its_nki_call() {
    let p = transpose_program(&[64, 128], DType::BF16, false, Target::Trn2);
    let report = estimate(&p);
    let slice = |name: &str| {
        report
            .slices
            .iter()
            .find(|s| s.name == name)
            .map(|s| (s.engine, s.end_ns - s.start_ns))
            .unwrap()
    };
    let (engine, transpose_ns) = slice("dma_transpose");
    assert!(matches!(engine, Engine::Dma(_)), "{engine:?}");
    // The store moves the same bytes contiguously.
    let (_, store_ns) = slice("dma_copy");
    // At most 90% of a copy's throughput (the Trainium2 guide); this one is small enough to be
    // latency-bound like the store.
    assert!(transpose_ns >= store_ns, "{transpose_ns} vs {store_ns}");
    let t = report
        .slices
        .iter()
        .find(|s| s.name == "dma_transpose")
        .unwrap();
    assert_eq!(t.tracks().len(), 16);
    // A large one streams at 90% of the rate: [128, 8192] bf16 is 2 MiB over 16 engines.
    let big = estimate(&transpose_program(
        &[8192, 128],
        DType::BF16,
        false,
        Target::Trn2,
    ));
    let t = big
        .slices
        .iter()
        .find(|s| s.name == "dma_transpose")
        .unwrap();
    let want = 2.0 * 1024.0 * 1024.0 / 16.0 / 0.9 / 23.0 + 52.0;
    assert!((t.end_ns - t.start_ns - want).abs() < 1e-6, "{t:?}");
    let source = emit_nki(&p);
    assert!(
        source.contains("nisa.dma_transpose(dst=t0, src=x[0:64, 0:128], axes=(1, 0))"),
        "{source}"
    );
    let p = transpose_program(&[2, 3, 4], DType::F32, false, Target::Trn2);
    let source = emit_nki(&p);
    assert!(
        source.contains(
            "nisa.dma_transpose(dst=t0.reshape((4, 3, 2)), src=x.ap(pattern=[[12, 2], [4, 3], \
             [1, 4]], offset=0), axes=(2, 1, 0))"
        ),
        "{source}"
    );
    let p = transpose_program(&[2, 3, 4, 5], DType::F32, true, Target::Trn2);
    let source = emit_nki(&p);
    assert!(
        source.contains(
            "nisa.dma_transpose(dst=t0.reshape((5, 3, 4, 2)), src=t1.reshape((2, 3, 4, 5)), \
             axes=(3, 1, 2, 0))"
        ),
        "{source}"
    );
    let args = DmaTransposeArgs {
        priority: Some(2),
        dge_mode: DgeMode::Hwdge,
        ..DmaTransposeArgs::default()
    };
    let p = variant(
        (16, 8),
        (DType::BF16, DType::BF16),
        (false, false),
        args,
        Target::Trn3,
    );
    let source = emit_nki(&p);
    assert!(
        source.contains(
            "nisa.dma_transpose(dst=t0, src=x[0:16, 0:8], axes=(1, 0), priority=2, \
             dge_mode=nisa.dge_mode.hwdge)"
        ),
        "{source}"
    );
}
