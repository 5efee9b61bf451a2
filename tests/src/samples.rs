//! The signatures the registry's kernels declare through their samples, for tests that run or
//! emit every kernel: each forward kernel's, with the backward each implies.

use nki_core::{KernelDef, Signature, Target};
use nki_registry::Registry;

/// Which samples [`sample_signatures`] takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Samples {
    /// Each kernel's first sample, in its first dtype.
    First,
    /// Every sample of each kernel, in every dtype it runs in.
    Every,
}

/// `(kernel, signature)` on Trn2 for the chosen samples of every registered forward kernel,
/// each preceded by the backward kernel it implies, if any.
pub fn sample_signatures(which: Samples) -> Vec<(&'static KernelDef, Signature)> {
    let mut out = Vec::new();
    let registry = Registry::global().expect("the registry loads");
    for def in registry.kernels() {
        let samples = match which {
            Samples::First => &def.samples[..def.samples.len().min(1)],
            Samples::Every => def.samples,
        };
        for sample in samples {
            let dtypes = sample.dtypes_for(&def.contract);
            let dtypes = match which {
                Samples::First => &dtypes[..dtypes.len().min(1)],
                Samples::Every => &dtypes[..],
            };
            for &dtype in dtypes {
                let sig = sample
                    .signature(def, dtype, Target::Trn2)
                    .expect("a sample binds every parameter");
                out.extend(def.backward_signature(&sig));
                out.push((def, sig));
            }
        }
    }
    out
}
