//! The compile cache: one traced and validated [`Program`] per kernel signature, shared across
//! threads. Tracing happens at most once per signature in the common case; concurrent first
//! calls may both trace, and the first result wins.

use nki_core::contract::OutputMeta;
use nki_core::ir::Program;
use nki_core::sim::parallel_loops;
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
    /// Which loops the simulator runs in parallel.
    pub parallel_loops: Vec<bool>,
}

/// Signature → compiled program, in memory.
#[derive(Debug, Default)]
pub struct CompileCache {
    entries: RwLock<HashMap<(&'static str, Signature), Arc<Compiled>>>,
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
        let key = (def.name, sig.clone());
        if let Some(hit) = self
            .entries
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
        {
            return Ok(hit.clone());
        }
        let outputs = def.check(sig)?;
        let program = def.trace(sig)?;
        validate(&program)?;
        let parallel_loops = parallel_loops(&program);
        let compiled = Arc::new(Compiled {
            program,
            outputs,
            parallel_loops,
        });
        let mut entries = self.entries.write().unwrap_or_else(|p| p.into_inner());
        Ok(entries.entry(key).or_insert(compiled).clone())
    }

    /// Number of cached programs.
    pub fn len(&self) -> usize {
        self.entries.read().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
