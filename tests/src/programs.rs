//! Running a traced program on PRNG inputs, for tests that compare two runs of a kernel bit for
//! bit (iteration orders, core counts).

use crate::prng;
use nki_core::ir::Program;
use nki_core::sim::{SimOptions, simulate_to_vecs};

/// Deterministic PRNG inputs for every input of `program`, encoded in their dtypes.
pub fn program_inputs(program: &Program) -> Vec<Vec<u8>> {
    program
        .inputs()
        .enumerate()
        .map(|(i, (_, d))| prng::encode(&prng::input_values(i as u64 * 7919 + 1, d), d.dtype))
        .collect()
}

/// Simulates `program` on `inputs` with `options`; every output decoded to `f32` (exact).
pub fn run_program(program: &Program, inputs: &[Vec<u8>], options: SimOptions) -> Vec<Vec<f32>> {
    let inputs: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
    let outs = simulate_to_vecs(program, &inputs, options)
        .unwrap_or_else(|e| panic!("{}: {e}", program.name));
    outs.iter()
        .zip(&program.outputs)
        .map(|(b, o)| prng::decode(b, program.hbm[o.0 as usize].dtype))
        .collect()
}
