//! The ALU operators an instruction uses exist on the program's target, as the `nki_spec`
//! operator table says (`nl.abs_max` / `nl.abs_min`, and `nl.square` / `nl.relu` as operators
//! rather than activation functions, are NeuronCore-v4 only).

use super::violation;
use crate::error::NkiError;
use crate::ir::{Instruction, Program};

/// Rule `operator-target`: every operator of `inst` is available on the program's target.
pub(super) fn check_operator_targets(
    program: &Program,
    inst: &Instruction,
) -> Result<(), NkiError> {
    let version = program.target.nc_version();
    let mut missing = None;
    inst.op.visit_operators(&mut |op| {
        if let Some(spec) = op.spec()
            && !spec.available_on(version)
            && missing.is_none()
        {
            missing = Some((op, spec.targets.since));
        }
    });
    let Some((op, since)) = missing else {
        return Ok(());
    };
    let name = inst.op.name();
    Err(violation(
        "operator-target",
        format!("{} or newer", since.neuron_core()),
        format!("{} ({})", program.target, version.neuron_core()),
        name.into(),
        format!(
            "{name}: {} is an operator of {} ({}) and newer; {} is {}",
            op.nki_name(),
            since.neuron_core(),
            since.trainium_title(),
            program.target,
            version.neuron_core()
        ),
        inst.loc,
    ))
}
