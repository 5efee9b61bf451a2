//! Cost-model estimates of the library's forward kernels at large Trn2 shapes, and how long the
//! model itself takes (`cargo run --release -p nki-kernels --example cost_estimates`).
//! Every device time printed is an estimate of the model, not a measurement.

use nki_core::cost::estimate;
use nki_core::kernel_def::TensorSig;
use nki_core::testing::ScalarValue;
use nki_core::{DType, KernelDef, Signature, Target};
use std::time::Instant;

fn sig(shapes: &[&[u64]], dtype: DType, scalars: &[ScalarValue]) -> Signature {
    Signature {
        tensors: shapes
            .iter()
            .map(|s| {
                Some(TensorSig {
                    shape: s.to_vec(),
                    dtype,
                })
            })
            .collect(),
        scalars: scalars.to_vec(),
        target: Target::Trn2,
    }
}

fn show(def: &KernelDef, s: &Signature) {
    let t0 = Instant::now();
    let compiled = nki_core::compile(def, s).expect("compile");
    let program = compiled.program();
    let traced = t0.elapsed();
    let t1 = Instant::now();
    let report = estimate(program);
    let costed = t1.elapsed();
    let shapes: Vec<String> = s
        .tensors
        .iter()
        .flatten()
        .map(|t| format!("{:?}", t.shape))
        .collect();
    println!("{} {}", def.name, shapes.join(" "));
    print!("{report}");
    println!(
        "  ({} instructions unrolled; traced in {:.1} ms, costed in {:.1} ms)\n",
        report.slices.len(),
        traced.as_secs_f64() * 1e3,
        costed.as_secs_f64() * 1e3
    );
}

fn main() {
    let eps = [ScalarValue::Float(1e-6)];
    show(
        &nki_kernels::norm::RMSNORM_KERNEL,
        &sig(&[&[8192, 4096], &[4096]], DType::BF16, &eps),
    );
    show(
        &nki_kernels::elementwise::ADD_KERNEL,
        &sig(&[&[8192, 4096], &[8192, 4096]], DType::BF16, &[]),
    );
    show(
        &nki_kernels::matmul::MATMUL_KERNEL,
        &sig(&[&[4096, 4096], &[4096, 4096]], DType::BF16, &[]),
    );
}
