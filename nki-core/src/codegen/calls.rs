//! Each instruction as its `nisa.*` call, derived from its declaration: the fields spelled as
//! their declared keywords ([`super::Spell`]), the instruction's hook where it has one
//! ([`super::hooks`]), then the keywords in the order of the instruction's NKI signature with
//! the defaults left out ([`super::Kwargs`]).
//!
//! One name is chosen here rather than declared: an `activation` with a reduction is emitted as
//! `nisa.activation_reduce` (whose signature then orders its keywords).

use super::{Emitter, Kwargs, hooks};
use crate::ir::Op;

impl Emitter<'_> {
    /// `nisa.<name>(dst=..., ...)` for one instruction.
    pub(super) fn call(&self, op: &Op) -> String {
        let mut kw = Kwargs::new(op_name(op));
        op.spell_fields(self, &mut kw);
        if let Some(hook) = hooks::hook(op.name()) {
            hook(self, op, &mut kw);
        }
        kw.call()
    }
}

/// The `nisa` function an instruction is emitted as.
fn op_name(op: &Op) -> &'static str {
    match op {
        Op::Activation {
            reduce: Some(_), ..
        } => "activation_reduce",
        other => other.name(),
    }
}

#[cfg(test)]
mod tests {
    use super::hooks;
    use crate::ir::Op;

    /// Every keyword a declaration spells, or marks explicit, is a keyword of that
    /// instruction's NKI signature, and no field's keyword is another's.
    #[test]
    fn declared_keywords_are_in_the_signature() {
        for (name, fields, explicit) in Op::KEYWORDS {
            let spec = nki_spec::instruction(name).expect("declared in nki_spec");
            let mut seen = Vec::new();
            for kw in fields.iter().flat_map(|f| f.iter()) {
                assert!(
                    spec.param(kw).is_some(),
                    "nisa.{name} has no keyword `{kw}`"
                );
                assert!(!seen.contains(kw), "nisa.{name}: `{kw}` declared twice");
                seen.push(kw);
            }
            for kw in *explicit {
                assert!(
                    seen.contains(kw),
                    "nisa.{name}: explicit `{kw}` is not declared"
                );
            }
        }
    }

    /// The destinations an instruction also reads are written keywords of its NKI signature.
    #[test]
    fn destinations_read_are_written_keywords() {
        for (name, fields) in Op::READS_DESTINATION {
            let spec = nki_spec::instruction(name).expect("declared in nki_spec");
            for field in *fields {
                let p = spec.param(field).expect("a keyword of the instruction");
                assert!(
                    matches!(p.kind, nki_spec::Kind::TileOut | nki_spec::Kind::TensorOut),
                    "nisa.{name}: `{field}` is not a destination"
                );
            }
        }
        let matmul = Op::READS_DESTINATION
            .iter()
            .find(|(n, _)| *n == "nc_matmul");
        assert_eq!(matmul, Some(&("nc_matmul", &["dst"][..])));
    }

    /// Every required keyword of an instruction without a hook is declared by one of its
    /// fields, or has a neutral spelling (an operator, a scalar).
    #[test]
    fn required_keywords_are_declared() {
        for (name, fields, _) in Op::KEYWORDS {
            if hooks::hook(name).is_some() {
                continue;
            }
            let spec = nki_spec::instruction(name).expect("declared in nki_spec");
            let declared: Vec<&str> = fields.iter().flat_map(|f| f.iter().copied()).collect();
            for p in spec.params {
                if p.default == nki_spec::Default::Required {
                    assert!(
                        declared.contains(&p.name),
                        "nisa.{name}: required `{}` is not declared",
                        p.name
                    );
                }
            }
        }
    }

    /// Hooks belong to declared instructions.
    #[test]
    fn hooks_name_declared_instructions() {
        for spec in nki_spec::INSTRUCTIONS {
            if hooks::hook(spec.name).is_some() {
                assert!(Op::NAMES.contains(&spec.name), "{}", spec.name);
            }
        }
    }
}
