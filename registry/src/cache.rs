//! The compile cache: one [`Compiled`] program per kernel signature, shared across threads and
//! bounded. Each signature is compiled (through [`nki_core::compile`]) at most once while it is
//! cached; concurrent first calls may both compile, and the first result wins.
//!
//! The cache holds at most [`CompileCache::capacity`] programs (default
//! [`DEFAULT_CAPACITY`], or `$TORCH_NKI_COMPILE_CACHE_SIZE` for the global cache). When a new
//! program would exceed it, the least recently used eighth of the entries is evicted, so a
//! stream of distinct signatures (varying scalars or shapes) keeps memory bounded while the
//! signatures in use stay compiled. A hit takes only the read lock and updates the entry's
//! last-use stamp atomically.

use nki_core::{Compiled, KernelDef, NkiError, Signature};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, RwLock};

/// Programs the cache holds when nothing else is configured.
pub const DEFAULT_CAPACITY: usize = 1024;

/// The environment variable that sets the global cache's capacity.
pub const CAPACITY_ENV: &str = "TORCH_NKI_COMPILE_CACHE_SIZE";

#[derive(Debug)]
struct Entry {
    compiled: Arc<Compiled>,
    last_use: AtomicU64,
}

/// Signature → compiled program, in memory, least recently used evicted first.
#[derive(Debug)]
pub struct CompileCache {
    /// Kernel name → signature → entry (two levels, so a hit needs no key allocation).
    entries: RwLock<HashMap<&'static str, HashMap<Signature, Entry>>>,
    capacity: AtomicUsize,
    clock: AtomicU64,
}

impl Default for CompileCache {
    fn default() -> Self {
        CompileCache::with_capacity(DEFAULT_CAPACITY)
    }
}

impl CompileCache {
    /// A cache holding at most `capacity` programs (at least one).
    pub fn with_capacity(capacity: usize) -> CompileCache {
        CompileCache {
            entries: RwLock::new(HashMap::new()),
            capacity: AtomicUsize::new(capacity.max(1)),
            clock: AtomicU64::new(0),
        }
    }

    /// The process-wide cache; its capacity comes from `$TORCH_NKI_COMPILE_CACHE_SIZE` when that
    /// is a positive integer.
    pub fn global() -> &'static CompileCache {
        static GLOBAL: OnceLock<CompileCache> = OnceLock::new();
        GLOBAL.get_or_init(|| {
            let capacity = std::env::var(CAPACITY_ENV)
                .ok()
                .and_then(|v| v.trim().parse::<usize>().ok())
                .filter(|&n| n > 0)
                .unwrap_or(DEFAULT_CAPACITY);
            CompileCache::with_capacity(capacity)
        })
    }

    /// The most programs the cache holds.
    pub fn capacity(&self) -> usize {
        self.capacity.load(Ordering::Relaxed)
    }

    /// Changes the capacity (at least one), evicting least recently used programs to fit.
    pub fn set_capacity(&self, capacity: usize) {
        self.capacity.store(capacity.max(1), Ordering::Relaxed);
        let mut entries = self.write();
        let len = count(&entries);
        if len > self.capacity() {
            evict(&mut entries, len - self.capacity());
        }
    }

    fn tick(&self) -> u64 {
        self.clock.fetch_add(1, Ordering::Relaxed)
    }

    fn write(
        &self,
    ) -> std::sync::RwLockWriteGuard<'_, HashMap<&'static str, HashMap<Signature, Entry>>> {
        self.entries.write().unwrap_or_else(|p| p.into_inner())
    }

    /// The compiled program for `sig`, compiling it on first use.
    pub fn get_or_compile(
        &self,
        def: &'static KernelDef,
        sig: &Signature,
    ) -> Result<Arc<Compiled>, NkiError> {
        {
            let entries = self.entries.read().unwrap_or_else(|p| p.into_inner());
            if let Some(e) = entries.get(def.name).and_then(|m| m.get(sig)) {
                e.last_use.store(self.tick(), Ordering::Relaxed);
                return Ok(Arc::clone(&e.compiled));
            }
        }
        let checked = def.check(sig)?;
        let compiled = nki_core::compile::compile_checked(&checked)?;
        let key = checked.signature().clone();
        let mut entries = self.write();
        let len = count(&entries);
        let fresh = !entries.get(def.name).is_some_and(|m| m.contains_key(&key));
        if fresh && len >= self.capacity() {
            // Evict an eighth at a time so the scan is amortised over many inserts.
            evict(
                &mut entries,
                (len + 1 - self.capacity()).max(self.capacity() / 8),
            );
        }
        let stamp = self.tick();
        let entry = entries
            .entry(def.name)
            .or_default()
            .entry(key)
            .or_insert_with(|| Entry {
                compiled,
                last_use: AtomicU64::new(stamp),
            });
        Ok(Arc::clone(&entry.compiled))
    }

    /// Number of cached programs.
    pub fn len(&self) -> usize {
        count(&self.entries.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops every cached program.
    pub fn clear(&self) {
        self.write().clear();
    }
}

fn count(entries: &HashMap<&'static str, HashMap<Signature, Entry>>) -> usize {
    entries.values().map(HashMap::len).sum()
}

/// Removes the `n` least recently used entries.
fn evict(entries: &mut HashMap<&'static str, HashMap<Signature, Entry>>, n: usize) {
    let mut stamps: Vec<u64> = entries
        .values()
        .flat_map(|m| m.values().map(|e| e.last_use.load(Ordering::Relaxed)))
        .collect();
    if n == 0 || stamps.is_empty() {
        return;
    }
    let n = n.min(stamps.len());
    let (_, &mut cutoff, _) = stamps.select_nth_unstable(n - 1);
    for m in entries.values_mut() {
        m.retain(|_, e| e.last_use.load(Ordering::Relaxed) > cutoff);
    }
    entries.retain(|_, m| !m.is_empty());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Registry;
    use nki_core::kernel_def::ScalarValue;
    use nki_core::{DType, Target};
    use nki_kernels as _;

    fn sig_eps(n: u64, eps: f64) -> Signature {
        Signature::new(
            &[(&[n, 64], DType::F32), (&[64], DType::F32)],
            &[ScalarValue::Float(eps)],
            Target::Trn2,
        )
    }

    fn sig(n: u64) -> Signature {
        sig_eps(n, 1e-6)
    }

    fn rmsnorm() -> &'static KernelDef {
        Registry::global().unwrap().get("rmsnorm").unwrap()
    }

    #[test]
    fn compiles_once_per_signature() {
        let cache = CompileCache::default();
        let a = cache.get_or_compile(rmsnorm(), &sig(300)).unwrap();
        let b = cache.get_or_compile(rmsnorm(), &sig(300)).unwrap();
        assert!(Arc::ptr_eq(&a, &b), "a hit returns the cached program");
        let c = cache.get_or_compile(rmsnorm(), &sig(100)).unwrap();
        assert!(!Arc::ptr_eq(&a, &c));
        assert_eq!(cache.len(), 2);
        assert_eq!(a.outputs()[0].shape, vec![300, 64]);
    }

    #[test]
    fn errors_are_not_cached() {
        let cache = CompileCache::default();
        let mut bad = sig(4);
        bad.tensors[1].as_mut().expect("weight").shape = vec![65];
        assert!(cache.get_or_compile(rmsnorm(), &bad).is_err());
        assert!(cache.is_empty());
    }

    #[test]
    fn nan_and_signed_zero_scalars_are_one_key_each() {
        let cache = CompileCache::default();
        let nan = cache
            .get_or_compile(rmsnorm(), &sig_eps(8, f64::NAN))
            .unwrap();
        let other_nan = f64::from_bits(f64::NAN.to_bits() | 1);
        let again = cache
            .get_or_compile(rmsnorm(), &sig_eps(8, other_nan))
            .unwrap();
        assert!(Arc::ptr_eq(&nan, &again));
        let zero = cache.get_or_compile(rmsnorm(), &sig_eps(8, 0.0)).unwrap();
        let neg = cache.get_or_compile(rmsnorm(), &sig_eps(8, -0.0)).unwrap();
        assert!(Arc::ptr_eq(&zero, &neg));
        assert_eq!(cache.len(), 2);
    }

    #[test]
    fn the_cache_is_bounded_and_keeps_what_is_in_use() {
        let cache = CompileCache::with_capacity(16);
        let hot = cache.get_or_compile(rmsnorm(), &sig(4)).unwrap();
        for i in 0..200 {
            cache
                .get_or_compile(rmsnorm(), &sig_eps(4, 1.0 + i as f64))
                .unwrap();
            // The hot signature is used between the cold ones, so it is never the oldest.
            let again = cache.get_or_compile(rmsnorm(), &sig(4)).unwrap();
            assert!(Arc::ptr_eq(&hot, &again), "evicted the signature in use");
            assert!(cache.len() <= 16);
        }
        cache.set_capacity(3);
        assert!(cache.len() <= 3);
        let again = cache.get_or_compile(rmsnorm(), &sig(4)).unwrap();
        assert!(Arc::ptr_eq(&hot, &again));
        cache.clear();
        assert!(cache.is_empty());
    }

    #[test]
    fn concurrent_callers_share_one_program() {
        let cache = CompileCache::with_capacity(8);
        let programs: Vec<Arc<Compiled>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|_| s.spawn(|| cache.get_or_compile(rmsnorm(), &sig(64)).unwrap()))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(programs.iter().all(|p| Arc::ptr_eq(p, &programs[0])));
        assert_eq!(cache.len(), 1);
    }
}
