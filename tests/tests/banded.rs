//! The simulator's band-by-band execution of straight-line runs (`nki_core::sim::BandPolicy`)
//! against instruction-by-instruction execution, for every registry kernel (and the backward
//! each implies) at every sample and dtype: the same bits, on one thread and on the pool, with
//! bands of a few partitions (so every run that qualifies, however small, is banded, and bands
//! cut tiles at odd partitions), with the default band height, and with the plan made at
//! compile time (`Compiled::simulate`, the torch ops' path).

use nki_core::compile::Compiled;
use nki_core::sim::{BandPolicy, ExecPlan, SimOptions, simulate_to_vecs};
use nki_kernels as _;
use nki_tests::{Samples, prng, sample_signatures};
use std::collections::BTreeSet;

/// PRNG bytes for every input of `compiled`.
fn inputs(compiled: &Compiled) -> Vec<Vec<u8>> {
    compiled
        .program()
        .inputs()
        .enumerate()
        .map(|(i, (_, decl))| prng::encode(&prng::input_values(i as u64 + 1, decl), decl.dtype))
        .collect()
}

/// The byte slices [`simulate_to_vecs`] takes.
fn input_refs(inputs: &[Vec<u8>]) -> Vec<&[u8]> {
    inputs.iter().map(Vec::as_slice).collect()
}

/// The outputs of `compiled` on PRNG inputs, simulated with `policy` on one thread or the pool.
fn outputs(compiled: &Compiled, policy: BandPolicy, sequential: bool) -> (Vec<Vec<u8>>, usize) {
    let program = compiled.program();
    let inputs = inputs(compiled);
    let inputs = input_refs(&inputs);
    let plan = ExecPlan::with_bands(program, policy);
    let opts = SimOptions {
        parallel: !sequential,
        bands: policy,
        ..SimOptions::default()
    };
    let banded = plan.bands().iter().map(Vec::len).sum();
    let out = simulate_to_vecs(program, &inputs, opts)
        .unwrap_or_else(|e| panic!("{}: {e}", program.name));
    (out, banded)
}

#[test]
fn banded_runs_give_the_bits_of_instruction_by_instruction_runs() {
    let mut banded = BTreeSet::new();
    for (def, sig) in sample_signatures(Samples::Every) {
        let compiled =
            nki_core::compile(def, &sig).unwrap_or_else(|e| panic!("{} at {sig:?}: {e}", def.name));
        let (whole, none) = outputs(&compiled, BandPolicy::never(), true);
        assert_eq!(none, 0, "{}: BandPolicy::never bands", def.name);
        // The plan made at compile time (the torch ops' path) gives the same bits too.
        let planned = compiled
            .simulate_to_vecs(&input_refs(&inputs(&compiled)), true)
            .unwrap_or_else(|e| panic!("{}: {e}", def.name));
        assert!(
            planned == whole,
            "{} at {sig:?}: Compiled::simulate",
            def.name
        );
        for (sequential, policy) in [
            (true, BandPolicy::everywhere(3)),
            (false, BandPolicy::everywhere(3)),
            (false, BandPolicy::default()),
        ] {
            let (got, runs) = outputs(&compiled, policy, sequential);
            assert!(
                got == whole,
                "{} at {sig:?}: {policy:?} ({}) changes the outputs",
                def.name,
                if sequential { "one thread" } else { "pool" }
            );
            if runs > 0 {
                banded.insert(def.name);
            }
        }
    }
    // Which kernels have runs to band: a change here is a change in what this test covers.
    let names: Vec<&str> = banded.into_iter().collect();
    nki_tests::assert_snapshot!("banded_kernels", names.join("\n"));
}
