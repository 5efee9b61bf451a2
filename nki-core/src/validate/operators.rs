//! The ALU operators an instruction uses exist on the program's target, as the `nki_spec`
//! operator table says (`nl.abs_max` / `nl.abs_min`, and `nl.square` / `nl.relu` as operators
//! rather than activation functions, are NeuronCore-v4 only), and so do its activation
//! functions, as the activation table says (`nl.prelu` is NeuronCore-v4 only).

use super::violation;
use crate::error::NkiError;
use crate::ir::{Instruction, Op, Program};

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

/// Rule `activation-target`: the activation function of an `activation` / `activate2` is
/// available on the program's target.
pub(super) fn check_activation_targets(
    program: &Program,
    inst: &Instruction,
) -> Result<(), NkiError> {
    let func = match &inst.op {
        Op::Activation { func, .. } | Op::Activate2 { func, .. } => *func,
        _ => return Ok(()),
    };
    let version = program.target.nc_version();
    let Some(spec) = nki_spec::activation(func.nl_name()) else {
        return Ok(());
    };
    if spec.targets.includes(version) {
        return Ok(());
    }
    let since = spec.targets.since;
    let name = inst.op.name();
    Err(violation(
        "activation-target",
        format!("{} or newer", since.neuron_core()),
        format!("{} ({})", program.target, version.neuron_core()),
        name.into(),
        format!(
            "{name}: {} is an activation function of {} ({}) and newer; {} is {}",
            func.nki_name(),
            since.neuron_core(),
            since.trainium_title(),
            program.target,
            version.neuron_core()
        ),
        inst.loc,
    ))
}
