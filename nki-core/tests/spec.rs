//! The IR agrees with the `nki_spec` declarations (codegen's names and keywords are derived from
//! them, and `tests/tests/codegen.rs` holds generated code to that table).

use nki_spec::Status;

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
