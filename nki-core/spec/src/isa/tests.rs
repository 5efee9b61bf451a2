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
        let problems = signature_problems(inst.params);
        assert!(problems.is_empty(), "{}: {problems:?}", inst.name);
    }
}

#[test]
fn signature_check_catches_broken_signatures() {
    use build::{flag, opt, req};
    assert!(signature_problems(&[req("dst", Kind::TileOut), flag("negate", false)]).is_empty());
    let broken = [
        flag("negate", false),
        req("dst", Kind::TileOut),
        opt("axis", Kind::Bool, Default::Int(1)),
        req("dst", Kind::TileOut),
    ];
    assert_eq!(
        signature_problems(&broken).len(),
        4,
        "{:?}",
        signature_problems(&broken)
    );
}

#[test]
fn name_comes_last() {
    for inst in INSTRUCTIONS {
        if let Some(at) = inst.params.iter().position(|p| p.name == "name") {
            assert_eq!(
                at + 1,
                inst.params.len(),
                "{}: name= is not last",
                inst.name
            );
            assert_eq!(inst.params[at], build::NAME, "{}", inst.name);
        }
    }
}

#[test]
fn engines_are_nisa_engine_variants() {
    let spec = enum_spec("engine").unwrap();
    for inst in INSTRUCTIONS {
        for engine in inst.engines {
            assert!(
                spec.variant(engine.name()).is_some(),
                "{}: {engine:?}",
                inst.name
            );
        }
        let mut names: Vec<&str> = inst.engines.iter().map(|e| e.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(
            names.len(),
            inst.engines.len(),
            "{}: an engine twice",
            inst.name
        );
    }
}

#[test]
fn engine_default_is_listed_first() {
    for inst in INSTRUCTIONS {
        let Some(p) = inst.param("engine") else {
            continue;
        };
        let Default::Enum("engine", default) = p.default else {
            panic!("{}: engine= defaults to {:?}", inst.name, p.default)
        };
        if default != "unknown" {
            assert_eq!(inst.engines[0].name(), default, "{}", inst.name);
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
