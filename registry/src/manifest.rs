//! The manifest: every registered op as JSON data (name, schema, params, contract, docs,
//! replaces, source location), for the Python layer and for humans.

use nki_core::KernelDef;
use nki_core::contract::Contract;
use nki_core::kernel_def::ParamDef;
use serde::Serialize;

/// One op of the manifest.
#[derive(Clone, Debug, Serialize)]
pub struct ManifestEntry {
    /// Op name.
    pub name: &'static str,
    /// Torch schema.
    pub schema: &'static str,
    /// Doc comment.
    pub doc: &'static str,
    /// Parameters.
    pub params: &'static [ParamDef],
    /// Contract as data (output dims are expressions over input symbols).
    pub contract: Contract,
    /// Module patterns this kernel replaces.
    pub replaces: &'static [&'static str],
    /// `file:line` of the kernel.
    pub location: String,
}

/// Every registered op, sorted by name.
#[derive(Clone, Debug, Serialize)]
pub struct Manifest {
    /// Format version of this document.
    pub version: u32,
    /// The ops.
    pub ops: Vec<ManifestEntry>,
}

impl Manifest {
    /// Builds the manifest of `defs` (in the given order).
    pub fn new<'a>(defs: impl IntoIterator<Item = &'a KernelDef>) -> Manifest {
        let ops = defs
            .into_iter()
            .map(|d| ManifestEntry {
                name: d.name,
                schema: d.schema,
                doc: d.doc,
                params: d.params,
                contract: d.contract,
                replaces: d.replaces,
                location: d.location.to_string(),
            })
            .collect();
        Manifest { version: 1, ops }
    }

    /// Pretty-printed JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self)
            .expect("the manifest is plain data and always serialises")
    }
}
