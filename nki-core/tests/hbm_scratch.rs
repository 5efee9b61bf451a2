//! Scratch in device memory: `private_hbm` tensors and `shared_hbm` tensors a kernel allocates
//! but does not return. Neither is a parameter or a result; the simulator gives each zeroed
//! storage for the call; codegen allocates them in the buffer they came from.

mod common;

use common::run;
use nki_core::codegen::emit_nki;
use nki_core::ir::HbmKind;
use nki_core::lang::{InputSpec, trace};
use nki_core::prelude::*;
use nki_core::validate::validate;

/// `out = x + x + 0`, by way of a scratch tensor (`private`: `private_hbm`, else an unreturned
/// `shared_hbm`) that is read once before it is written (so it must start zeroed).
fn program(private: bool) -> nki_core::ir::Program {
    let inputs = vec![InputSpec {
        name: "x".into(),
        shape: vec![2, 3],
        dtype: DType::F32,
    }];
    trace("k", Target::Trn2, &inputs, move |h| {
        let out = shared_hbm(&[2, 3], DType::F32);
        let scratch = if private {
            private_hbm(&[2, 3], DType::F32)
        } else {
            shared_hbm(&[2, 3], DType::F32)
        };
        let (t, z) = (sbuf([2, 3], DType::F32), sbuf([2, 3], DType::F32));
        dma_copy(&z, &scratch);
        dma_copy(&t, &h[0]);
        tensor_tensor(&t, &t, &t, BinOp::Add);
        tensor_tensor(&t, &t, &z, BinOp::Add);
        dma_copy(&scratch, &t);
        dma_copy(&z, &scratch);
        dma_copy(&out, &z);
        vec![out]
    })
    .unwrap()
}

#[test]
fn scratch_is_neither_parameter_nor_result_and_starts_zeroed() {
    for (private, kind) in [
        (true, HbmKind::PrivateScratch),
        (false, HbmKind::SharedScratch),
    ] {
        let p = program(private);
        validate(&p).unwrap();
        assert_eq!(p.inputs().count(), 1);
        assert_eq!(p.outputs.len(), 1);
        assert_eq!(p.hbm[2].kind, kind);
        let x = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let want: Vec<f32> = x.iter().map(|v| 2.0 * v).collect();
        assert_eq!(run(&p, &[&x])[0], want);
        assert_eq!(
            run(&p, &[&x])[0],
            want,
            "a second call starts from zeroed scratch again"
        );
    }
}

#[test]
fn codegen_allocates_scratch_in_its_buffer() {
    let private = emit_nki(&program(true));
    assert!(
        private.contains("scratch0 = nl.ndarray((2, 3), dtype=nl.float32, buffer=nl.private_hbm)"),
        "{private}"
    );
    let shared = emit_nki(&program(false));
    assert!(
        shared.contains("out1 = nl.ndarray((2, 3), dtype=nl.float32, buffer=nl.shared_hbm)"),
        "{shared}"
    );
    assert!(shared.contains("return out0\n"), "{shared}");
}

#[test]
fn returning_private_scratch_is_a_trace_error() {
    let err = trace("k", Target::Trn2, &[], |_| {
        vec![private_hbm(&[2, 2], DType::F32)]
    })
    .unwrap_err()
    .to_string();
    assert!(
        err.contains(
            "returned private_hbm tensor `scratch0`; outputs must be allocated with shared_hbm"
        ),
        "{err}"
    );
}
