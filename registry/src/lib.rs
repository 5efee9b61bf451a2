//! # nki-registry
//!
//! The kernel registry of one native binary: every `#[kernel]` that `inventory` collected,
//! looked up by name, checked for duplicate names, exported as a JSON manifest, and compiled
//! (traced + validated) once per signature through the [`CompileCache`].
//!
//! `inventory` only sees crates that are linked: a binary that reads the registry must
//! reference its kernel crates (`use nki_kernels as _;`).

#![warn(missing_docs)]

mod cache;
mod disk_cache;
mod manifest;

pub use cache::{CAPACITY_ENV, CompileCache, DEFAULT_CAPACITY};
pub use disk_cache::{CacheEntry, CacheInfo, DiskCache, EntryKey, FORMAT_VERSION, Lookup};
pub use manifest::{Manifest, ManifestEntry};
pub use nki_core::Compiled;

use nki_core::KernelDef;
use nki_core::autodiff::{BackwardMismatch, BackwardPlan};
use nki_core::kernel_def::registered_kernels;
use std::collections::BTreeMap;
use std::sync::OnceLock;

/// Registry failures.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    /// Two kernels share a name (or one's name is the `<name>_fwd` op of another kernel with
    /// saved outputs).
    #[error("duplicate kernel name `{name}`: defined at {first} and at {second}")]
    Duplicate {
        /// The shared name.
        name: String,
        /// One definition site.
        first: String,
        /// The other definition site.
        second: String,
    },
    /// A kernel's backward declaration does not fit its backward kernel (only possible for
    /// definitions not built by `#[kernel]`, which checks this at compile time).
    #[error("{0}")]
    Backward(#[from] BackwardMismatch),
    /// No kernel with that name.
    #[error("no kernel named `{name}` (registered: {known})")]
    Unknown {
        /// The requested name.
        name: String,
        /// The registered names, comma separated.
        known: String,
    },
}

/// Every kernel of this binary, by name.
#[derive(Debug)]
pub struct Registry {
    kernels: BTreeMap<&'static str, &'static KernelDef>,
    /// The backward plan of every kernel that declares a backward.
    plans: BTreeMap<&'static str, BackwardPlan>,
}

impl Registry {
    /// Builds a registry from kernel definitions, rejecting duplicate names and backward
    /// declarations that do not fit their backward kernel.
    pub fn from_defs(
        defs: impl IntoIterator<Item = &'static KernelDef>,
    ) -> Result<Registry, RegistryError> {
        let mut kernels = BTreeMap::new();
        let mut all: Vec<&'static KernelDef> = defs.into_iter().collect();
        all.sort_by_key(|d| (d.name, d.location.file, d.location.line));
        let mut op_names: BTreeMap<String, &'static KernelDef> = BTreeMap::new();
        for def in &all {
            let names = std::iter::once(def.name.to_string()).chain(def.forward_op_name());
            for name in names {
                if let Some(prev) = op_names.insert(name.clone(), def) {
                    return Err(RegistryError::Duplicate {
                        name,
                        first: prev.location.to_string(),
                        second: def.location.to_string(),
                    });
                }
            }
        }
        let mut plans = BTreeMap::new();
        for def in all {
            if let Some(prev) = kernels.insert(def.name, def) {
                return Err(RegistryError::Duplicate {
                    name: def.name.to_string(),
                    first: prev.location.to_string(),
                    second: def.location.to_string(),
                });
            }
            if let Some(b) = &def.backward {
                plans.insert(def.name, b.plan(def)?);
            }
        }
        Ok(Registry { kernels, plans })
    }

    /// The registry of every kernel linked into this binary (built once).
    pub fn global() -> Result<&'static Registry, RegistryError> {
        static GLOBAL: OnceLock<Result<Registry, RegistryError>> = OnceLock::new();
        GLOBAL
            .get_or_init(|| Registry::from_defs(registered_kernels()))
            .as_ref()
            .map_err(Clone::clone)
    }

    /// The kernel called `name`.
    pub fn get(&self, name: &str) -> Result<&'static KernelDef, RegistryError> {
        self.kernels
            .get(name)
            .copied()
            .ok_or_else(|| RegistryError::Unknown {
                name: name.to_string(),
                known: self.names().join(", "),
            })
    }

    /// Kernel names, sorted.
    pub fn names(&self) -> Vec<&'static str> {
        self.kernels.keys().copied().collect()
    }

    /// Kernels, sorted by name.
    pub fn kernels(&self) -> impl Iterator<Item = &'static KernelDef> + '_ {
        self.kernels.values().copied()
    }

    /// The backward plan of kernel `name`, if it declares a backward.
    pub fn backward_plan(&self, name: &str) -> Option<&BackwardPlan> {
        self.plans.get(name)
    }

    /// The manifest of every kernel.
    pub fn manifest(&self) -> Manifest {
        Manifest::new(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nki_kernels as _;

    #[test]
    fn unknown_names_list_the_registered_ones() {
        let reg = Registry::global().unwrap();
        let err = reg.get("no_such_kernel").unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "no kernel named `no_such_kernel` (registered: {})",
                reg.names().join(", ")
            )
        );
    }

    #[test]
    fn a_backward_that_does_not_fit_its_forward_is_rejected() {
        let reg = Registry::global().unwrap();
        let (add, rms) = (reg.get("add").unwrap(), reg.get("rmsnorm").unwrap());
        // `add` (whose output is `out`) declaring rmsnorm's backward, which takes `grad_y`.
        let bad: &'static KernelDef = Box::leak(Box::new(KernelDef {
            backward: Some(nki_core::autodiff::BackwardDef {
                kernel: rms.backward.as_ref().unwrap().kernel,
                saves: &[],
            }),
            ..*add
        }));
        let err = Registry::from_defs([bad]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "backward kernel `rmsnorm_backward` of `add`: tensor parameter `grad_y` is neither the \
             gradient of a forward output (`grad_<output>`) nor a saved tensor (saves: none)"
        );
    }

    #[test]
    fn every_backward_has_its_plan() {
        let reg = Registry::global().unwrap();
        for def in reg.kernels() {
            let plan = reg.backward_plan(def.name);
            match &def.backward {
                Some(b) => {
                    let plan = plan.expect("a kernel with a backward has a plan");
                    assert_eq!(plan.args.len(), b.kernel.params.len(), "{}", def.name);
                    assert_eq!(plan.saved.len(), b.saves.len(), "{}", def.name);
                    assert_eq!(
                        plan.grads.len(),
                        b.kernel.contract.outputs.len(),
                        "{}",
                        def.name
                    );
                }
                None => assert!(plan.is_none(), "{}", def.name),
            }
        }
    }

    #[test]
    fn duplicate_names_are_rejected_with_both_locations() {
        let add = Registry::global().unwrap().get("add").unwrap();
        let err = Registry::from_defs([add, add]).unwrap_err();
        let loc = add.location.to_string();
        assert_eq!(
            err.to_string(),
            format!("duplicate kernel name `add`: defined at {loc} and at {loc}")
        );
    }
}
