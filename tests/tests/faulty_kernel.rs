//! A deliberately faulty kernel: a 256-partition tile must fail validation with the rule, the
//! limit, the actual value and the kernel source line.

use nki_core::prelude::*;
use nki_core::{NkiError, Signature, Target};
use nki_registry::CompileCache;

/// Copies x through one SBUF tile with 256 partitions (twice the hardware's 128).
#[kernel(shape(x = [N, D]) -> [N, D], dtype(x in {f32}) -> x)]
pub fn too_many_partitions(x: &Hbm) -> Hbm {
    let out = shared_hbm(x.shape(), x.dtype());
    let t = sbuf([x.dim(0), x.dim(1)], x.dtype()); // the faulty line
    dma_copy(&t, x);
    dma_copy(&out, &t);
    out
}

fn faulty_line() -> u32 {
    let src = include_str!("faulty_kernel.rs");
    src.lines()
        .position(|l| l.contains("// the faulty line"))
        .unwrap() as u32
        + 1
}

#[test]
fn faulty_kernel_fails_validation_naming_rule_limit_and_line() {
    let sig = Signature::new(&[(&[256, 64], DType::F32)], &[], Target::Trn2);
    let err = CompileCache::global()
        .get_or_compile(&TOO_MANY_PARTITIONS_KERNEL, &sig)
        .unwrap_err();
    let NkiError::Validation(v) = &err else {
        panic!("expected a validation error, got {err}")
    };
    let (rule, limit, actual, loc) = (&v.rule, &v.limit, &v.actual, &v.loc);
    assert_eq!(
        (*rule, limit.as_str(), actual.as_str()),
        ("partition-dim", "128", "256")
    );
    assert_eq!(
        (loc.file, loc.line),
        ("tests/tests/faulty_kernel.rs", faulty_line())
    );
    nki_tests::assert_snapshot!(err.to_string());
    // The kernel-authoring guide quotes this exact message; keep it true.
    let guide = include_str!("../../docs/kernel-authoring.md");
    assert!(
        guide.contains(&err.to_string()),
        "docs/kernel-authoring.md quotes a stale message"
    );
}

#[test]
fn the_same_kernel_passes_when_the_rows_fit_the_partitions() {
    let sig = Signature::new(&[(&[128, 64], DType::F32)], &[], Target::Trn2);
    let compiled = CompileCache::global()
        .get_or_compile(&TOO_MANY_PARTITIONS_KERNEL, &sig)
        .unwrap();
    // And it does what it says: the output is a copy of the input.
    let x: Vec<u8> = (0..128 * 64)
        .flat_map(|i| (i as f32 * 0.25 - 7.0).to_le_bytes())
        .collect();
    let out = compiled.simulate_to_vecs(&[&x], true).unwrap();
    assert!(out == [x], "the copy changed the values");
}
