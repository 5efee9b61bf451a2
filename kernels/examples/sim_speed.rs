//! Times the simulator alone (compile once, then simulate repeatedly) on the library
//! kernels: `cargo run --release -p nki-kernels --example sim_speed` (`-- small`: the matmul
//! class and cross_entropy at `torch-nki demo`'s shapes only; `-- small linear`: one of them;
//! `-- tiny`: the ops of `torch-nki bench --models`' llama-tiny forward at its shapes;
//! `-- llama512`: the linears of its llama-512 forward (2 × 128 tokens); `-- call`:
//! the 4 × 4 add of `scripts/bench_overhead.py`, the fixed cost of a simulated call).

use nki_core::kernel_def::TensorSig;
use nki_core::prelude::*;
use nki_core::sim::{HostTensor, HostTensorMut};
use nki_core::testing::ScalarValue;
use nki_core::{KernelDef, Signature};
use std::time::Instant;

/// Times `def` at `shapes` (every tensor argument in order; `None` for an optional one left
/// out), all of `dtype`, and `scalars`: see [`bench_typed`].
fn bench(
    def: &KernelDef,
    shapes: &[Option<Vec<usize>>],
    dtype: DType,
    scalars: &[ScalarValue],
    reps: usize,
) {
    let typed: Vec<Option<(Vec<usize>, DType)>> = shapes
        .iter()
        .map(|s| s.clone().map(|s| (s, dtype)))
        .collect();
    bench_typed(def, &typed, scalars, reps);
}

/// Times `def` at `tensors` (shape and dtype of every tensor argument in order; `None` for an
/// optional one left out) and `scalars`, `reps` runs on the pool and `reps` on the calling
/// thread. Float inputs hold values in `[-1, 1)`, integer ones `0..97` (class indices).
fn bench_typed(
    def: &KernelDef,
    tensors: &[Option<(Vec<usize>, DType)>],
    scalars: &[ScalarValue],
    reps: usize,
) {
    // `sim_speed small NAME`: that kernel only.
    if std::env::args().nth(2).is_some_and(|only| only != def.name) {
        return;
    }
    let sig = Signature {
        tensors: tensors
            .iter()
            .map(|t| {
                t.as_ref().map(|(s, dtype)| TensorSig {
                    shape: s.iter().map(|&d| d as u64).collect(),
                    dtype: *dtype,
                })
            })
            .collect(),
        scalars: scalars.to_vec(),
        target: Target::Trn2,
    };
    let t0 = Instant::now();
    let compiled = nki_core::compile(def, &sig).unwrap();
    let compile = t0.elapsed();
    let program = compiled.program();
    let present: Vec<&(Vec<usize>, DType)> = tensors.iter().flatten().collect();
    let inputs: Vec<Vec<u8>> = present
        .iter()
        .map(|(s, dtype)| {
            let n: usize = s.iter().product();
            let mut b = vec![0u8; n * dtype.size_bytes()];
            let value = |i: usize| match dtype.is_float() {
                true => (i % 97) as f32 / 50.0 - 1.0,
                false => (i % 97) as f32,
            };
            (0..n).for_each(|i| dtype.write(&mut b, i, value(i)));
            b
        })
        .collect();
    let outs_decl: Vec<_> = program
        .outputs
        .iter()
        .map(|o| &program.hbm[o.0 as usize])
        .collect();
    let mut out_bytes: Vec<Vec<u8>> = outs_decl
        .iter()
        .map(|d| vec![0u8; d.numel() * d.dtype.size_bytes()])
        .collect();
    let host_in: Vec<HostTensor<'_>> = present
        .iter()
        .zip(&inputs)
        .map(|((s, dtype), b)| HostTensor {
            dtype: *dtype,
            shape: s,
            data: b,
        })
        .collect();
    let mut run = |parallel: bool| {
        let t = Instant::now();
        for _ in 0..reps {
            let mut outs: Vec<HostTensorMut<'_>> = outs_decl
                .iter()
                .zip(out_bytes.iter_mut())
                .map(|(d, data)| HostTensorMut {
                    dtype: d.dtype,
                    shape: &d.shape,
                    data,
                })
                .collect();
            compiled.simulate(&host_in, &mut outs, parallel).unwrap();
        }
        t.elapsed().as_secs_f64() * 1e6 / reps as f64
    };
    run(true);
    let (par, seq) = (run(true), run(false));
    let shapes: Vec<&Vec<usize>> = present.iter().map(|(s, _)| s).collect();
    println!(
        "{:<8} {:<22} {:<5} compile {:>7.1} us   simulate {:>9.2} us (1 thread {:>9.2} us)",
        def.name,
        format!("{shapes:?}"),
        present
            .first()
            .map_or(String::new(), |(_, d)| d.to_string()),
        compile.as_secs_f64() * 1e6,
        par,
        seq
    );
}

/// The matmul-class kernels and cross_entropy at their demo shapes (the largest declared
/// samples, which `torch-nki demo` times against ATen), fp32.
fn small(reps: usize) {
    let f = DType::F32;
    bench_typed(
        &nki_kernels::loss::CROSS_ENTROPY_KERNEL,
        &[Some((vec![131, 300], f)), Some((vec![131], DType::I32))],
        &[ScalarValue::Int(-100), ScalarValue::Str("none")],
        reps,
    );
    bench(
        &nki_kernels::matmul::LINEAR_KERNEL,
        &[Some(vec![130, 200]), Some(vec![530, 200]), Some(vec![530])],
        f,
        &[],
        reps,
    );
    bench(
        &nki_kernels::matmul::BMM_KERNEL,
        &[Some(vec![3, 130, 70]), Some(vec![3, 70, 200])],
        f,
        &[],
        reps,
    );
    bench(
        &nki_kernels::matmul::MATMUL_KERNEL,
        &[Some(vec![20, 150]), Some(vec![150, 4700])],
        f,
        &[],
        reps,
    );
}

/// The forward ops of `torch-nki bench --models`' llama-tiny (hidden 64, intermediate 160,
/// 4 query and 2 kv heads of 16, a vocabulary of 256, 2 × 64 tokens), fp32, at its shapes.
fn tiny(reps: usize) {
    let f = DType::F32;
    let x = vec![2, 64, 64];
    for out_features in [64, 32, 160, 256] {
        bench(
            &nki_kernels::matmul::LINEAR_KERNEL,
            &[Some(x.clone()), Some(vec![out_features, 64]), None],
            f,
            &[],
            reps,
        );
    }
    bench(
        &nki_kernels::matmul::LINEAR_KERNEL,
        &[Some(vec![2, 64, 160]), Some(vec![64, 160]), None],
        f,
        &[],
        reps,
    );
    bench(
        &nki_kernels::attention::FLASH_ATTENTION_KERNEL,
        &[
            Some(vec![2, 4, 64, 16]),
            Some(vec![2, 2, 64, 16]),
            Some(vec![2, 2, 64, 16]),
        ],
        f,
        &[ScalarValue::Bool(true), ScalarValue::None],
        reps,
    );
    bench(
        &nki_kernels::rope::ROPE_KERNEL,
        &[
            Some(vec![2, 4, 64, 16]),
            Some(vec![2, 2, 64, 16]),
            Some(vec![64, 16]),
            Some(vec![64, 16]),
        ],
        f,
        &[],
        reps,
    );
    bench(
        &nki_kernels::norm::RMSNORM_KERNEL,
        &[Some(x.clone()), Some(vec![64])],
        f,
        &[ScalarValue::Float(1e-6)],
        reps,
    );
    bench(
        &nki_kernels::activation::SILU_MUL_KERNEL,
        &[Some(vec![2, 64, 160]), Some(vec![2, 64, 160])],
        f,
        &[],
        reps,
    );
}

/// The linears of `torch-nki bench --models`' llama-512 forward (hidden 512, intermediate 1376,
/// 2 × 128 tokens), fp32, at its shapes: attention's projections, the MLP's up and down.
fn llama512(reps: usize) {
    for (k, n) in [(512, 512), (512, 256), (512, 1376), (1376, 512)] {
        bench(
            &nki_kernels::matmul::LINEAR_KERNEL,
            &[Some(vec![2, 128, k]), Some(vec![n, k]), None],
            DType::F32,
            &[],
            reps,
        );
    }
}

fn main() {
    match std::env::args().nth(1).as_deref() {
        Some("small") => return small(200),
        Some("tiny") => return tiny(1000),
        Some("llama512") => return llama512(20),
        // The fixed cost of one simulated call: `scripts/bench_overhead.py`'s 4 × 4 add.
        Some("call") => {
            return bench(
                &nki_kernels::elementwise::ADD_KERNEL,
                &[Some(vec![4, 4]), Some(vec![4, 4])],
                DType::F32,
                &[],
                200_000,
            );
        }
        _ => {}
    }
    for dt in [DType::F32, DType::BF16] {
        bench(
            &nki_kernels::elementwise::ADD_KERNEL,
            &[Some(vec![300, 1000]), Some(vec![300, 1000])],
            dt,
            &[],
            50,
        );
        bench(
            &nki_kernels::norm::RMSNORM_KERNEL,
            &[Some(vec![300, 1000]), Some(vec![1000])],
            dt,
            &[ScalarValue::Float(1e-6)],
            50,
        );
        bench(
            &nki_kernels::matmul::MATMUL_KERNEL,
            &[Some(vec![512, 512]), Some(vec![512, 512])],
            dt,
            &[],
            10,
        );
        bench(
            &nki_kernels::matmul::MATMUL_KERNEL,
            &[Some(vec![300, 700]), Some(vec![700, 600])],
            dt,
            &[],
            10,
        );
    }
}
