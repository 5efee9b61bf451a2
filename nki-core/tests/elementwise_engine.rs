//! `tensor_tensor(...).on(ElementwiseEngine::GpSimd)`: the same arithmetic as the vector
//! engine, placed on GpSimd by the cost model, emitted as `engine=nisa.engine.gpsimd`, and kept
//! out of PSUM by validation.

use nki_core::NkiError;
use nki_core::codegen::emit_nki;
use nki_core::cost::{Engine, Resource, estimate};
use nki_core::ir::Program;
use nki_core::lang::trace;
use nki_core::prelude::*;
use nki_core::sim::{SimOptions, simulate_to_vecs};
use nki_core::validate::validate;

/// `out = a · b + c` over a `[rows, cols]` tile, the product on `product`'s engine and the sum
/// on `sum`'s, inputs filled by memset.
fn product_and_sum(
    rows: usize,
    cols: usize,
    dtype: DType,
    product: ElementwiseEngine,
    sum: ElementwiseEngine,
) -> Program {
    trace("k", Target::Trn2, &[], |_| {
        let out = shared_hbm(&[rows, cols], dtype);
        let (a, b, c) = (
            sbuf([rows, cols], dtype),
            sbuf([rows, cols], dtype),
            sbuf([rows, cols], dtype),
        );
        memset(&a, 1.5);
        memset(&b, -2.25);
        memset(&c, 0.375);
        let t = sbuf([rows, cols], DType::F32);
        tensor_tensor(&t, &a, &b, BinOp::Multiply).on(product);
        let y = sbuf([rows, cols], dtype);
        tensor_tensor(&y, &t, &c, BinOp::Add).on(sum);
        dma_copy(&out, &y);
        vec![out]
    })
    .unwrap()
}

fn run(p: &Program) -> Vec<f32> {
    let out = simulate_to_vecs(p, &[], SimOptions::default()).unwrap();
    let dtype = p.hbm[p.outputs[0].0 as usize].dtype;
    (0..out[0].len() / dtype.size_bytes())
        .map(|i| dtype.read(&out[0], i))
        .collect()
}

#[test]
fn gpsimd_computes_what_the_vector_engine_computes() {
    use ElementwiseEngine::{GpSimd, Vector};
    for dtype in [DType::F32, DType::BF16] {
        let on_vector = run(&product_and_sum(8, 40, dtype, Vector, Vector));
        assert!(on_vector.iter().all(|&v| v == 1.5 * -2.25 + 0.375));
        for (product, sum) in [(GpSimd, Vector), (Vector, GpSimd), (GpSimd, GpSimd)] {
            let p = product_and_sum(8, 40, dtype, product, sum);
            validate(&p).unwrap();
            assert_eq!(run(&p), on_vector, "{dtype:?} {product:?} {sum:?}");
        }
    }
}

#[test]
fn cost_runs_gpsimd_tensor_tensor_at_one_element_per_lane_per_input_and_cycle() {
    use ElementwiseEngine::{GpSimd, Vector};
    let report = estimate(&product_and_sum(128, 1000, DType::BF16, Vector, GpSimd));
    let tt: Vec<_> = report
        .slices
        .iter()
        .filter(|s| s.name == "tensor_tensor")
        .collect();
    assert_eq!(tt.len(), 2);
    assert_eq!(tt[0].engine, Engine::Vector);
    assert_eq!(tt[1].engine, Engine::GpSimd);
    // Two inputs of 1000 elements per partition at one per cycle, at 1.2 GHz, plus the 100-cycle
    // static overhead: it reads what the previous GpSimd instruction wrote.
    let want = (100.0 + 2000.0) / 1.2;
    let got = tt[1].end_ns - tt[1].start_ns;
    assert!((got - want).abs() < 1e-6, "{got} vs {want}");
    // The vector engine's product reads bf16 but writes fp32, so it streams at the fp32 rate:
    // two elements per lane and cycle on Trn2, max(64, 2 · 500) cycles at 0.96 GHz.
    let want_vector = (2.0 * 500.0) / 0.96;
    let got_vector = tt[0].end_ns - tt[0].start_ns;
    assert!((got_vector - want_vector).abs() < 1e-6, "{got_vector}");
    // GpSimd's element time is a roofline resource of its own.
    let gpsimd_min = report
        .min_ns
        .iter()
        .find(|(r, _)| *r == Resource::GpSimd)
        .map(|(_, ns)| *ns)
        .unwrap();
    assert!((gpsimd_min - 2000.0 / 1.2).abs() < 1e-6, "{gpsimd_min}");
}

#[test]
fn codegen_passes_the_engine_only_when_it_is_not_the_default() {
    use ElementwiseEngine::{GpSimd, Vector};
    let src = emit_nki(&product_and_sum(4, 8, DType::F32, Vector, GpSimd));
    assert!(
        src.contains("nisa.tensor_tensor(dst=t3, data1=t0, data2=t1, op=nl.multiply)  #"),
        "{src}"
    );
    assert!(
        src.contains(
            "nisa.tensor_tensor(dst=t4, data1=t3, data2=t2, op=nl.add, engine=nisa.engine.gpsimd)  #"
        ),
        "{src}"
    );
}

#[test]
fn gpsimd_tensor_tensor_cannot_touch_psum() {
    let mut line = 0;
    let p = trace("k", Target::Trn2, &[], |_| {
        let out = shared_hbm(&[4, 8], DType::F32);
        let a = sbuf([4, 8], DType::F32);
        memset(&a, 1.0);
        let acc = psum([4, 8], DType::F32);
        line = line!() + 1;
        tensor_tensor(&acc, &a, &a, BinOp::Add).on(ElementwiseEngine::GpSimd);
        let s = sbuf([4, 8], DType::F32);
        tensor_copy(&s, &acc);
        dma_copy(&out, &s);
        vec![out]
    })
    .unwrap();
    let v = match validate(&p).unwrap_err() {
        NkiError::Validation(v) => v,
        other => panic!("expected a validation error, got {other}"),
    };
    assert_eq!(
        (v.rule, v.limit.as_str(), v.actual.as_str()),
        ("gpsimd-psum", "sbuf", "psum")
    );
    assert!(
        v.message
            .starts_with("tensor_tensor on GpSimd cannot access PSUM;")
            && v.message.ends_with("(dst t1)"),
        "{}",
        v.message
    );
    let text = validate(&p).unwrap_err().to_string();
    assert!(text.contains(&format!("{}:{line}", file!())), "{text}");
}
