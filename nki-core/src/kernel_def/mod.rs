//! Kernel definitions as the `#[kernel]` macro emits them, their arguments, and the signature a
//! kernel is specialised (traced) for.

mod args;

pub use args::{ArgValue, IntoOutputs, KernelArgs};

use crate::autodiff::{BackwardArg, BackwardDef, SavedTensor};
use crate::compile::CheckedSignature;
use crate::contract::{Contract, ContractViolation, OutputMeta, Qualified, TensorMeta, Violation};
use crate::dtype::DType;
use crate::error::NkiError;
use crate::ir::Program;
use crate::lang::instances::trace_on_cores_at;
use crate::lang::{Hbm, InputSpec};
use crate::loc::SourceLoc;
use crate::op_info::{AutocastPolicy, Sample, ToleranceClass};
use crate::target::Target;
use serde::Serialize;

/// What kind of value a kernel parameter takes.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ParamKind {
    /// An HBM tensor (`&Hbm`); schema type `Tensor`.
    Tensor,
    /// An optional HBM tensor (`Option<&Hbm>`); schema type `Tensor?`.
    OptionalTensor,
    /// A float scalar (`f32`/`f64`); schema type `float` (`float?` when optional).
    Float {
        /// Default value, if any.
        default: Option<f64>,
        /// `Option<f32>`: the argument may be `None` (its default).
        #[serde(skip_serializing_if = "is_false")]
        optional: bool,
    },
    /// An integer scalar (`i32`/`i64`/`usize`/...); schema type `int` (`int?` when optional).
    Int {
        /// Default value, if any.
        default: Option<i64>,
        /// `Option<i64>`: the argument may be `None` (its default).
        #[serde(skip_serializing_if = "is_false")]
        optional: bool,
    },
    /// A string from a fixed set (`&str` with `#[choices(..)]`); schema type `str`, as
    /// `F.gelu(approximate="tanh")`.
    Str {
        /// The accepted values.
        choices: &'static [&'static str],
        /// Default value, if any (one of `choices`).
        default: Option<&'static str>,
    },
    /// A boolean (`bool`); schema type `bool` (`bool?` when optional).
    Bool {
        /// Default value, if any.
        default: Option<bool>,
        /// `Option<bool>`: the argument may be `None` (its default).
        #[serde(skip_serializing_if = "is_false")]
        optional: bool,
    },
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl ParamKind {
    /// Whether the parameter is a tensor (optional or not).
    pub const fn is_tensor(self) -> bool {
        matches!(self, ParamKind::Tensor | ParamKind::OptionalTensor)
    }

    /// Whether the parameter is a scalar that may be `None`.
    pub const fn is_optional_scalar(self) -> bool {
        matches!(
            self,
            ParamKind::Float { optional: true, .. }
                | ParamKind::Int { optional: true, .. }
                | ParamKind::Bool { optional: true, .. }
        )
    }
}

/// One kernel parameter.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct ParamDef {
    /// Its name (also the schema argument name).
    pub name: &'static str,
    /// Its kind.
    pub kind: ParamKind,
}

/// How a traced kernel is invoked: the generated function that unpacks [`KernelArgs`] and calls
/// the author's function.
pub type TraceFn = fn(&KernelArgs) -> Vec<Hbm>;

/// Everything the registry, the simulator and the Python layer know about one kernel.
#[derive(Debug, Serialize)]
pub struct KernelDef {
    /// The op name: `torch.ops.neuron.<name>`.
    pub name: &'static str,
    /// The doc comment.
    pub doc: &'static str,
    /// The torch schema, e.g. `rmsnorm(Tensor x, Tensor weight, float eps=1e-06) -> Tensor`.
    /// It returns the outputs that are not `saved`.
    pub schema: &'static str,
    /// For a kernel with `saved` outputs, the schema of the op that returns every output
    /// (`rmsnorm_fwd(...) -> (Tensor, Tensor)`, see [`KernelDef::forward_op_name`]); the torch
    /// op `schema` describes returns its public outputs from it.
    pub forward_schema: Option<&'static str>,
    /// Parameters in declaration order.
    pub params: &'static [ParamDef],
    /// The shape and dtype contract.
    pub contract: Contract,
    /// Module classes / functions this kernel can replace (`"*.LlamaRMSNorm"`).
    pub replaces: &'static [&'static str],
    /// Where the kernel function is defined.
    pub location: SourceLoc,
    /// The backward kernel and what the forward saves for it.
    pub backward: Option<BackwardDef>,
    /// What the kernel declares about splitting its tensors across devices where the contract
    /// cannot tell (`shard(...)`); the manifest exports the semantics derived with it
    /// ([`Contract::sharding`]).
    pub shard: &'static [crate::contract::sharding::ShardDecl],
    /// The ATen reference the outputs are compared against: a Python expression over the
    /// parameter names with `torch` and `F` (`torch.nn.functional`) in scope. Backward kernels
    /// have none: they are checked through their forward's gradients.
    pub reference: Option<&'static str>,
    /// Sample arguments every test suite runs (exported with resolved dtypes by the manifest).
    #[serde(skip)]
    pub samples: &'static [Sample],
    /// How closely outputs must match the reference.
    pub tolerance: ToleranceClass,
    /// What the op does under `torch.autocast`.
    pub autocast: AutocastPolicy,
    /// The representative large arguments the op is graded at (`torch-nki bench`).
    #[serde(skip)]
    pub bench: Option<Sample>,
    /// Traces the kernel body.
    #[serde(skip)]
    pub trace: TraceFn,
}

/// The registration `inventory` collects: one per `#[kernel]`.
#[doc(hidden)]
#[derive(Debug)]
pub struct KernelRegistration(pub &'static KernelDef);

inventory::collect!(KernelRegistration);

/// Every kernel linked into this binary, in no particular order. The registry crate sorts,
/// checks for duplicates and looks up by name.
pub fn registered_kernels() -> impl Iterator<Item = &'static KernelDef> {
    inventory::iter::<KernelRegistration>
        .into_iter()
        .map(|r| r.0)
}

/// A scalar argument value.
///
/// Values compare and hash by their canonical form ([`ScalarValue::canonical`]): every NaN is
/// one value and `-0.0` is `0.0`, so a signature with `eps=NaN` finds its compiled program again
/// and `0.0`/`-0.0` share one. Drivers canonicalise the values they trace with, too, so the
/// program a key maps to was traced with the key's value.
#[derive(Clone, Copy, Debug)]
pub enum ScalarValue {
    /// `float`.
    Float(f64),
    /// `int`.
    Int(i64),
    /// `bool`.
    Bool(bool),
    /// `None`, for an optional scalar left out.
    None,
    /// `str`: one of the parameter's choices (the kernel's own string, so it lives forever).
    Str(&'static str),
}

/// A scalar's identity for comparing and hashing (see [`ScalarValue`]).
#[derive(PartialEq, Eq, Hash)]
enum ScalarKey {
    Float(u64),
    Int(i64),
    Bool(bool),
    None,
    Str(&'static str),
}

impl ScalarValue {
    /// The value kernels and cache keys see: every NaN is the canonical NaN, `-0.0` is `0.0`.
    pub fn canonical(self) -> ScalarValue {
        match self {
            ScalarValue::Float(v) if v.is_nan() => ScalarValue::Float(f64::NAN),
            // A float pattern compares with `==`, so this matches `-0.0` too.
            ScalarValue::Float(0.0) => ScalarValue::Float(0.0),
            other => other,
        }
    }

    fn key(self) -> ScalarKey {
        match self.canonical() {
            ScalarValue::Float(v) => ScalarKey::Float(v.to_bits()),
            ScalarValue::Int(v) => ScalarKey::Int(v),
            ScalarValue::Bool(v) => ScalarKey::Bool(v),
            ScalarValue::None => ScalarKey::None,
            ScalarValue::Str(s) => ScalarKey::Str(s),
        }
    }
}

impl PartialEq for ScalarValue {
    fn eq(&self, other: &ScalarValue) -> bool {
        self.key() == other.key()
    }
}

impl std::hash::Hash for ScalarValue {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.key().hash(state);
    }
}

impl Eq for ScalarValue {}

/// A tensor argument's shape and dtype.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TensorSig {
    /// Shape.
    pub shape: Vec<u64>,
    /// Element type.
    pub dtype: DType,
}

/// What a kernel is specialised on: tensor shapes and dtypes, scalar values, target.
/// One [`Program`] is traced per distinct signature.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Signature {
    /// Tensor arguments, in parameter order; `None` is an optional tensor left out.
    pub tensors: Vec<Option<TensorSig>>,
    /// Scalar arguments, in parameter order.
    pub scalars: Vec<ScalarValue>,
    /// The target.
    pub target: Target,
}

impl Signature {
    /// The tensor arguments as the contract sees them (`None`: an optional tensor left out).
    pub fn metas(&self) -> Vec<Option<TensorMeta<'_>>> {
        self.tensors
            .iter()
            .map(|t| {
                t.as_ref().map(|t| TensorMeta {
                    shape: &t.shape,
                    dtype: t.dtype,
                })
            })
            .collect()
    }

    /// A signature from `(shape, dtype)` pairs (tensor parameters in order) and scalar values.
    pub fn new(tensors: &[(&[u64], DType)], scalars: &[ScalarValue], target: Target) -> Signature {
        Signature {
            tensors: tensors
                .iter()
                .map(|(shape, dtype)| {
                    Some(TensorSig {
                        shape: shape.to_vec(),
                        dtype: *dtype,
                    })
                })
                .collect(),
            scalars: scalars.iter().map(|s| s.canonical()).collect(),
            target,
        }
    }
}

/// Where each parameter's value comes from while tracing.
enum Slot {
    Tensor,
    Absent,
    Scalar(ScalarValue),
}

impl KernelDef {
    /// The name of the op that returns every output of a kernel with `saved` outputs:
    /// `<name>_fwd`.
    pub fn forward_op_name(&self) -> Option<String> {
        self.forward_schema.map(|_| format!("{}_fwd", self.name))
    }

    /// Tensor parameters, in order.
    pub fn tensor_params(&self) -> impl Iterator<Item = &'static ParamDef> {
        self.params.iter().filter(|p| p.kind.is_tensor())
    }

    /// Scalar parameters, in order.
    pub fn scalar_params(&self) -> impl Iterator<Item = &'static ParamDef> {
        self.params.iter().filter(|p| !p.kind.is_tensor())
    }

    /// The backward kernel and its signature after a forward call with `sig`, as its
    /// [`BackwardPlan`](crate::autodiff::BackwardPlan) wires it: saved inputs and outputs,
    /// `grad_<output>` shaped like each output, the forward's scalars. `None` without a
    /// backward or when `sig` breaks the forward's contract.
    pub fn backward_signature(&self, sig: &Signature) -> Option<(&'static KernelDef, Signature)> {
        let bwd = self.backward.as_ref()?;
        let plan = bwd.plan(self).ok()?;
        let outs: Vec<TensorSig> = self
            .check(sig)
            .ok()?
            .into_outputs()
            .into_iter()
            .map(|m| TensorSig {
                shape: m.shape,
                dtype: m.dtype,
            })
            .collect();
        // A forward parameter position as an index into `sig.tensors` or `sig.scalars`.
        let among = |param: usize| {
            let tensor = self.params[param].kind.is_tensor();
            self.params[..param]
                .iter()
                .filter(|p| p.kind.is_tensor() == tensor)
                .count()
        };
        let (mut tensors, mut scalars) = (Vec::new(), Vec::new());
        for arg in &plan.args {
            match *arg {
                BackwardArg::Grad { output } => tensors.push(Some(outs.get(output)?.clone())),
                BackwardArg::Saved { slot } => tensors.push(match *plan.saved.get(slot)? {
                    SavedTensor::Input { param } => sig.tensors.get(among(param))?.clone(),
                    SavedTensor::Output { output } => Some(outs.get(output)?.clone()),
                }),
                BackwardArg::Scalar { param } => scalars.push(*sig.scalars.get(among(param))?),
            }
        }
        Some((
            bwd.kernel,
            Signature {
                tensors,
                scalars,
                target: sig.target,
            },
        ))
    }

    /// Checks a signature against the contract and the parameter kinds: the checked signature
    /// The string parameters among `scalars` (one value per scalar parameter, in order) as
    /// `(name, value)`: what chooses the shape of a `match` output.
    pub fn choices(&self, scalars: &[ScalarValue]) -> Vec<(&'static str, &'static str)> {
        self.scalar_params()
            .zip(scalars)
            .filter_map(|(p, v)| match v {
                ScalarValue::Str(s) => Some((p.name, *s)),
                _ => None,
            })
            .collect()
    }

    /// (with its outputs) that tracing takes. Scalars are canonicalised.
    pub fn check(&self, sig: &Signature) -> Result<CheckedSignature<'_>, NkiError> {
        let scalars: Vec<&ParamDef> = self.scalar_params().collect();
        if sig.scalars.len() != scalars.len() {
            return Err(NkiError::Buffers(format!(
                "{}: expected {} scalar arguments, got {}",
                Qualified(self.name),
                scalars.len(),
                sig.scalars.len()
            )));
        }
        for (p, v) in scalars.iter().zip(&sig.scalars) {
            let ok = (p.kind.is_optional_scalar() && matches!(v, ScalarValue::None))
                || matches!(
                    (p.kind, v),
                    (
                        ParamKind::Float { .. },
                        ScalarValue::Float(_) | ScalarValue::Int(_)
                    ) | (ParamKind::Int { .. }, ScalarValue::Int(_))
                        | (ParamKind::Bool { .. }, ScalarValue::Bool(_))
                )
                || matches!(
                    (p.kind, v),
                    (ParamKind::Str { choices, .. }, ScalarValue::Str(s)) if choices.contains(s)
                );
            if !ok {
                return Err(NkiError::Buffers(format!(
                    "{}: argument {} got {v:?}",
                    Qualified(self.name),
                    p.name
                )));
            }
        }
        for (p, t) in self.tensor_params().zip(&sig.tensors) {
            if t.is_none() && p.kind == ParamKind::Tensor {
                return Err(NkiError::Contract(ContractViolation {
                    op: self.name.to_string(),
                    violation: Box::new(Violation::MissingTensor { param: p.name }),
                }));
            }
        }
        let outputs =
            self.contract
                .check_call(self.name, &sig.metas(), &self.choices(&sig.scalars))?;
        let mut sig = sig.clone();
        sig.scalars = sig.scalars.iter().map(|s| s.canonical()).collect();
        Ok(CheckedSignature {
            def: self,
            sig,
            outputs,
        })
    }
}

impl CheckedSignature<'_> {
    /// Traces the kernel body into a program for this signature. The traced outputs must have
    /// the shapes and dtypes the contract promises, and cover every element.
    pub fn trace(&self) -> Result<Program, NkiError> {
        self.trace_on_cores(self.sig.target.default_lnc())
    }

    /// [`CheckedSignature::trace`] for a logical NeuronCore of `cores` physical cores (1 for
    /// LNC=1): a kernel that splits its work by program id is launched on `cores` instances.
    pub fn trace_on_cores(&self, cores: usize) -> Result<Program, NkiError> {
        let (this, sig, expected) = (self.def, &self.sig, &self.outputs);
        this.trace_body(sig, expected, cores)
    }
}

impl KernelDef {
    fn trace_body(
        &self,
        sig: &Signature,
        expected: &[OutputMeta],
        cores: usize,
    ) -> Result<Program, NkiError> {
        let mut tensors = sig.tensors.iter();
        let mut scalars = sig.scalars.iter();
        let mut inputs = Vec::new();
        let mut slots = Vec::new();
        for p in self.params {
            if p.kind.is_tensor() {
                match tensors.next().expect("check() matched tensor count") {
                    Some(t) => {
                        slots.push(Slot::Tensor);
                        inputs.push(InputSpec {
                            name: p.name.to_string(),
                            shape: t.shape.iter().map(|&d| d as usize).collect(),
                            dtype: t.dtype,
                        });
                    }
                    None => slots.push(Slot::Absent),
                }
            } else {
                slots.push(Slot::Scalar(
                    *scalars.next().expect("check() matched scalar count"),
                ));
            }
        }
        let trace_fn = self.trace;
        let program = trace_on_cores_at(
            self.name,
            sig.target,
            cores,
            &inputs,
            |handles| {
                let mut h = handles.iter();
                let values = slots
                    .iter()
                    .map(|s| match s {
                        Slot::Scalar(v) => ArgValue::Scalar(*v),
                        Slot::Absent => ArgValue::Absent,
                        Slot::Tensor => ArgValue::Tensor(
                            h.next().expect("one handle per present tensor").clone(),
                        ),
                    })
                    .collect();
                trace_fn(&KernelArgs::new(values))
            },
            self.location,
        )?;
        let actual: Vec<OutputMeta> = program
            .outputs
            .iter()
            .map(|id| {
                let d = &program.hbm[id.0 as usize];
                OutputMeta {
                    shape: d.shape.iter().map(|&s| s as u64).collect(),
                    dtype: d.dtype,
                }
            })
            .collect();
        for (i, (got, want)) in actual.iter().zip(expected).enumerate() {
            if got != want {
                let name = self.contract.outputs.get(i).map_or("?", |o| o.name);
                return Err(NkiError::Trace {
                    message: format!(
                        "kernel {} returns output `{name}` as {} {:?}, but its contract promises {} {:?} for these inputs",
                        self.name, got.dtype, got.shape, want.dtype, want.shape
                    ),
                    loc: self.location,
                });
            }
        }
        let names: Vec<&str> = self.contract.outputs.iter().map(|o| o.name).collect();
        crate::coverage::check_output_coverage(&program, &names, self.location)?;
        Ok(program)
    }
}
