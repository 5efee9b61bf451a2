//! The compile cache: one traced and validated [`Program`] per kernel signature, shared across
//! threads. Tracing happens at most once per signature in the common case; concurrent first
//! calls may both trace, and the first result wins.

use nki_core::contract::OutputMeta;
use nki_core::ir::Program;
use nki_core::sim::ExecPlan;
use nki_core::validate::validate;
use nki_core::{KernelDef, NkiError, Signature};
use std::collections::HashMap;
use std::sync::{Arc, OnceLock, RwLock};

/// A kernel compiled for one signature.
#[derive(Debug)]
pub struct Compiled {
    /// The validated program.
    pub program: Program,
    /// Output shapes and dtypes.
    pub outputs: Vec<OutputMeta>,
    /// What the simulator derived from the program once (parallel loops, poison elision).
    pub plan: ExecPlan,
}

/// Signature → compiled program, in memory.
#[derive(Debug, Default)]
pub struct CompileCache {
    /// Kernel name → signature → program (two levels, so a hit needs no key allocation).
    entries: RwLock<HashMap<&'static str, HashMap<Signature, Arc<Compiled>>>>,
}

impl CompileCache {
    /// The process-wide cache.
    pub fn global() -> &'static CompileCache {
        static GLOBAL: OnceLock<CompileCache> = OnceLock::new();
        GLOBAL.get_or_init(CompileCache::default)
    }

    /// The compiled program for `sig`, tracing and validating it on first use.
    pub fn get_or_compile(
        &self,
        def: &'static KernelDef,
        sig: &Signature,
    ) -> Result<Arc<Compiled>, NkiError> {
        let hit = self
            .entries
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(def.name)
            .and_then(|m| m.get(sig))
            .cloned();
        if let Some(hit) = hit {
            return Ok(hit);
        }
        let outputs = def.check(sig)?;
        let program = def.trace(sig)?;
        validate(&program)?;
        let plan = ExecPlan::new(&program);
        let compiled = Arc::new(Compiled {
            program,
            outputs,
            plan,
        });
        let mut entries = self.entries.write().unwrap_or_else(|p| p.into_inner());
        Ok(entries
            .entry(def.name)
            .or_default()
            .entry(sig.clone())
            .or_insert(compiled)
            .clone())
    }

    /// Number of cached programs.
    pub fn len(&self) -> usize {
        self.entries
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .map(HashMap::len)
            .sum()
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Registry;
    use nki_core::kernel_def::ScalarValue;
    use nki_core::{DType, Target};
    use nki_kernels as _;

    fn sig(n: u64) -> Signature {
        Signature::new(
            &[(&[n, 64], DType::F32), (&[64], DType::F32)],
            &[ScalarValue::Float(1e-6)],
            Target::Trn2,
        )
    }

    #[test]
    fn compiles_once_per_signature() {
        let cache = CompileCache::default();
        let rms = Registry::global().unwrap().get("rmsnorm").unwrap();
        let a = cache.get_or_compile(rms, &sig(300)).unwrap();
        let b = cache.get_or_compile(rms, &sig(300)).unwrap();
        assert!(Arc::ptr_eq(&a, &b), "a hit returns the cached program");
        let c = cache.get_or_compile(rms, &sig(100)).unwrap();
        assert!(!Arc::ptr_eq(&a, &c));
        assert_eq!(cache.len(), 2);
        assert_eq!(a.outputs[0].shape, vec![300, 64]);
    }

    #[test]
    fn errors_are_not_cached() {
        let cache = CompileCache::default();
        let rms = Registry::global().unwrap().get("rmsnorm").unwrap();
        let mut bad = sig(4);
        bad.tensors[1].as_mut().expect("weight").shape = vec![65];
        assert!(cache.get_or_compile(rms, &bad).is_err());
        assert!(cache.is_empty());
    }
}
