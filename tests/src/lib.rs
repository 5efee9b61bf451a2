//! Shared helpers of the cross-crate tests.
//!
//! The ATen accuracy harness (`tests/reference/README.md`) lives here: [`prng`] makes the inputs exactly as
//! `tests/reference/generate.py` does, [`fixtures`] loads the ATen outputs that script wrote,
//! [`run::run_case`] runs a case through registry → compile cache → simulator, and [`report`]
//! applies the tolerances and renders the report `tests/tests/accuracy.rs` snapshots;
//! [`samples`] lists the signatures the kernels' samples declare, [`programs`] runs a traced
//! program on PRNG inputs; [`snapshots`] holds the settings
//! every snapshot test shares ([`assert_snapshot!`]).

#![warn(missing_docs)]

pub mod fixtures;
pub mod prng;
pub mod programs;
pub mod report;
pub mod run;
pub mod samples;
pub mod snapshots;

/// insta, for [`assert_snapshot!`] (which binds [`snapshots::settings`]).
pub use insta;

pub use fixtures::{Case, Fixtures};
pub use report::CaseResult;
pub use run::{CaseRun, run_case};
pub use samples::{Samples, sample_signatures};

// The kernel library registers through `inventory`; keep it linked.
use nki_kernels as _;

/// Failures of the accuracy harness.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading a fixture file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A fixture is malformed or disagrees with the kernel.
    #[error("{0}")]
    Fixture(String),
    /// Registry lookup failed.
    #[error(transparent)]
    Registry(#[from] nki_registry::RegistryError),
    /// Tracing, validation or simulation failed (boxed: `NkiError` is large).
    #[error(transparent)]
    Nki(Box<nki_core::NkiError>),
}

impl From<nki_core::NkiError> for Error {
    fn from(e: nki_core::NkiError) -> Error {
        Error::Nki(Box::new(e))
    }
}

impl Error {
    /// An I/O failure on `path`.
    fn io(path: &std::path::Path, source: std::io::Error) -> Error {
        Error::Io {
            path: path.display().to_string(),
            source,
        }
    }
}

/// Runs `case` and compares each output with its ATen reference under the tolerance the
/// kernel's tolerance class gives (one result per output; named `case` or `case.output`).
pub fn evaluate(case: &Case) -> Result<Vec<CaseResult>, Error> {
    let run = run_case(case)?;
    let multi = case.outputs.len() > 1;
    case.outputs
        .iter()
        .map(|spec| {
            let (_, actual) = run
                .outputs
                .iter()
                .find(|(name, _)| *name == spec.name)
                .ok_or_else(|| {
                    Error::Fixture(format!(
                        "{}: `{}` has no output `{}`",
                        case.name, case.op, spec.name
                    ))
                })?;
            if actual.len() != spec.numel() {
                return Err(Error::Fixture(format!(
                    "{}: output `{}` has {} elements, the fixture expects shape {:?}",
                    case.name,
                    spec.name,
                    actual.len(),
                    spec.shape
                )));
            }
            let tol = run
                .def
                .tolerance
                .tolerance(spec.dtype, &run.bindings)
                .ok_or_else(|| {
                    Error::Fixture(format!("{}: no tolerance for {}", case.name, spec.dtype))
                })?;
            let reference = spec.reference_from(&fixtures::fixture_dir())?;
            let name = if multi {
                format!("{}.{}", case.name, spec.name)
            } else {
                case.name.clone()
            };
            Ok(CaseResult::compare(
                &name,
                tol,
                actual,
                &spec.stored_indices(),
                &reference,
            ))
        })
        .collect()
}
