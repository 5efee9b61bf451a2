//! `shared_constant`: a read-only HBM tensor whose values the program carries. The simulator
//! fills it (rounded to its dtype), it is no kernel parameter, a write to it is a trace error,
//! and codegen emits it as `nl.shared_constant(np.array(...))`.

mod common;

use common::run;
use nki_core::codegen::emit_nki;
use nki_core::ir::HbmKind;
use nki_core::lang::{InputSpec, trace};
use nki_core::prelude::*;
use nki_core::validate::validate;

fn program(dtype: DType, values: Vec<f32>) -> nki_core::ir::Program {
    let inputs = vec![InputSpec {
        name: "x".into(),
        shape: vec![2, 3],
        dtype: DType::F32,
    }];
    trace("k", Target::Trn2, &inputs, move |h| {
        let out = shared_hbm(&[2, 3], DType::F32);
        let c = shared_constant(&[2, 3], dtype, &values);
        let (t, k) = (sbuf([2, 3], DType::F32), sbuf([2, 3], DType::F32));
        dma_copy(&t, &h[0]);
        dma_copy(&k, &c);
        tensor_tensor(&t, &t, &k, BinOp::Add);
        dma_copy(&out, &t);
        vec![out]
    })
    .unwrap()
}

#[test]
fn a_constant_is_filled_from_the_values_the_program_carries() {
    let values = vec![1.0, -2.5, 3.0, 0.1, 1e5, -7.0];
    let p = program(DType::F32, values.clone());
    validate(&p).unwrap();
    assert_eq!(p.inputs().count(), 1);
    assert_eq!(p.constants().count(), 1);
    assert_eq!(p.hbm[2].kind, HbmKind::Constant);
    let x = [10.0, 20.0, 30.0, 40.0, 50.0, 60.0];
    let got = run(&p, &[&x]);
    let want: Vec<f32> = x.iter().zip(&values).map(|(a, b)| a + b).collect();
    assert_eq!(got[0], want);
    // In bf16 the values are rounded once, when the program is made.
    let p = program(DType::BF16, values.clone());
    let got = run(&p, &[&[0.0; 6]]);
    let want: Vec<f32> = values.iter().map(|v| DType::BF16.round(*v)).collect();
    assert_eq!(got[0], want);
}

#[test]
fn a_constant_is_read_only_and_holds_its_shape_of_values() {
    let err = trace("k", Target::Trn2, &[], |_| {
        let c = shared_constant(&[1, 2], DType::F32, &[1.0, 2.0]);
        let t = sbuf([1, 2], DType::F32);
        dma_copy(&c, &t);
        vec![]
    })
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("is a shared_constant, which is read-only"),
        "{err}"
    );
    let err = trace("k", Target::Trn2, &[], |_| {
        shared_constant(&[2, 2], DType::F32, &[1.0, 2.0]);
        vec![]
    })
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("2 values for shape [2, 2] (4 elements)"),
        "{err}"
    );
}

#[test]
fn codegen_emits_a_constant_as_a_numpy_array() {
    let src = emit_nki(&program(DType::F32, vec![1.0, -2.5, 3.0, 0.1, 1e5, -7.0]));
    assert!(src.contains("import numpy as np\n"), "{src}");
    assert!(
        src.contains(
            "const0 = nl.shared_constant(np.array([1.0, -2.5, 3.0, 0.1, 100000.0, -7.0], \
             dtype=np.float32).reshape((2, 3)))"
        ),
        "{src}"
    );
    let src = emit_nki(&program(DType::BF16, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]));
    assert!(
        src.contains("dtype=np.float32).reshape((2, 3)), dtype=nl.bfloat16)"),
        "{src}"
    );
    let src = emit_nki(&program(DType::I32, vec![1.0, 2.0, 3.0, 4.0, 5.0, -6.0]));
    assert!(
        src.contains("np.array([1, 2, 3, 4, 5, -6], dtype=np.int32)"),
        "{src}"
    );
    assert!(!emit_nki(&program_without_constants()).contains("numpy"));
}

fn program_without_constants() -> nki_core::ir::Program {
    trace("k", Target::Trn2, &[], |_| {
        let out = shared_hbm(&[1, 1], DType::F32);
        let t = sbuf([1, 1], DType::F32);
        memset(&t, 1.0);
        dma_copy(&out, &t);
        vec![out]
    })
    .unwrap()
}
