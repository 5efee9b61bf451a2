//! Unrolled programs (what the NKI frontend traces, one scope per loop iteration) against the
//! programs they come from, for every registry kernel and its backward at every sample and
//! dtype: unrolling validates, simulates to the same bits, and has the same instruction stream;
//! and a changed stream is reported at the statement that changed.

use nki_core::ir::{Op, Program, Stmt, stream_difference, unroll};
use nki_core::sim::{SimOptions, simulate_to_vecs};
use nki_core::validate::validate;
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

/// The program's outputs on deterministic inputs.
fn outputs(program: &Program) -> Vec<Vec<u8>> {
    let inputs: Vec<Vec<u8>> = program
        .inputs()
        .enumerate()
        .map(|(i, (_, d))| prng::encode(&prng::input_values(i as u64 * 7919 + 1, d), d.dtype))
        .collect();
    let inputs: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
    simulate_to_vecs(program, &inputs, SimOptions::default()).unwrap()
}

#[test]
fn unrolled_programs_validate_and_compute_the_same_bits() {
    let programs = programs();
    assert!(programs.len() >= 2 * Registry::global().unwrap().kernels().count());
    for (def, sig) in programs {
        let program = def.check(&sig).and_then(|c| c.trace()).unwrap();
        let unrolled = unroll(&program);
        assert!(
            unrolled.loops.iter().all(|l| l.trip == 1),
            "{}: every iteration is its own scope",
            def.name
        );
        validate(&unrolled).unwrap_or_else(|e| panic!("{}: {e}", def.name));
        assert_eq!(stream_difference(&program, &unrolled), None, "{}", def.name);
        assert!(
            outputs(&program) == outputs(&unrolled),
            "{} {sig:?}: unrolled results differ",
            def.name
        );
    }
}

/// The last instruction in program order, to perturb.
fn last_instruction(body: &mut [Stmt]) -> Option<&mut Op> {
    for s in body.iter_mut().rev() {
        match s {
            Stmt::Inst(i) => return Some(&mut i.op),
            Stmt::Loop { body, .. } | Stmt::DeviceLoop { body, .. } => {
                if let Some(op) = last_instruction(body) {
                    return Some(op);
                }
            }
            Stmt::Alloc { .. } => {}
        }
    }
    None
}

#[test]
fn a_changed_or_missing_instruction_is_reported() {
    for (def, sig) in programs() {
        let program = def.check(&sig).and_then(|c| c.trace()).unwrap();
        let mut changed = program.clone();
        let op = last_instruction(&mut changed.body).expect("kernels have instructions");
        let before = op.name();
        *op = op.map_operands(
            &mut |r| nki_core::ir::TileRegion {
                nf: r.nf + 1,
                ..r.clone()
            },
            &mut |e| e.clone() + 1i64,
        );
        let diff = stream_difference(&program, &changed).expect("a changed stream");
        assert!(
            diff.contains("differs") && diff.contains(before),
            "{}: {diff}",
            def.name
        );

        let mut shorter = unroll(&program);
        shorter.body.pop();
        let diff = stream_difference(&program, &shorter).expect("a shorter stream");
        assert!(
            diff.contains("only the first program goes on"),
            "{}: {diff}",
            def.name
        );
    }
}
