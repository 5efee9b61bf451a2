//! Every validation rule rejects a program that breaks it, naming rule, limit, actual value,
//! instruction and source line.

use nki_core::ir::Program;
use nki_core::lang::{InputSpec, trace};
use nki_core::prelude::*;
use nki_core::validate::validate;
use nki_core::{NkiError, Target};

fn program(target: Target, body: impl FnOnce(&Hbm) -> Hbm) -> Program {
    let inputs = [InputSpec {
        name: "x".into(),
        shape: vec![256, 1024],
        dtype: DType::F32,
    }];
    trace("k", target, &inputs, |h| vec![body(&h[0])]).unwrap()
}

/// Writes zeros to all of a `[256, 1024]` f32 output, so the coverage check is satisfied and
/// the instruction under test is the only thing wrong.
fn fill(out: &Hbm) {
    let full = sbuf([128, 1024], DType::F32);
    memset(&full, 0.0);
    for r in [0usize, 128] {
        dma_copy(out.rows(r, 128), &full);
    }
}

fn rule_of(p: &Program) -> (&'static str, String, String, u32) {
    match validate(p).unwrap_err() {
        NkiError::Validation(v) => (v.rule, v.limit, v.actual, v.loc.line),
        other => panic!("expected a validation error, got {other}"),
    }
}

#[test]
fn partition_dim_over_128() {
    let mut line = 0;
    let p = program(Target::Trn2, |x| {
        let out = shared_hbm(&[256, 1024], DType::F32);
        line = line!() + 1;
        let t = sbuf([256, 1024], DType::F32);
        dma_copy(&t, x);
        dma_copy(&out, &t);
        out
    });
    assert_eq!(
        rule_of(&p),
        ("partition-dim", "128".into(), "256".into(), line)
    );
    let msg = validate(&p).unwrap_err().to_string();
    assert!(msg.contains(&format!("{}:{line}", file!())), "{msg}");
}

#[test]
fn matmul_limits_buffers_and_dtypes() {
    let p = program(Target::Trn2, |x| {
        let out = shared_hbm(&[256, 1024], DType::F32);
        let a = sbuf([128, 128], DType::F32);
        let b = sbuf([128, 1024], DType::F32);
        dma_copy(&a, x.rows(0usize, 128).cols(0usize, 128));
        dma_copy(&b, x.rows(0usize, 128));
        let acc = psum([128, 512], DType::F32);
        nc_matmul(&acc, &a, b.cols(0, 512), false);
        let wide = sbuf([128, 1024], DType::F32);
        nc_matmul(&wide, &a, &b, false);
        out
    });
    assert_eq!(rule_of(&p).0, "matmul-moving-free");
    let p = program(Target::Trn2, |x| {
        let out = shared_hbm(&[256, 1024], DType::F32);
        let a = sbuf([128, 128], DType::F32);
        dma_copy(&a, x.rows(0usize, 128).cols(0usize, 128));
        let acc = sbuf([128, 128], DType::F32);
        nc_matmul(&acc, &a, &a, false);
        out
    });
    assert_eq!(rule_of(&p).0, "matmul-dst-psum");
    let body = |x: &Hbm| {
        let out = shared_hbm(&[256, 1024], DType::F32);
        let a = sbuf([128, 128], DType::BF16);
        let acc = psum([128, 128], DType::BF16);
        memset(&a, 1.0);
        let _ = x;
        nc_matmul(&acc, &a, &a, false);
        out
    };
    let (rule, limit, actual, _) = rule_of(&program(Target::Trn2, body));
    assert_eq!(
        (rule, limit.as_str(), actual.as_str()),
        ("matmul-dst-dtype", "f32", "bf16")
    );
    validate(&program(Target::Trn3, body)).expect("Trn3 may write bf16 PSUM");
}

#[test]
fn transpose_mode_writes_the_sources_16_bit_dtype_to_psum() {
    let transpose = |source: DType, dst: DType| {
        move |_: &Hbm| {
            let out = shared_hbm(&[1, 1], DType::F32);
            let a = sbuf([128, 64], source);
            let identity = sbuf([128, 128], source);
            let t = psum([64, 128], dst);
            memset(&a, 1.0);
            memset(&identity, 1.0);
            nc_matmul_is_transpose(&t, (&a, &identity), MatmulTiling::default(), false);
            out
        }
    };
    for dtype in [DType::BF16, DType::F16] {
        validate(&program(Target::Trn2, transpose(dtype, dtype)))
            .unwrap_or_else(|e| panic!("a {dtype} transpose into {dtype} PSUM: {e}"));
    }
    let (rule, limit, actual, _) =
        rule_of(&program(Target::Trn2, transpose(DType::BF16, DType::F16)));
    assert_eq!(
        (rule, limit.as_str(), actual.as_str()),
        (
            "matmul-dst-dtype",
            "f32, or the source's 16-bit dtype in transpose mode",
            "f16"
        )
    );
    // NeuronCore-v2 has no transpose mode: the flag only marks the instruction.
    let (rule, ..) = rule_of(&program(Target::Trn1, transpose(DType::BF16, DType::BF16)));
    assert_eq!(rule, "matmul-dst-dtype");
}

#[test]
fn psum_bank_and_bank_count() {
    // A PSUM tile may span banks; a tensor-engine write may not.
    let matmul_into = |f0: usize| {
        move |_: &Hbm| {
            let out = shared_hbm(&[1, 1], DType::F32);
            let t = psum([128, 1024], DType::F32);
            let a = sbuf([128, 128], DType::BF16);
            let b = sbuf([128, 512], DType::BF16);
            memset(&t, 0.0);
            memset(&a, 1.0);
            memset(&b, 1.0);
            nc_matmul(t.cols(f0, 512), &a, &b, false);
            out
        }
    };
    validate(&program(Target::Trn2, matmul_into(512))).expect("the second bank of a two-bank tile");
    let (rule, limit, actual, _) = rule_of(&program(Target::Trn2, matmul_into(256)));
    assert_eq!(
        (rule, limit.as_str(), actual.as_str()),
        (
            "psum-bank",
            "2048 B bank per partition",
            "bytes 1024..=3071"
        )
    );
    let mut line = 0;
    let p = program(Target::Trn2, |_| {
        let out = shared_hbm(&[1, 1], DType::F32);
        line = line!() + 1;
        let t = psum([128, 4097], DType::F32);
        memset(&t, 0.0);
        out
    });
    assert_eq!(
        rule_of(&p),
        (
            "psum-capacity",
            "16384 B per partition".into(),
            "16388 B".into(),
            line
        )
    );
    let p = program(Target::Trn2, |_| {
        let out = shared_hbm(&[1, 1], DType::F32);
        let tiles: Vec<Tile> = (0..9).map(|_| psum([128, 512], DType::F32)).collect();
        for t in &tiles {
            memset(t, 0.0);
        }
        out
    });
    assert_eq!(rule_of(&p).0, "psum-banks-live");
}

#[test]
fn sbuf_capacity_counts_live_tiles_per_target() {
    // Three live [128, 16384] fp32 tiles need 192 KiB per partition: fits Trn2 (224 KiB),
    // not Trn1 (192 KiB) once a fourth small tile is live too.
    let body = |_: &Hbm| {
        let out = shared_hbm(&[1, 1], DType::F32);
        let tiles: Vec<Tile> = (0..3).map(|_| sbuf([128, 16384], DType::F32)).collect();
        let small = sbuf([128, 1], DType::F32);
        for t in &tiles {
            memset(t, 0.0);
        }
        memset(&small, 0.0);
        out
    };
    validate(&program(Target::Trn2, body)).unwrap();
    let (rule, limit, actual, _) = rule_of(&program(Target::Trn1, body));
    assert_eq!(
        (rule, limit.as_str(), actual.as_str()),
        (
            "sbuf-capacity",
            "196608 B per partition on trn1",
            "196612 B"
        )
    );
    // Tiles allocated inside a loop body die with the iteration: no accumulation across trips.
    let p = program(Target::Trn1, |_| {
        let out = shared_hbm(&[1, 1], DType::F32);
        affine_range(8, |_| {
            let t = sbuf([128, 32768], DType::F32);
            memset(&t, 0.0);
        });
        out
    });
    validate(&p).unwrap();
}

#[test]
fn dma_cannot_touch_psum_and_tiles_stay_in_scope() {
    let p = program(Target::Trn2, |x| {
        let out = shared_hbm(&[128, 512], DType::F32);
        let t = psum([128, 512], DType::F32);
        dma_copy(&t, x.rows(0usize, 128).cols(0usize, 512));
        out
    });
    assert_eq!(rule_of(&p).0, "dma-psum");
    let p = program(Target::Trn2, |_| {
        let out = shared_hbm(&[4, 4], DType::F32);
        let mut escaped = None;
        affine_range(2, |_| escaped = Some(sbuf([4, 4], DType::F32)));
        memset(escaped.unwrap(), 0.0);
        out
    });
    assert_eq!(rule_of(&p).0, "tile-scope");
    // A body that runs once has one tile: it stays valid after the loop.
    let p = program(Target::Trn2, |x| {
        let out = shared_hbm(&[4, 4], DType::F32);
        let mut kept = None;
        affine_range(1, |_| kept = Some(sbuf([4, 4], DType::F32)));
        let kept = kept.unwrap();
        dma_copy(&kept, x.rows(0usize, 4).cols(0usize, 4));
        dma_copy(out.rows(0usize, 4).cols(0usize, 4), &kept);
        out
    });
    validate(&p).unwrap();
}

#[test]
fn nc_transpose_follows_the_tensor_engine_rules() {
    let mut line = 0;
    let p = program(Target::Trn2, |x| {
        let out = shared_hbm(&[256, 1024], DType::F32);
        let t = sbuf([128, 128], DType::F32);
        dma_copy(&t, x.rows(0usize, 128).cols(0usize, 128));
        let wrong = sbuf([128, 128], DType::F32);
        line = line!() + 1;
        nc_transpose(&wrong, &t);
        fill(&out);
        out
    });
    assert_eq!(
        rule_of(&p),
        ("matmul-dst-psum", "psum".into(), "sbuf".into(), line)
    );
}

#[test]
fn nc_transpose_keeps_its_source_dtype() {
    let mut line = 0;
    let p = program(Target::Trn2, |x| {
        let out = shared_hbm(&[256, 1024], DType::F32);
        let t = sbuf([128, 128], DType::BF16);
        let staged = sbuf([128, 128], DType::F32);
        dma_copy(&staged, x.rows(0usize, 128).cols(0usize, 128));
        tensor_copy(&t, &staged);
        let widened = psum([128, 128], DType::F32);
        line = line!() + 1;
        nc_transpose(&widened, &t);
        fill(&out);
        out
    });
    assert_eq!(
        rule_of(&p),
        ("transpose-dst-dtype", "bf16".into(), "f32".into(), line)
    );
}

/// A valid program writing zeros to a `[4, 8]` output through one tile: the starting point
/// for hand edits that break one rule.
fn zeros_4x8() -> Program {
    program(Target::Trn2, |_| {
        let out = shared_hbm(&[4, 8], DType::F32);
        let t = sbuf([4, 8], DType::F32);
        memset(&t, 0.0);
        dma_copy(&out, &t);
        out
    })
}

/// The region of the first memset in `p`'s body.
fn memset_region(p: &mut Program) -> &mut nki_core::ir::TileRegion {
    p.body
        .iter_mut()
        .find_map(|s| match s {
            nki_core::ir::Stmt::Inst(i) => match &mut i.op {
                nki_core::ir::Op::Memset { dst, .. } => Some(dst),
                _ => None,
            },
            _ => None,
        })
        .expect("the program has a memset")
}

#[test]
fn tile_operands_stay_inside_their_tiles() {
    // A hand-edited program: the memset's region reaches past the tile's free size (the
    // simulator's storage may be longer than the tile, so nothing else would notice).
    let mut p = zeros_4x8();
    assert!(validate(&p).is_ok());
    memset_region(&mut p).f0 = 4;
    let (rule, limit, actual, _) = rule_of(&p);
    assert_eq!(
        (rule, limit.as_str(), actual.as_str()),
        ("tile-region", "[4, 8]", "partitions 0..4, elements 4..12")
    );
    // A region whose end overflows, and a tile the program does not declare.
    memset_region(&mut p).f0 = usize::MAX;
    assert_eq!(rule_of(&p).0, "tile-region");
    let region = memset_region(&mut p);
    region.f0 = 0;
    region.tile = nki_core::ir::TileId(99);
    let (rule, _, actual, _) = rule_of(&p);
    assert_eq!((rule, actual.as_str()), ("tile-region", "tile 99"));
}

#[test]
fn hbm_tensors_fit_the_host() {
    let mut p = zeros_4x8();
    // 2^31 × 2^31 fp32 elements: 2^64 bytes, past any address space.
    p.hbm[1].shape = vec![1 << 31, 1 << 31];
    assert_eq!(rule_of(&p).0, "hbm-size");
}
