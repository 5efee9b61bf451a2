//! `dma_copy` with `reinterpret` (the copy that keeps a dtype view in step with the memory it
//! views): the bytes move unchanged between tiles of dtypes of different widths, both ways;
//! sides that differ in rows or bytes per row, or in the kind of memory, are a trace error; the
//! cost model charges nothing for it.

mod common;

use common::{run, values};
use nki_core::cost::estimate;
use nki_core::ir::Program;
use nki_core::lang::{InputSpec, trace};
use nki_core::prelude::*;
use nki_core::validate::validate;

fn input(shape: &[usize], dtype: DType) -> Vec<InputSpec> {
    vec![InputSpec {
        name: "x".into(),
        shape: shape.to_vec(),
        dtype,
    }]
}

const VIEW: DmaCopyArgs = DmaCopyArgs {
    oob_mode: OobMode::Error,
    reinterpret: true,
};

/// An fp32 `[4, 8]` input seen as bf16 `[4, 16]` (stored as bf16), and that seen as fp32 again
/// (stored as fp32).
fn fp32_as_bf16() -> Program {
    trace("k", Target::Trn2, &input(&[4, 8], DType::F32), |h| {
        let halves = shared_hbm(&[4, 16], DType::BF16);
        let again = shared_hbm(&[4, 8], DType::F32);
        let t = sbuf([4, 8], DType::F32);
        dma_copy(&t, &h[0]);
        let b = sbuf([4, 16], DType::BF16);
        dma_copy_with(&b, &t, VIEW);
        dma_copy(&halves, &b);
        let f = sbuf([4, 8], DType::F32);
        dma_copy_with(&f, &b, VIEW);
        dma_copy(&again, &f);
        vec![halves, again]
    })
    .unwrap()
}

/// The bf16 halves of each fp32, low half first (little-endian), as values.
fn halves(x: &[f32]) -> Vec<f32> {
    x.iter()
        .flat_map(|v| {
            let bits = v.to_bits();
            [bits & 0xFFFF, bits >> 16].map(|h| f32::from_bits(h << 16))
        })
        .collect()
}

#[test]
fn moves_the_bytes_between_dtypes_of_different_widths() {
    // fp32 values whose low halves are finite bf16s: bf16 pairs read as fp32.
    let pairs: Vec<f32> = values(64, 5, 8.0)
        .iter()
        .map(|v| DType::BF16.round(*v))
        .collect();
    let x: Vec<f32> = pairs
        .chunks(2)
        .map(|p| f32::from_bits((p[0].to_bits() >> 16) | (p[1].to_bits() & 0xFFFF_0000)))
        .collect();
    let p = fp32_as_bf16();
    validate(&p).unwrap();
    let got = run(&p, &[&x]);
    assert_eq!(got[0], halves(&x));
    assert_eq!(got[0], pairs);
    assert_eq!(got[1], x);
}

#[test]
fn sides_of_other_bytes_per_row_are_a_trace_error() {
    let err = trace("k", Target::Trn2, &input(&[4, 8], DType::F32), |h| {
        let a = sbuf([4, 8], DType::BF16);
        dma_copy_with(&a, &h[0], VIEW);
        vec![]
    })
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("dma_copy (reinterpreting): a view is the same memory"),
        "{err}"
    );
    let err = trace("k", Target::Trn2, &input(&[4, 8], DType::F32), |h| {
        let t = sbuf([4, 8], DType::F32);
        dma_copy(&t, &h[0]);
        let a = sbuf([4, 8], DType::BF16);
        dma_copy_with(&a, &t, VIEW);
        vec![]
    })
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("dma_copy (reinterpreting): dst [4, 8] BF16 and src [4, 8] F32"),
        "{err}"
    );
}

#[test]
fn costs_nothing() {
    let p = fp32_as_bf16();
    let e = estimate(&p);
    // Three transfers (the load and the two stores); the two view copies run nowhere.
    let names: Vec<&str> = e.slices.iter().map(|s| s.name).collect();
    assert_eq!(names, ["dma_copy"; 3], "{names:?}");
    assert_eq!(e.hbm_read_bytes, 4.0 * 8.0 * 4.0);
}
