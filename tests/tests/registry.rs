//! What the registry holds and exports: exactly the kernels declared under `kernels/src`, each
//! forward with a reference and samples (backward kernels are checked through their forward),
//! every schema, and the full manifest.

use nki_core::Target;
use nki_kernels as _;
use nki_registry::Registry;
use std::path::Path;

/// The kernels declared under `kernels/src` (subdirectories included): the `fn` after every `#[kernel(` attribute, read from
/// the source rather than kept as a list, so the registry test cannot drift from the library.
fn declared_kernels() -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../kernels/src");
    let mut names = Vec::new();
    let mut files = Vec::new();
    let mut dirs = vec![dir];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("kernels/src") {
            let path = entry.expect("dir entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("kernel source");
        let mut in_attr = false;
        for line in text.lines().map(str::trim) {
            if line.starts_with("#[kernel(") {
                in_attr = true;
            } else if in_attr && let Some(rest) = line.strip_prefix("pub fn ") {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                names.push(name);
                in_attr = false;
            }
        }
    }
    names.sort();
    names
}

#[test]
fn registry_holds_exactly_the_kernels_declared_in_the_library() {
    let declared = declared_kernels();
    assert!(declared.len() >= 2, "found kernels: {declared:?}");
    assert_eq!(Registry::global().unwrap().names(), declared);
}

#[test]
fn every_kernel_has_a_reference_samples_and_a_bench_shape_or_is_a_backward() {
    let reg = Registry::global().unwrap();
    let manifest = reg.manifest();
    for op in &manifest.ops {
        if op.backward_of.is_some() {
            assert!(
                op.reference.is_none() && op.samples.is_empty(),
                "`{}` is the backward of `{}`; it is tested through its forward's gradients",
                op.name,
                op.backward_of.unwrap_or_default()
            );
        } else {
            assert!(
                op.reference.is_some() && !op.samples.is_empty(),
                "`{}` ({}) declares no reference(...) and sample(...), and is no kernel's backward",
                op.name,
                op.location
            );
            assert!(
                op.bench.as_ref().is_some_and(|b| b.dtypes.len() == 1),
                "`{}` ({}) declares no bench(...): the large shape `torch-nki bench` grades it at",
                op.name,
                op.location
            );
        }
    }
}

#[test]
fn every_sample_satisfies_its_contract_and_validates_on_every_target() {
    let reg = Registry::global().unwrap();
    for def in reg.kernels() {
        for sample in def.samples {
            for dtype in sample.dtypes_for(&def.contract) {
                for target in [Target::Trn1, Target::Trn2, Target::Trn3] {
                    let sig = sample
                        .signature(def, dtype, target)
                        .expect("samples give every argument");
                    let program = def
                        .check(&sig)
                        .and_then(|c| c.trace())
                        .unwrap_or_else(|e| panic!("{} {sample:?} {dtype}: {e}", def.name));
                    nki_core::validate::validate(&program).unwrap_or_else(|e| {
                        panic!("{} {sample:?} {dtype} {target:?}: {e}", def.name)
                    });
                }
            }
        }
    }
}

#[test]
fn schemas() {
    let reg = Registry::global().unwrap();
    let lines: Vec<String> = reg
        .kernels()
        .flat_map(|k| std::iter::once(k.schema).chain(k.forward_schema))
        .map(str::to_string)
        .collect();
    nki_tests::assert_snapshot!(lines.join("\n"));
}

#[test]
fn manifest() {
    let json = Registry::global().unwrap().manifest().to_json();
    // Source paths are relative to the workspace; the snapshot keeps each `location`'s file and
    // drops its line (`nki_tests::snapshots`).
    nki_tests::assert_snapshot!(json);
}
