//! Field adaptors: a field declared `=> keywords via <adaptor>` is spelled by the function of
//! that name here instead of by its type's [`Spell`](super::Spell) / [`SpellMany`]
//! implementation. Each spells one meaning a type alone does not carry, for every instruction
//! that declares it.

use super::{Emitter, SpellMany, float};
use nki_spec::Param;

/// `nisa.reduce_cmd.reset_reduce`: every reduction of the IR starts from its operator's
/// identity.
const RESET_REDUCE: &str = "nisa.reduce_cmd.reset_reduce";

/// `nisa.reduce_cmd.load_reduce`: the reduction starts from a given value.
const LOAD_REDUCE: &str = "nisa.reduce_cmd.load_reduce";

/// An optional reduction result (`(reduce_op, reduce_res)` or `reduce_res`), the last keyword
/// `reduce_cmd`: when given, its values and `reset_reduce` (each call reduces its own rows);
/// nothing otherwise.
pub(crate) fn reset_reduce<T: SpellMany>(
    x: &Option<T>,
    e: &Emitter<'_>,
    ps: &[&Param],
) -> Vec<Option<String>> {
    with_command(x, e, ps, RESET_REDUCE)
}

/// An optional start value of a reduction (`reduce_init`, `tensor_scalar_cumulative`'s
/// `imm1`), the last keyword `reduce_cmd`: when given, the value and `load_reduce`; nothing
/// otherwise (the reduction starts from its operator's identity).
pub(crate) fn load_reduce<T: SpellMany>(
    x: &Option<T>,
    e: &Emitter<'_>,
    ps: &[&Param],
) -> Vec<Option<String>> {
    with_command(x, e, ps, LOAD_REDUCE)
}

fn with_command<T: SpellMany>(
    x: &Option<T>,
    e: &Emitter<'_>,
    ps: &[&Param],
    command: &str,
) -> Vec<Option<String>> {
    let Some((_, values)) = ps.split_last() else {
        return Vec::new();
    };
    match x {
        Some(v) => {
            let mut out = v.spell_many(e, values);
            out.push(Some(command.into()));
            out
        }
        None => vec![None; ps.len()],
    }
}

/// One factor per source (`dma_compute`'s `scales`): not written when every factor is 1.0,
/// which is what NKI's `scales=None` means.
pub(crate) fn unit_scales(x: &[f32], _: &Emitter<'_>, ps: &[&Param]) -> Vec<Option<String>> {
    let written = x.iter().any(|s| *s != 1.0);
    let items: Vec<String> = x.iter().map(|s| float(*s)).collect();
    let value = written.then(|| format!("[{}]", items.join(", ")));
    ps.iter().map(|_| value.clone()).collect()
}
