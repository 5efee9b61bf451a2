//! The ATen reference fixtures written by `tests/reference/generate.py`: `cases.json` and one
//! little-endian `f32` `.bin` file per case output.

use crate::Error;
use nki_core::DType;
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// The `cases.json` layout version this loader reads (`FORMAT_VERSION` in the generator).
pub const FORMAT_VERSION: u32 = 2;

/// The committed fixture directory, `tests/reference/fixtures`.
pub fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("reference")
        .join("fixtures")
}

/// The contents of `cases.json`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fixtures {
    /// Layout version; must equal [`FORMAT_VERSION`].
    pub format: u32,
    /// The script that wrote the file.
    pub generator: String,
    /// The torch version that computed the references.
    pub torch: String,
    /// A one-line description of the input PRNG.
    pub prng: String,
    /// Every case, in generator order.
    pub cases: Vec<Case>,
}

/// One accuracy case: a kernel's declared sample on PRNG inputs in one dtype, with its ATen
/// outputs.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    /// Unique case name, e.g. `rmsnorm_130x96_bf16`.
    pub name: String,
    /// The registered kernel name (`torch.ops.neuron.<op>`).
    pub op: String,
    /// Element type of every input.
    pub dtype: DType,
    /// Tensor arguments, in parameter order.
    pub inputs: Vec<InputSpec>,
    /// Scalar arguments, in parameter order.
    pub scalars: Vec<ScalarArg>,
    /// The reference outputs, in the op's return order.
    pub outputs: Vec<OutputSpec>,
}

/// A tensor argument, regenerated from its seed with [`crate::prng`].
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputSpec {
    /// Parameter name.
    pub name: String,
    /// Row-major shape.
    pub shape: Vec<usize>,
    /// PRNG seed: element `i` is `prng::value(seed, i)` rounded to the case dtype.
    pub seed: u64,
}

/// A scalar argument.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScalarArg {
    /// Parameter name.
    pub name: String,
    /// Its value (converted to the parameter's kind when the kernel is called); `None` for an
    /// optional scalar left out.
    pub value: Option<ScalarJson>,
}

/// A scalar value as JSON writes it.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum ScalarJson {
    /// `true` / `false`.
    Bool(bool),
    /// Any number (ints included).
    Number(f64),
    /// A string (a `str` parameter's choice).
    Str(String),
}

/// Where a reference output is and which part of it is stored.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputSpec {
    /// The output's name in the kernel's contract.
    pub name: String,
    /// Full output shape.
    pub shape: Vec<usize>,
    /// The output's dtype.
    pub dtype: DType,
    /// The rows stored in the fixture (indices into the output viewed as rows of its last
    /// dimension; a row sample keeps large cases small), in file order; `None` when the whole
    /// output is stored.
    pub rows: Option<Vec<usize>>,
    /// The `.bin` file name inside [`fixture_dir`].
    pub file: String,
}

impl OutputSpec {
    /// Elements of the full output.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// Elements per row (the last dimension).
    pub fn row_len(&self) -> usize {
        self.shape.last().copied().unwrap_or(1)
    }

    /// Rows of the output viewed as rows of its last dimension.
    pub fn num_rows(&self) -> usize {
        self.numel() / self.row_len().max(1)
    }

    /// Flat indices into the full output of the stored elements, in file order.
    pub fn stored_indices(&self) -> Vec<usize> {
        match &self.rows {
            None => (0..self.numel()).collect(),
            Some(rows) => {
                let len = self.row_len();
                rows.iter().flat_map(|&r| r * len..(r + 1) * len).collect()
            }
        }
    }
}

impl Fixtures {
    /// Reads and checks `cases.json` from [`fixture_dir`].
    pub fn load() -> Result<Fixtures, Error> {
        Fixtures::load_from(&fixture_dir())
    }

    /// Reads and checks `cases.json` from `dir`: known format, unique case names, output rows
    /// in range.
    pub fn load_from(dir: &Path) -> Result<Fixtures, Error> {
        let path = dir.join("cases.json");
        let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
        let fixtures: Fixtures = serde_json::from_str(&text)
            .map_err(|e| Error::Fixture(format!("{}: {e}", path.display())))?;
        if fixtures.format != FORMAT_VERSION {
            return Err(Error::Fixture(format!(
                "{}: format {} (this loader reads {FORMAT_VERSION}); regenerate with tests/reference/generate.py",
                path.display(),
                fixtures.format
            )));
        }
        let mut names: Vec<&str> = fixtures.cases.iter().map(|c| c.name.as_str()).collect();
        names.sort_unstable();
        if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
            return Err(Error::Fixture(format!("duplicate case name {}", w[0])));
        }
        for case in &fixtures.cases {
            for out in &case.outputs {
                let n = out.num_rows();
                if let Some(bad) = out.rows.iter().flatten().find(|&&r| r >= n) {
                    return Err(Error::Fixture(format!(
                        "{}.{}: stored row {bad} out of range ({n} rows)",
                        case.name, out.name
                    )));
                }
            }
        }
        Ok(fixtures)
    }
}

impl Case {
    /// The stored ATen outputs of this case ([`OutputSpec::stored_indices`] order), read from
    /// [`fixture_dir`].
    pub fn reference(&self) -> Result<Vec<Vec<f32>>, Error> {
        let dir = fixture_dir();
        self.outputs
            .iter()
            .map(|o| o.reference_from(&dir))
            .collect()
    }
}

impl OutputSpec {
    /// The stored ATen output, read from `dir`.
    pub fn reference_from(&self, dir: &Path) -> Result<Vec<f32>, Error> {
        let path = dir.join(&self.file);
        let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
        let expected = self.stored_indices().len() * 4;
        if bytes.len() != expected {
            return Err(Error::Fixture(format!(
                "{}: {} bytes, expected {expected} (stale fixtures? rerun tests/reference/generate.py)",
                path.display(),
                bytes.len()
            )));
        }
        Ok(bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn committed_fixtures_load_and_match_their_sizes() {
        let fixtures = Fixtures::load().unwrap();
        assert!(!fixtures.cases.is_empty());
        for case in &fixtures.cases {
            for r in case.reference().unwrap() {
                assert!(r.iter().all(|v| v.is_finite()), "{}", case.name);
            }
        }
    }

    #[test]
    fn input_streams_do_not_overlap() {
        // splitmix64(s + i): seeds closer than an input's length would share values.
        let fixtures = Fixtures::load().unwrap();
        let mut spans: Vec<(u64, u64, String)> = fixtures
            .cases
            .iter()
            .flat_map(|c| {
                c.inputs.iter().map(move |i| {
                    let n = i.shape.iter().product::<usize>() as u64;
                    (i.seed, i.seed + n, format!("{}.{}", c.name, i.name))
                })
            })
            .collect();
        spans.sort();
        for w in spans.windows(2) {
            assert!(
                w[0].1 <= w[1].0,
                "{} and {} share PRNG values",
                w[0].2,
                w[1].2
            );
        }
    }

    #[test]
    fn row_samples_map_to_flat_indices() {
        let out = OutputSpec {
            name: "out".into(),
            shape: vec![4, 3],
            dtype: DType::F32,
            rows: Some(vec![1, 3]),
            file: String::new(),
        };
        assert_eq!(out.stored_indices(), vec![3, 4, 5, 9, 10, 11]);
        let all = OutputSpec { rows: None, ..out };
        assert_eq!(all.stored_indices(), (0..12).collect::<Vec<_>>());
    }
}
