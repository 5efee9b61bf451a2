//! The `torch.ops` namespace this binary's ops are registered in, for messages: errors name
//! an op as `neuron::rmsnorm`, or `mylib::fused_norm` for a kernel crate loaded into `mylib`.
//! Each native module is its own binary with its own copy of this setting.

use std::fmt;
use std::sync::OnceLock;

static NAMESPACE: OnceLock<String> = OnceLock::new();

/// The namespace ops are named in (`neuron` until [`set_namespace`] says otherwise).
pub fn namespace() -> &'static str {
    NAMESPACE.get().map_or("neuron", String::as_str)
}

/// Sets the namespace once; setting it again to the same value is fine, to another is an error
/// naming both.
pub fn set_namespace(ns: &str) -> Result<(), String> {
    let set = NAMESPACE.get_or_init(|| ns.to_string());
    if set == ns {
        Ok(())
    } else {
        Err(format!(
            "the ops of this module are registered in torch.ops.{set}; they cannot also be named in {ns}"
        ))
    }
}

/// `namespace::op` for messages.
#[derive(Clone, Copy, Debug)]
pub struct Qualified<'a>(pub &'a str);

impl fmt::Display for Qualified<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}::{}", namespace(), self.0)
    }
}
