//! The Program IR is plain data: a traced library kernel serialises to JSON, and the snapshot
//! shows the loops kept as loops with symbolic (affine) offsets and the ragged tail traced once.

use nki_core::kernel_def::ScalarValue;
use nki_core::{DType, Signature, Target};
use nki_kernels::norm::RMSNORM_KERNEL;

#[test]
fn rmsnorm_program_for_a_ragged_row_count() {
    let sig = Signature::new(
        &[(&[300, 64], DType::BF16), (&[64], DType::BF16)],
        &[ScalarValue::Float(1e-6)],
        Target::Trn2,
    );
    let program = RMSNORM_KERNEL.check(&sig).and_then(|c| c.trace()).unwrap();
    assert_eq!(
        program.loops.len(),
        1,
        "one affine loop over the two full row tiles"
    );
    assert_eq!(program.loops[0].trip, 2);
    nki_tests::assert_snapshot!(serde_json::to_string_pretty(&program).unwrap());
}
