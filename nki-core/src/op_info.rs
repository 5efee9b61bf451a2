//! What the test suites know about an op, declared beside its kernel (PyTorch's `OpInfo` is the
//! model): the ATen **reference** the outputs are compared against, the **sample** arguments
//! every suite runs (ragged and edge shapes included) and the **tolerance class** that picks
//! `rtol`/`atol` per dtype.
//!
//! The `#[kernel]` attribute fills these from its `reference(...)`, `sample(...)` and
//! `tolerance(...)` clauses; the fixture generator, the accuracy snapshots, opcheck, gradient
//! checks and the demo read them from the registry, so no suite keeps a list of ops.

use crate::contract::{Bindings, Contract, DimExpr, DtypeRule};
use crate::dtype::DType;
use crate::kernel_def::{KernelDef, ParamKind, ScalarValue, Signature, TensorSig};
use crate::target::Target;
use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};

/// One argument of a [`Sample`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SampleArg {
    /// A tensor of this shape (values come from the test's PRNG).
    Tensor(&'static [u64]),
    /// An optional tensor left out (`None`).
    Absent,
    /// A `float` scalar.
    Float(f64),
    /// An `int` scalar.
    Int(i64),
    /// A `bool` scalar.
    Bool(bool),
    /// A `str` scalar.
    Str(&'static str),
}

/// One set of sample arguments: every tensor parameter's shape and any scalar that should not
/// take its default. Parameters are named as in the kernel function.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    /// `(parameter, value)` pairs in parameter order; scalars left out take their default.
    pub args: &'static [(&'static str, SampleArg)],
    /// The dtypes this sample runs in; empty means every float dtype the contract admits among
    /// f32, bf16 and f16.
    pub dtypes: &'static [DType],
}

impl Sample {
    /// The dtypes this sample runs in under `contract`: the declared ones, or every float dtype
    /// among f32, bf16 and f16 that the first tensor parameter's rule admits.
    pub fn dtypes_for(&self, contract: &Contract) -> Vec<DType> {
        if !self.dtypes.is_empty() {
            return self.dtypes.to_vec();
        }
        let Some(first) = contract.inputs.first() else {
            return Vec::new();
        };
        let mut param = first.param;
        for _ in 0..=contract.dtypes.len() {
            match contract
                .dtypes
                .iter()
                .find(|r| r.param == param)
                .map(|r| r.rule)
            {
                Some(DtypeRule::OneOf { allowed }) => {
                    return [DType::F32, DType::BF16, DType::F16]
                        .into_iter()
                        .filter(|d| allowed.contains(d))
                        .collect();
                }
                Some(DtypeRule::SameAs { param: next }) => param = next,
                None => break,
            }
        }
        Vec::new()
    }

    /// The signature of this sample in `dtype` (every tensor in `dtype`) for `target`; scalars
    /// not given take their default. `None` if a tensor or a scalar without default is missing
    /// (the `#[kernel]` macro rejects such samples).
    pub fn signature(&self, def: &KernelDef, dtype: DType, target: Target) -> Option<Signature> {
        let mut tensors = Vec::new();
        let mut scalars = Vec::new();
        for p in def.params {
            let given = self.get(p.name);
            match (p.kind, given) {
                (ParamKind::Tensor | ParamKind::OptionalTensor, Some(SampleArg::Tensor(shape))) => {
                    tensors.push(Some(TensorSig {
                        shape: shape.to_vec(),
                        dtype: def.contract.fixed_dtype(p.name).unwrap_or(dtype),
                    }))
                }
                (ParamKind::OptionalTensor, Some(SampleArg::Absent)) => tensors.push(None),
                (ParamKind::Float { .. }, Some(SampleArg::Float(v))) => {
                    scalars.push(ScalarValue::Float(v))
                }
                (ParamKind::Float { .. }, Some(SampleArg::Int(v))) => {
                    scalars.push(ScalarValue::Float(v as f64))
                }
                (ParamKind::Int { .. }, Some(SampleArg::Int(v))) => {
                    scalars.push(ScalarValue::Int(v))
                }
                (ParamKind::Bool { .. }, Some(SampleArg::Bool(v))) => {
                    scalars.push(ScalarValue::Bool(v))
                }
                (
                    ParamKind::Float {
                        default: Some(v), ..
                    },
                    None,
                ) => scalars.push(ScalarValue::Float(v)),
                (
                    ParamKind::Int {
                        default: Some(v), ..
                    },
                    None,
                ) => scalars.push(ScalarValue::Int(v)),
                (
                    ParamKind::Bool {
                        default: Some(v), ..
                    },
                    None,
                ) => scalars.push(ScalarValue::Bool(v)),
                (ParamKind::Str { choices, .. }, Some(SampleArg::Str(v))) => {
                    scalars.push(ScalarValue::Str(choices.iter().find(|c| **c == v)?))
                }
                (
                    ParamKind::Str {
                        default: Some(v), ..
                    },
                    None,
                ) => scalars.push(ScalarValue::Str(v)),
                (kind, None | Some(SampleArg::Absent)) if kind.is_optional_scalar() => {
                    scalars.push(ScalarValue::None)
                }
                _ => return None,
            }
        }
        Some(Signature {
            tensors,
            scalars,
            target,
        })
    }

    /// The value given for `param`, if any.
    pub fn get(&self, param: &str) -> Option<SampleArg> {
        self.args.iter().find(|(p, _)| *p == param).map(|(_, v)| *v)
    }
}

/// A sample as the manifest exports it: the arguments by name and the resolved dtypes.
#[derive(Clone, Debug, Serialize)]
pub struct ResolvedSample {
    /// Arguments by parameter name: a shape, `null` (absent optional tensor) or a scalar.
    pub args: SampleArgs,
    /// [`Sample::dtypes_for`] the kernel's contract.
    pub dtypes: Vec<DType>,
}

impl Sample {
    /// The one dtype a benchmark runs in: the first declared, else bf16 where the contract
    /// admits it, else the first admitted.
    pub fn bench_dtype(&self, contract: &Contract) -> Option<DType> {
        let all = self.dtypes_for(contract);
        if self.dtypes.is_empty() && all.contains(&DType::BF16) {
            return Some(DType::BF16);
        }
        all.first().copied()
    }

    /// This sample with its dtypes resolved against `contract`.
    pub fn resolve(&self, contract: &Contract) -> ResolvedSample {
        ResolvedSample {
            args: SampleArgs(self.args),
            dtypes: self.dtypes_for(contract),
        }
    }
}

/// Sample arguments, serialised as a map from parameter name to value.
#[derive(Clone, Copy, Debug)]
pub struct SampleArgs(pub &'static [(&'static str, SampleArg)]);

impl Serialize for SampleArgs {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (name, v) in self.0 {
            match v {
                SampleArg::Tensor(shape) => m.serialize_entry(name, shape)?,
                SampleArg::Absent => m.serialize_entry(name, &None::<()>)?,
                SampleArg::Float(x) => m.serialize_entry(name, x)?,
                SampleArg::Int(i) => m.serialize_entry(name, i)?,
                SampleArg::Bool(b) => m.serialize_entry(name, b)?,
                SampleArg::Str(v) => m.serialize_entry(name, v)?,
            }
        }
        m.end()
    }
}

/// How closely an op must match its ATen reference. The class picks `rtol`/`atol` per dtype
/// with [`ToleranceClass::tolerance`]; the numbers are the project's accuracy policy, listed for
/// kernel authors under `tolerance(class)` in `docs/kernel-authoring.md`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ToleranceClass {
    /// Each output element depends on a few input elements (add, silu).
    Elementwise,
    /// Each output element reduces over `dim` elements (rmsnorm over `D`): fp32 is loosened
    /// when the reduction is at least [`LONG_REDUCTION`] long.
    Reduction {
        /// The length of the reduction, over the contract's symbols.
        dim: DimExpr,
    },
    /// A matrix product: fp32 accumulation order differs from ATen's blocked GEMM, so fp32 is
    /// always loosened.
    Matmul,
}

/// What an op does under `torch.autocast`, following torch's policy for ops of its kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AutocastPolicy {
    /// Run on the dtypes given (autocast passes through).
    #[default]
    Keep,
    /// Matmul-like: floating-point inputs are cast to the autocast dtype (bf16 on CPU).
    Lower,
    /// Precision-sensitive: floating-point inputs are cast to f32.
    Fp32,
    /// Mixed inputs are cast to the widest floating-point dtype among them (a bf16 activation
    /// with an f32 weight runs in f32).
    Promote,
}

/// Reductions at least this long get the looser fp32 tolerance.
pub const LONG_REDUCTION: i64 = 4096;

/// `|actual - reference| <= atol + rtol * |reference|` (the `torch.allclose` rule).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Tolerance {
    /// Relative tolerance.
    pub rtol: f64,
    /// Absolute tolerance.
    pub atol: f64,
}

impl ToleranceClass {
    /// The tolerance for outputs of `dtype` when the contract bound `bindings`; `None` for
    /// dtypes without a rule (fp8).
    pub fn tolerance(&self, dtype: DType, bindings: &Bindings) -> Option<Tolerance> {
        let long = match self {
            ToleranceClass::Elementwise => false,
            ToleranceClass::Reduction { dim } => {
                dim.eval(bindings).is_some_and(|n| n >= LONG_REDUCTION)
            }
            ToleranceClass::Matmul => true,
        };
        let (rtol, atol) = match dtype {
            DType::F32 if long => (1e-4, 1e-4),
            DType::F32 => (1e-5, 1e-5),
            DType::BF16 => (1.6e-2, 1e-2),
            DType::F16 => (1e-3, 1e-3),
            DType::I32 => (0.0, 0.0),
            _ => return None,
        };
        Some(Tolerance { rtol, atol })
    }
}
