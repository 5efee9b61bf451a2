//! Accuracy of every library kernel against ATen (`tests/reference/README.md`).
//!
//! `tests/reference/generate.py` turns every declared `sample(...)` of every kernel with a
//! `reference(...)` into fixture cases. Each case runs here through the registry, the compile
//! cache and the CPU simulator on PRNG inputs, and each output is compared element-wise with the
//! stored ATen output under the kernel's tolerance class. The report (one line per output) is
//! snapshotted, so any change in a kernel's numerics shows up in review; every output must also
//! pass its tolerance, whatever the snapshot says.

use nki_registry::Registry;
use nki_tests::{CaseResult, Fixtures, evaluate};

#[test]
fn kernels_match_aten_within_tolerance() {
    let fixtures = Fixtures::load().expect("load tests/reference/fixtures/cases.json");
    let results: Vec<CaseResult> = fixtures
        .cases
        .iter()
        .flat_map(|case| evaluate(case).unwrap_or_else(|e| panic!("case {}: {e}", case.name)))
        .collect();
    let report = nki_tests::report::render(&results);
    nki_tests::assert_snapshot!("accuracy", report);

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
        "outputs outside their tolerance:\n{}\n\n{report}",
        failed.join("\n")
    );
}

#[test]
fn every_kernel_with_a_reference_has_fixture_cases_for_every_sample() {
    let fixtures = Fixtures::load().expect("load tests/reference/fixtures/cases.json");
    for def in Registry::global().expect("registry").kernels() {
        if def.reference.is_none() {
            continue;
        }
        let expected: usize = def
            .samples
            .iter()
            .map(|s| s.dtypes_for(&def.contract).len())
            .sum();
        let found = fixtures.cases.iter().filter(|c| c.op == def.name).count();
        assert_eq!(
            found, expected,
            "`{}` declares {expected} sample cases but the fixtures hold {found}: \
             rerun tests/reference/generate.py",
            def.name
        );
    }
}
