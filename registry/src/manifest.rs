//! The manifest: every registered op as JSON data (name, schema, params, contract, docs,
//! replaces, source location), for the Python layer and for humans.

use crate::Registry;
use nki_core::autodiff::BackwardPlan;
use nki_core::contract::Contract;
use nki_core::contract::sharding::Sharding;
use nki_core::dtype::{DType, DTypeInfo, HOST_DTYPES, HostDType};
use nki_core::kernel_def::ParamDef;
use nki_core::op_info::{AutocastPolicy, ResolvedSample, ToleranceClass};
use serde::Serialize;

/// The op that returns every output of a kernel with `saved` outputs.
#[derive(Clone, Debug, Serialize)]
pub struct ForwardOp {
    /// `<name>_fwd`.
    pub name: String,
    /// Its schema, returning every output.
    pub schema: &'static str,
}

/// A forward kernel's backward: the kernel, what the forward saves, and the plan that wires a
/// forward call into it (each backward argument and output by position).
#[derive(Clone, Debug, Serialize)]
pub struct BackwardEntry {
    /// The backward kernel's name.
    pub kernel: &'static str,
    /// The forward inputs and outputs kept for it, by name.
    pub saves: &'static [&'static str],
    /// What the forward saves, what each backward argument is, what each output is the
    /// gradient of.
    #[serde(flatten)]
    pub plan: BackwardPlan,
}

/// One op of the manifest.
#[derive(Clone, Debug, Serialize)]
pub struct ManifestEntry {
    /// Op name.
    pub name: &'static str,
    /// Torch schema (the outputs that are not `saved`).
    pub schema: &'static str,
    /// For kernels with `saved` outputs, the op that returns all of them.
    pub forward_op: Option<ForwardOp>,
    /// Doc comment.
    pub doc: &'static str,
    /// Parameters.
    pub params: &'static [ParamDef],
    /// Contract as data (output dims are expressions over input symbols).
    pub contract: Contract,
    /// The shape contract as the attribute writes it (`x[..B, D], weight[D] -> y[..B, D], ...`).
    pub contract_text: String,
    /// The dtype contract as the attribute writes it (`x in {f32, bf16}, weight = x -> x`).
    pub dtype_text: String,
    /// Module patterns this kernel replaces.
    pub replaces: &'static [&'static str],
    /// `file:line` of the kernel.
    pub location: String,
    /// The backward kernel, what the forward saves for it and how a call is wired into it.
    pub backward: Option<BackwardEntry>,
    /// The forward kernel this one is the backward of, if any.
    pub backward_of: Option<&'static str>,
    /// The ATen reference expression.
    pub reference: Option<&'static str>,
    /// Sample arguments, with the dtypes each runs in.
    pub samples: Vec<ResolvedSample>,
    /// Tolerance class.
    pub tolerance: ToleranceClass,
    /// What the op does under `torch.autocast`.
    pub autocast: AutocastPolicy,
    /// The representative large arguments it is graded at, in one dtype.
    pub bench: Option<ResolvedSample>,
    /// What each dimension symbol is when the op's tensors are split across devices
    /// (independent, summed or whole), derived from the contract and the kernel's `shard(...)`
    /// declarations: what DTensor sharding rules are registered from.
    pub sharding: Sharding,
}

/// Every registered op, sorted by name, and the dtype names every layer spells.
#[derive(Clone, Debug, Serialize)]
pub struct Manifest {
    /// Format version of this document ([`Manifest::VERSION`]).
    pub version: u32,
    /// Every kernel dtype with its names (kernel, NKI, torch), in [`DType::ALL`] order.
    pub dtypes: Vec<DTypeInfo>,
    /// Host dtypes a caller may pass that kernels compute in a narrower kernel dtype.
    pub host_dtypes: &'static [HostDType],
    /// The ops.
    pub ops: Vec<ManifestEntry>,
}

impl Manifest {
    /// The layout version (`MANIFEST_VERSION` in `torch_nki._manifest`).
    pub const VERSION: u32 = 4;

    /// Builds the manifest of every kernel of `reg` (sorted by name).
    pub fn new(reg: &Registry) -> Manifest {
        let defs: Vec<_> = reg.kernels().collect();
        let backward_of = |name: &str| {
            defs.iter()
                .find(|f| f.backward.as_ref().is_some_and(|b| b.kernel.name == name))
                .map(|f| f.name)
        };
        let ops =
            defs.iter()
                .map(|d| ManifestEntry {
                    name: d.name,
                    schema: d.schema,
                    forward_op: d
                        .forward_schema
                        .zip(d.forward_op_name())
                        .map(|(schema, name)| ForwardOp { name, schema }),
                    doc: d.doc,
                    params: d.params,
                    contract: d.contract,
                    contract_text: d.contract.to_string(),
                    dtype_text: d.contract.dtype_text(),
                    replaces: d.replaces,
                    location: d.location.to_string(),
                    backward: d.backward.as_ref().zip(reg.backward_plan(d.name)).map(
                        |(b, plan)| BackwardEntry {
                            kernel: b.kernel.name,
                            saves: b.saves,
                            plan: plan.clone(),
                        },
                    ),
                    backward_of: backward_of(d.name),
                    reference: d.reference,
                    samples: d.samples.iter().map(|s| s.resolve(&d.contract)).collect(),
                    tolerance: d.tolerance,
                    autocast: d.autocast,
                    bench: d.bench.map(|b| {
                        let mut r = b.resolve(&d.contract);
                        r.dtypes = b.bench_dtype(&d.contract).into_iter().collect();
                        r
                    }),
                    sharding: d.contract.sharding(d.shard),
                })
                .collect();
        Manifest {
            version: Manifest::VERSION,
            dtypes: DType::ALL.into_iter().map(DType::info).collect(),
            host_dtypes: &HOST_DTYPES,
            ops,
        }
    }

    /// Pretty-printed JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self)
            .expect("the manifest is plain data and always serialises")
    }
}
