//! Accuracy of every library kernel against ATen (DESIGN §13–§14).
//!
//! Each case of `tests/reference/fixtures/cases.json` runs through the registry, the compile
//! cache and the CPU simulator on PRNG inputs, and is compared element-wise with the ATen output
//! `tests/reference/generate.py` stored. The report (one line per case) is snapshotted, so any
//! change in a kernel's numerics shows up in review; every case must also pass its tolerance,
//! whatever the snapshot says.

use nki_registry::Registry;
use nki_tests::{CaseResult, Fixtures, evaluate};

#[test]
fn kernels_match_aten_within_tolerance() {
    let fixtures = Fixtures::load().expect("load tests/reference/fixtures/cases.json");
    let results: Vec<CaseResult> = fixtures
        .cases
        .iter()
        .map(|case| evaluate(case).unwrap_or_else(|e| panic!("case {}: {e}", case.name)))
        .collect();
    let report = nki_tests::report::render(&results);
    insta::assert_snapshot!("accuracy", report);

    let failed: Vec<String> = results
        .iter()
        .filter(|r| !r.passed())
        .map(|r| {
            let (i, a, reference) = r.worst.unwrap_or((0, f32::NAN, f32::NAN));
            format!(
                "{}: {} of {} elements out of tolerance; worst at flat index {i}: \
                 kernel {a:e}, ATen {reference:e}",
                r.name, r.failures, r.checked
            )
        })
        .collect();
    assert!(
        failed.is_empty(),
        "cases outside their DESIGN §14 tolerance:\n{}\n\n{report}",
        failed.join("\n")
    );
}

#[test]
fn every_registered_kernel_has_reference_cases() {
    let fixtures = Fixtures::load().expect("load tests/reference/fixtures/cases.json");
    let missing: Vec<&str> = Registry::global()
        .expect("registry")
        .names()
        .into_iter()
        .filter(|op| !fixtures.cases.iter().any(|c| c.op == *op))
        .collect();
    assert!(
        missing.is_empty(),
        "kernels without ATen reference cases (add them to tests/reference/generate.py): {missing:?}"
    );
}
