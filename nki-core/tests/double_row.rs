//! `nc_matmul` in double FP8 mode (`perf_mode=double_row`): the values are the two halves'
//! products summed, its tensor-engine time is that of an ordinary matmul over half the
//! contraction (the Trainium2 architecture guide), the operands the docs allow, and the
//! generated NKI seeing each operand as `[K/2, 2, free]`.

mod common;

use common::{run, values};
use nki_core::NkiError;
use nki_core::codegen::emit_nki;
use nki_core::cost::{Engine, estimate};
use nki_core::ir::Program;
use nki_core::lang::{InputSpec, trace};
use nki_core::prelude::*;
use nki_core::validate::validate;

const HALF_K: usize = 128;
const M: usize = 128;
const N: usize = 512;

fn spec(name: &str, shape: [usize; 2], dtype: DType) -> InputSpec {
    InputSpec {
        name: name.into(),
        shape: shape.to_vec(),
        dtype,
    }
}

/// `out[M, N] = Σ_p Σ_j s[p, j, :]ᵀ · m[p, j, :]`: `s` `[K/2, 2·M]` and `m` `[K/2, 2·N]` (the
/// `[K/2, 2, free]` operands with their free dims flattened), one double-row matmul.
fn double_row(
    target: Target,
    dtypes: (DType, DType),
    tile_size: Vec<usize>,
) -> Result<Program, NkiError> {
    let inputs = [
        spec("s", [HALF_K, 2 * M], dtypes.0),
        spec("m", [HALF_K, 2 * N], dtypes.1),
    ];
    trace("k", target, &inputs, move |h| {
        let out = shared_hbm(&[M, N], DType::F32);
        let (s, m) = (
            sbuf([HALF_K, 2 * M], dtypes.0),
            sbuf([HALF_K, 2 * N], dtypes.1),
        );
        dma_copy(&s, &h[0]);
        dma_copy(&m, &h[1]);
        let acc = psum([M, N], DType::F32);
        let tile_position = if tile_size.is_empty() {
            vec![]
        } else {
            vec![0, 0]
        };
        let tiling = MatmulTiling {
            tile_position,
            tile_size,
        };
        nc_matmul_double_row(&acc, (&s, &m), tiling, false);
        let res = sbuf([M, N], DType::F32);
        tensor_copy(&res, &acc);
        dma_copy(&out, &res);
        vec![out]
    })
}

const FP8: (DType, DType) = (DType::F8E4M3, DType::F8E5M2);

#[test]
fn the_result_is_the_two_halves_products_summed() {
    let p = double_row(Target::Trn2, FP8, vec![]).unwrap();
    validate(&p).unwrap();
    let s: Vec<f32> = values(HALF_K * 2 * M, 1, 8.0)
        .into_iter()
        .map(|v| FP8.0.round(v))
        .collect();
    let m: Vec<f32> = values(HALF_K * 2 * N, 2, 8.0)
        .into_iter()
        .map(|v| FP8.1.round(v))
        .collect();
    let got = &run(&p, &[&s, &m])[0];
    for (i, j) in [(0, 0), (5, 77), (M - 1, N - 1), (64, 300)] {
        let want: f64 = (0..HALF_K)
            .flat_map(|p| (0..2).map(move |h| (p, h)))
            .map(|(p, h)| s[p * 2 * M + h * M + i] as f64 * m[p * 2 * N + h * N + j] as f64)
            .sum();
        let tolerance = 1e-5 * (1.0 + want.abs());
        assert!(
            (got[i * N + j] as f64 - want).abs() <= tolerance,
            "({i}, {j})"
        );
    }
}

#[test]
fn it_takes_the_tensor_engine_time_of_an_ordinary_matmul_over_half_the_contraction() {
    let p = double_row(Target::Trn2, FP8, vec![]).unwrap();
    let r = estimate(&p);
    let matmuls: Vec<_> = r.slices.iter().filter(|s| s.name == "nc_matmul").collect();
    assert_eq!(matmuls.len(), 1, "one instruction");
    assert_eq!(matmuls[0].engine, Engine::Tensor);
    // N columns streamed plus the LoadStationary of M columns (four per cycle) at 2.4 GHz:
    // what a bf16 matmul of [128, 128] by [128, 512] takes (tests/cost.rs).
    let ns = matmuls[0].end_ns - matmuls[0].start_ns;
    let want = (N as f64 + M as f64 / 4.0) / 2.4;
    assert!((ns - want).abs() < 1e-6 * want, "{ns} vs {want}");
    assert_eq!(r.flops, 2.0 * (2 * HALF_K * M * N) as f64);
}

#[test]
fn it_needs_neuroncore_v3_and_the_whole_array_columns() {
    let message = |r: Result<Program, NkiError>| match r {
        Err(NkiError::Trace { message, .. }) => message,
        other => panic!("expected a trace error, got {other:?}"),
    };
    let trn1 = message(double_row(Target::Trn1, FP8, vec![]));
    assert!(
        trn1.contains("double_row needs NeuronCore-v3 or newer, not trn1"),
        "{trn1}"
    );
    let tiled = message(double_row(Target::Trn2, FP8, vec![128, 64]));
    assert!(
        tiled.contains("cannot be combined with column tiling"),
        "{tiled}"
    );
    double_row(Target::Trn2, FP8, vec![64, 128]).expect("row tiling is allowed");
}

#[test]
fn it_takes_float8_operands_as_the_docs_list_them() {
    let rule = |target, dtypes| {
        let p = double_row(target, dtypes, vec![]).unwrap();
        match validate(&p) {
            Ok(_) => None,
            Err(NkiError::Validation(v)) => Some((v.rule, v.actual.clone())),
            Err(e) => panic!("{e}"),
        }
    };
    let bf16 = rule(Target::Trn2, (DType::BF16, DType::F8E4M3));
    assert_eq!(
        bf16,
        Some((
            "matmul-double-row-dtype",
            "stationary bfloat16, moving float8_e4m3".into()
        ))
    );
    // OCP float8_e4m3fn from NeuronCore-v4, but never with the legacy float8_e4m3.
    let ocp = (DType::F8E4M3FN, DType::F8E5M2);
    assert!(rule(Target::Trn2, ocp).is_some());
    assert_eq!(rule(Target::Trn3, ocp), None);
    let mixed = rule(Target::Trn3, (DType::F8E4M3FN, DType::F8E4M3));
    assert_eq!(mixed.map(|(r, _)| r), Some("matmul-double-row-dtype"));
}

#[test]
fn the_generated_nki_sees_each_operand_as_a_pair_of_halves() {
    let p = double_row(Target::Trn2, FP8, vec![]).unwrap();
    let source = emit_nki(&p);
    let call = "nisa.nc_matmul(dst=t2, \
                stationary=t0.ap(pattern=[[256, 128], [128, 2], [1, 128]], offset=0), \
                moving=t1.ap(pattern=[[1024, 128], [512, 2], [1, 512]], offset=0), \
                accumulate=False, perf_mode=nisa.matmul_perf_mode.double_row)";
    assert!(source.contains(call), "{source}");
}
