use super::*;
use crate::enums::enum_spec;

#[test]
fn names_are_unique() {
    let mut names: Vec<&str> = INSTRUCTIONS.iter().map(|i| i.name).collect();
    names.sort_unstable();
    let before = names.len();
    names.dedup();
    assert_eq!(before, names.len(), "an instruction is declared twice");
}

#[test]
fn signatures_are_valid_python() {
    for inst in INSTRUCTIONS {
        let mut seen_default = false;
        let mut names = std::collections::HashSet::new();
        for p in inst.params {
            assert!(names.insert(p.name), "{}: {} twice", inst.name, p.name);
            let required = p.default == Default::Required;
            assert!(
                !(required && seen_default),
                "{}: required {} after a defaulted parameter",
                inst.name,
                p.name
            );
            seen_default |= !required;
        }
    }
}

#[test]
fn enum_defaults_name_declared_variants() {
    for inst in INSTRUCTIONS {
        for p in inst.params {
            if let Kind::Enum(kind) = p.kind {
                let spec = enum_spec(kind)
                    .unwrap_or_else(|| panic!("{}.{}: no enum {kind}", inst.name, p.name));
                if let Default::Enum(of, variant) = p.default {
                    assert_eq!(of, kind, "{}.{}", inst.name, p.name);
                    assert!(
                        spec.variant(variant).is_some(),
                        "{}.{}: {kind}.{variant} is not declared",
                        inst.name,
                        p.name
                    );
                }
            }
            if let Default::Enum(..) = p.default {
                assert!(matches!(p.kind, Kind::Enum(_)), "{}.{}", inst.name, p.name);
            }
        }
    }
}

#[test]
fn engine_parameters_list_their_engines() {
    for inst in INSTRUCTIONS {
        if inst.takes_engine() {
            assert!(!inst.engines.is_empty(), "{}", inst.name);
        }
    }
}

#[test]
fn lookups_find_declarations() {
    assert_eq!(instruction("tensor_tensor").unwrap().name, "tensor_tensor");
    assert!(instruction("no_such_instruction").is_none());
    assert!(Targets::GEN3.includes(NcVersion::Gen4));
    assert!(!Targets::GEN4.includes(NcVersion::Gen3));
}

#[test]
fn declarations_serialise() {
    let text = serde_json::to_string(INSTRUCTIONS).unwrap();
    assert!(text.contains(r#""name":"tensor_tensor""#), "{text}");
}
