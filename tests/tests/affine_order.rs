//! Every registry kernel and its backward, at every sample and dtype, traced once and unrolled:
//! the `affine-range-dependence` rule decides every loop (no warnings), and running the
//! `affine_range` iterations reversed or shuffled gives the same bits as program order — except
//! where an allowed reduction adds floats in another order (`nc_matmul` accumulating over K in
//! PSUM rounds each partial sum): those outputs agree to fp32 rounding, and are listed.

use nki_core::ir::unroll;
use nki_core::sim::{IterationOrder, SimOptions};
use nki_core::validate::validate_with_warnings;
use nki_tests::programs::{program_inputs, run_program};
use nki_tests::{Samples, sample_signatures};

fn run(p: &nki_core::ir::Program, inputs: &[Vec<u8>], order: IterationOrder) -> Vec<Vec<f32>> {
    let options = SimOptions {
        order,
        ..SimOptions::default()
    };
    run_program(p, inputs, options)
}

#[test]
fn registry_kernels_have_no_affine_range_dependence_and_no_order_dependence() {
    let mut rounded = std::collections::BTreeSet::new();
    for (def, sig) in sample_signatures(Samples::Every) {
        let program = def.check(&sig).and_then(|c| c.trace()).unwrap();
        for p in [program.clone(), unroll(&program)] {
            let warnings =
                validate_with_warnings(&p).unwrap_or_else(|e| panic!("{}: {e}", def.name));
            assert!(warnings.is_empty(), "{}: {warnings:?}", def.name);
            let inputs = program_inputs(&p);
            let reference = run(&p, &inputs, IterationOrder::Program);
            for order in [
                IterationOrder::Reversed,
                IterationOrder::Shuffled { seed: 1 },
            ] {
                let got = run(&p, &inputs, order);
                for (a, b) in reference.iter().flatten().zip(got.iter().flatten()) {
                    if a.to_bits() == b.to_bits() {
                        continue;
                    }
                    rounded.insert(def.name);
                    // The project's fp32 tolerance for reductions over >= 4096 elements.
                    let close = (a - b).abs() <= 1e-4 * a.abs().max(b.abs()) + 1e-4;
                    assert!(close, "{} {sig:?} in {order:?} order: {a} vs {b}", def.name);
                }
            }
        }
    }
    assert_eq!(
        rounded.into_iter().collect::<Vec<_>>(),
        ["matmul_backward"],
        "the kernels whose PSUM accumulation over an affine_range rounds by the order"
    );
}
