//! Every registry kernel and its backward, at every sample and dtype, traced once and unrolled:
//! the `affine-range-dependence` rule decides every loop (no warnings), and running the
//! `affine_range` iterations reversed or shuffled gives the same bits as program order — except
//! where an allowed reduction adds floats in another order (`nc_matmul` accumulating over K in
//! PSUM rounds each partial sum): those outputs agree to fp32 rounding, and are listed.

use nki_core::ir::{Program, unroll};
use nki_core::sim::IterationOrder;
use nki_core::sim::{SimOptions, simulate_to_vecs};
use nki_core::validate::validate_with_warnings;
use nki_core::{KernelDef, Signature, Target};
use nki_kernels as _;
use nki_registry::Registry;
use nki_tests::prng;

/// Every forward kernel's samples at each of their dtypes, and the backward each implies.
fn programs() -> Vec<(&'static KernelDef, Signature)> {
    let mut out = Vec::new();
    for def in Registry::global().unwrap().kernels() {
        for sample in def.samples {
            for dtype in sample.dtypes_for(&def.contract) {
                let Some(sig) = sample.signature(def, dtype, Target::Trn2) else {
                    continue;
                };
                out.extend(def.backward_signature(&sig));
                out.push((def, sig));
            }
        }
    }
    out
}

fn inputs(program: &Program) -> Vec<Vec<u8>> {
    program
        .inputs()
        .enumerate()
        .map(|(i, (_, d))| prng::encode(&prng::input_values(i as u64 * 7919 + 1, d), d.dtype))
        .collect()
}

fn run(p: &Program, inputs: &[&[u8]], order: IterationOrder) -> Vec<Vec<f32>> {
    let opts = SimOptions {
        order,
        ..SimOptions::default()
    };
    let outs = simulate_to_vecs(p, inputs, opts).unwrap();
    outs.iter()
        .zip(&p.outputs)
        .map(|(b, o)| prng::decode(b, p.hbm[o.0 as usize].dtype))
        .collect()
}

#[test]
fn registry_kernels_have_no_affine_range_dependence_and_no_order_dependence() {
    let mut rounded = std::collections::BTreeSet::new();
    for (def, sig) in programs() {
        let program = def.check(&sig).and_then(|c| c.trace()).unwrap();
        for p in [program.clone(), unroll(&program)] {
            let warnings =
                validate_with_warnings(&p).unwrap_or_else(|e| panic!("{}: {e}", def.name));
            assert!(warnings.is_empty(), "{}: {warnings:?}", def.name);
            let inputs = inputs(&p);
            let inputs: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
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
