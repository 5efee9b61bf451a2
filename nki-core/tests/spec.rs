//! The IR and codegen agree with the `nki_spec` declarations: every instruction codegen emits is
//! declared, implemented, and called with keywords its declaration has.

use nki_spec::Status;

#[test]
fn every_instruction_codegen_emits_is_declared_implemented_with_its_keywords() {
    let mut seen = 0;
    for emitted in nki_core::codegen::EMITTED {
        let Some(name) = emitted.name.strip_prefix("nisa.") else {
            continue;
        };
        if name.contains('.') {
            let (enum_name, variant) = name.split_once('.').unwrap();
            let spec = nki_spec::enum_spec(enum_name).unwrap_or_else(|| panic!("{name}"));
            assert!(spec.variant(variant).is_some(), "{name}");
            continue;
        }
        let spec = nki_spec::instruction(name).unwrap_or_else(|| panic!("{name} is not declared"));
        assert_eq!(spec.status, Status::Implemented, "{name}");
        for keyword in emitted.keywords {
            assert!(
                spec.param(keyword).is_some(),
                "{name} has no keyword {keyword}"
            );
        }
        seen += 1;
    }
    assert!(seen >= 14, "codegen emits {seen} instructions");
}

#[test]
fn the_ir_and_the_declarations_implement_the_same_instructions() {
    for name in nki_core::ir::Op::NAMES {
        let spec = nki_spec::instruction(name).unwrap_or_else(|| panic!("{name} is not declared"));
        assert_eq!(spec.status, Status::Implemented, "the IR has {name}");
    }
    // What the declarations call implemented and the IR has no instruction for is a frontend
    // lowering onto others (activation_reduce is activation with a reduction).
    let lowered: Vec<&str> = nki_spec::INSTRUCTIONS
        .iter()
        .filter(|i| i.status == Status::Implemented && !nki_core::ir::Op::NAMES.contains(&i.name))
        .map(|i| i.name)
        .collect();
    assert_eq!(lowered, ["activation_reduce"]);
}
