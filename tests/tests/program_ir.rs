//! The Program IR is plain data: a traced library kernel serialises to JSON, and the snapshot
//! shows the loops kept as loops with symbolic (affine) offsets and the ragged tail traced once.
//! On a logical NeuronCore of two cores the same kernel is a launch grid of two instances, each
//! taking its share of the row tiles.

use nki_core::ir::{LoopKind, Program, Stmt};
use nki_core::kernel_def::ScalarValue;
use nki_core::{DType, Signature, Target};
use nki_kernels::norm::RMSNORM_KERNEL;

/// rmsnorm over 300 rows (two full row tiles and a ragged one of 44) for `target`.
fn rmsnorm_300_rows(target: Target) -> Program {
    let sig = Signature::new(
        &[(&[300, 64], DType::BF16), (&[64], DType::BF16)],
        &[ScalarValue::Float(1e-6)],
        target,
    );
    RMSNORM_KERNEL.check(&sig).and_then(|c| c.trace()).unwrap()
}

#[test]
fn rmsnorm_program_for_a_ragged_row_count() {
    // Trn1: one core, one program.
    let program = rmsnorm_300_rows(Target::Trn1);
    assert!(program.grid.is_empty());
    assert_eq!(
        program.loops.len(),
        1,
        "one affine loop over the two full row tiles"
    );
    assert_eq!(program.loops[0].trip, 2);
    nki_tests::assert_snapshot!(serde_json::to_string_pretty(&program).unwrap());
}

#[test]
fn rmsnorm_splits_its_row_tiles_across_the_cores_of_a_trn2_logical_core() {
    let program = rmsnorm_300_rows(Target::Trn2);
    assert_eq!(program.grid, [2], "launched as kernel[2] (LNC=2)");
    let instances: Vec<&[Stmt]> = program
        .body
        .iter()
        .filter_map(|s| match s {
            Stmt::Loop { var, body }
                if matches!(
                    program.loops[var.0 as usize].kind,
                    LoopKind::Grid { axis: 0 }
                ) =>
            {
                Some(body.as_slice())
            }
            _ => None,
        })
        .collect();
    assert_eq!(instances.len(), 2, "one scope per core");
    // Three row tiles: core 0 takes tile 0 (an affine loop of one), core 1 tiles 1 and 2 (an
    // affine loop of one full tile, then the ragged 44 rows).
    let affine_trips = |body: &[Stmt]| -> Vec<usize> {
        body.iter()
            .filter_map(|s| match s {
                Stmt::Loop { var, .. } => Some(program.loops[var.0 as usize].trip),
                _ => None,
            })
            .collect()
    };
    assert_eq!(affine_trips(instances[0]), [1]);
    assert_eq!(affine_trips(instances[1]), [1]);
    let instructions = |body: &[Stmt]| body.iter().filter(|s| matches!(s, Stmt::Inst(_))).count();
    assert!(
        instructions(instances[1]) > instructions(instances[0]),
        "core 1 also does the ragged tail"
    );
}
