//! Times the simulator alone (compile once, then simulate repeatedly) on the library
//! kernels: `cargo run --release -p nki-kernels --example sim_speed` (`-- small`: the matmul
//! class at `torch-nki demo`'s shapes only; `-- small linear`: one of them).

use nki_core::kernel_def::TensorSig;
use nki_core::prelude::*;
use nki_core::sim::{HostTensor, HostTensorMut};
use nki_core::testing::ScalarValue;
use nki_core::{KernelDef, Signature};
use std::time::Instant;

fn bench(
    def: &KernelDef,
    shapes: &[Vec<usize>],
    dtype: DType,
    scalars: &[ScalarValue],
    reps: usize,
) {
    // `sim_speed small NAME`: that kernel only.
    if std::env::args().nth(2).is_some_and(|only| only != def.name) {
        return;
    }
    let sig = Signature {
        tensors: shapes
            .iter()
            .map(|s| {
                Some(TensorSig {
                    shape: s.iter().map(|&d| d as u64).collect(),
                    dtype,
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
    let inputs: Vec<Vec<u8>> = shapes
        .iter()
        .map(|s| {
            let n: usize = s.iter().product();
            let mut b = vec![0u8; n * dtype.size_bytes()];
            (0..n).for_each(|i| dtype.write(&mut b, i, (i % 97) as f32 / 50.0 - 1.0));
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
    let host_in: Vec<HostTensor<'_>> = shapes
        .iter()
        .zip(&inputs)
        .map(|(s, b)| HostTensor {
            dtype,
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
    println!(
        "{:<8} {:<22} {dtype:<5} compile {:>7.1} us   simulate {:>9.1} us (1 thread {:>9.1} us)",
        def.name,
        format!("{shapes:?}"),
        compile.as_secs_f64() * 1e6,
        par,
        seq
    );
}

/// The matmul-class kernels at their demo shapes (the largest declared samples, which
/// `torch-nki demo` times against ATen), fp32.
fn small(reps: usize) {
    let f = DType::F32;
    bench(
        &nki_kernels::matmul::LINEAR_KERNEL,
        &[vec![130, 200], vec![530, 200], vec![530]],
        f,
        &[],
        reps,
    );
    bench(
        &nki_kernels::matmul::BMM_KERNEL,
        &[vec![3, 130, 70], vec![3, 70, 200]],
        f,
        &[],
        reps,
    );
    bench(
        &nki_kernels::matmul::MATMUL_KERNEL,
        &[vec![20, 150], vec![150, 4700]],
        f,
        &[],
        reps,
    );
}

fn main() {
    if std::env::args().nth(1).as_deref() == Some("small") {
        small(200);
        return;
    }
    for dt in [DType::F32, DType::BF16] {
        bench(
            &nki_kernels::elementwise::ADD_KERNEL,
            &[vec![300, 1000], vec![300, 1000]],
            dt,
            &[],
            50,
        );
        bench(
            &nki_kernels::norm::RMSNORM_KERNEL,
            &[vec![300, 1000], vec![1000]],
            dt,
            &[ScalarValue::Float(1e-6)],
            50,
        );
        bench(
            &nki_kernels::matmul::MATMUL_KERNEL,
            &[vec![512, 512], vec![512, 512]],
            dt,
            &[],
            10,
        );
        bench(
            &nki_kernels::matmul::MATMUL_KERNEL,
            &[vec![300, 700], vec![700, 600]],
            dt,
            &[],
            10,
        );
    }
}
