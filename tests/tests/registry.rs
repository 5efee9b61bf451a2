//! Snapshots of what the registry exports: every op's torch schema and the full manifest.

use nki_kernels as _;
use nki_registry::Registry;

#[test]
fn registry_holds_exactly_the_library_kernels() {
    assert_eq!(
        Registry::global().unwrap().names(),
        ["add", "matmul", "rmsnorm"]
    );
}

#[test]
fn schemas() {
    let reg = Registry::global().unwrap();
    let lines: Vec<String> = reg.kernels().map(|k| k.schema.to_string()).collect();
    insta::assert_snapshot!(lines.join("\n"));
}

#[test]
fn manifest() {
    let json = Registry::global().unwrap().manifest().to_json();
    // Source paths are relative to the workspace; keep them as they are (they are stable).
    insta::assert_snapshot!(json);
}
