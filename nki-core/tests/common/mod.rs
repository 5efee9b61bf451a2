//! Helpers the instruction tests share: inputs, simulation on f32 values encoded in each
//! input's dtype, and deterministic pseudo-random values.

#![allow(dead_code)]

use nki_core::ir::Program;
use nki_core::lang::InputSpec;
use nki_core::prelude::*;
use nki_core::sim::{SimOptions, simulate_to_vecs};

/// One input `x` of `shape` in `dtype`.
pub fn input(shape: [usize; 2], dtype: DType) -> Vec<InputSpec> {
    named_inputs(&["x"], shape, dtype)
}

/// Inputs called `names`, each of `shape` in `dtype`.
pub fn named_inputs(names: &[&str], shape: [usize; 2], dtype: DType) -> Vec<InputSpec> {
    names
        .iter()
        .map(|name| InputSpec {
            name: (*name).into(),
            shape: shape.to_vec(),
            dtype,
        })
        .collect()
}

/// Simulates `p` on `inputs` (each encoded in its input's dtype) and reads every output back
/// as f32s.
pub fn run(p: &Program, inputs: &[&[f32]]) -> Vec<Vec<f32>> {
    let dtypes: Vec<DType> = p.inputs().map(|(_, d)| d.dtype).collect();
    let encoded: Vec<Vec<u8>> = inputs
        .iter()
        .zip(&dtypes)
        .map(|(v, dt)| {
            let mut bytes = vec![0; v.len() * dt.size_bytes()];
            for (i, x) in v.iter().enumerate() {
                dt.write(&mut bytes, i, *x);
            }
            bytes
        })
        .collect();
    let refs: Vec<&[u8]> = encoded.iter().map(Vec::as_slice).collect();
    let outs = simulate_to_vecs(p, &refs, SimOptions::default()).unwrap();
    outs.iter()
        .zip(&p.outputs)
        .map(|(b, o)| {
            let dt = p.hbm[o.0 as usize].dtype;
            (0..b.len() / dt.size_bytes())
                .map(|i| dt.read(b, i))
                .collect()
        })
        .collect()
}

/// `n` pseudo-random values in `[-scale/2, scale/2)` (xorshift from `seed`).
pub fn values(n: usize, seed: u64, scale: f32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * scale
        })
        .collect()
}
