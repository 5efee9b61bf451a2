//! Every registry kernel and its backward, at every sample and dtype on Trn2: launched on both
//! cores of the LNC=2 logical NeuronCore (the registry's default there), a kernel that splits its
//! work by program id computes exactly the bits it computes on one core (each core's share is
//! the same arithmetic), the `core-race` rule finds nothing (no warning either: no work done
//! twice), and a kernel splits at every sample or at none. The split threshold is set to zero,
//! so every launch that does not synchronise runs its two instances at the same time on the
//! simulator's threads (the plan proves them independent), and the bits above are also those of
//! that concurrent run.

use nki_core::sim::{ExecPlan, SimOptions, set_split_min_work};
use nki_core::validate::validate_with_warnings;
use nki_tests::programs::{program_inputs, run_program};
use nki_tests::{Samples, sample_signatures};
use std::collections::BTreeMap;

#[test]
fn kernels_split_across_two_cores_compute_the_one_core_bits() {
    // Per kernel: how many of its signatures were launched on two cores, and how many in all.
    let mut split: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    set_split_min_work(0);
    for (def, sig) in sample_signatures(Samples::Every) {
        let checked = def.check(&sig).unwrap();
        let two = checked.trace().unwrap();
        let entry = split.entry(def.name).or_default();
        entry.1 += 1;
        if two.grid.is_empty() {
            continue;
        }
        entry.0 += 1;
        assert_eq!(two.grid, [2], "{}: launched as kernel[2] on Trn2", def.name);
        let warnings = validate_with_warnings(&two).unwrap_or_else(|e| panic!("{}: {e}", def.name));
        assert!(warnings.is_empty(), "{} {sig:?}: {warnings:?}", def.name);
        // Kernels exchanging partials (`sendrecv`, `core_barrier`) run in lockstep instead.
        let mut synchronises = false;
        two.visit_instructions(&mut |inst, _| synchronises |= inst.op.synchronises_cores());
        assert_eq!(
            ExecPlan::new(&two).instances_together(),
            !synchronises,
            "{} {sig:?}: the instances of a race-free launch that does not synchronise run \
             together",
            def.name
        );
        let one = checked.trace_on_cores(1).unwrap();
        assert!(one.grid.is_empty(), "{}: one core is one program", def.name);
        let inputs = program_inputs(&one);
        let (a, b) = (
            run_program(&one, &inputs, SimOptions::default()),
            run_program(&two, &inputs, SimOptions::default()),
        );
        for (i, (x, y)) in a.iter().flatten().zip(b.iter().flatten()).enumerate() {
            assert!(
                x.to_bits() == y.to_bits(),
                "{} {sig:?}: flat output element {i} is {x} on one core, {y} on two",
                def.name
            );
        }
    }
    for (name, (two, all)) in &split {
        assert!(
            *two == 0 || two == all,
            "{name}: {two} of its {all} signatures split across the cores, the rest not"
        );
    }
    let cores: Vec<&str> = split
        .iter()
        .filter(|(_, c)| c.0 > 0)
        .map(|(n, _)| *n)
        .collect();
    println!("split across two cores: {cores:?}");
    assert!(
        !cores.is_empty(),
        "no registry kernel splits its work across the cores"
    );
}
