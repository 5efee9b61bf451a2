//! The arguments a kernel's generated trace function receives ([`KernelArgs`]), and how its
//! return value becomes the output list ([`IntoOutputs`]).

use super::ScalarValue;
use crate::lang::Hbm;

/// One argument as the generated trace function receives it.
#[doc(hidden)]
#[derive(Clone, Debug)]
pub enum ArgValue {
    /// A tensor handle.
    Tensor(Hbm),
    /// An optional tensor left out.
    Absent,
    /// A scalar.
    Scalar(ScalarValue),
}

/// The arguments of one trace, indexed by parameter position.
#[doc(hidden)]
#[derive(Clone, Debug)]
pub struct KernelArgs {
    values: Vec<ArgValue>,
}

impl KernelArgs {
    /// The arguments of one trace, in parameter order.
    pub(super) fn new(values: Vec<ArgValue>) -> KernelArgs {
        KernelArgs { values }
    }

    /// The tensor at parameter `i`. The macro only asks for tensors where it declared them.
    pub fn tensor(&self, i: usize) -> &Hbm {
        match &self.values[i] {
            ArgValue::Tensor(h) => h,
            other => {
                panic!("kernel parameter {i} is {other:?}, not a tensor (macro/registry mismatch)")
            }
        }
    }

    /// The optional tensor at parameter `i`.
    pub fn opt_tensor(&self, i: usize) -> Option<&Hbm> {
        match &self.values[i] {
            ArgValue::Tensor(h) => Some(h),
            ArgValue::Absent => None,
            other => panic!(
                "kernel parameter {i} is {other:?}, not an optional tensor (macro/registry mismatch)"
            ),
        }
    }

    /// The float at parameter `i`.
    pub fn float(&self, i: usize) -> f64 {
        match self.values[i] {
            ArgValue::Scalar(ScalarValue::Float(v)) => v,
            ArgValue::Scalar(ScalarValue::Int(v)) => v as f64,
            ref other => {
                panic!("kernel parameter {i} is {other:?}, not a float (macro/registry mismatch)")
            }
        }
    }

    /// The optional float at parameter `i` (`None` when left out).
    pub fn opt_float(&self, i: usize) -> Option<f64> {
        match self.values[i] {
            ArgValue::Scalar(ScalarValue::None) => None,
            _ => Some(self.float(i)),
        }
    }

    /// The optional int at parameter `i` (`None` when left out).
    pub fn opt_int(&self, i: usize) -> Option<i64> {
        match self.values[i] {
            ArgValue::Scalar(ScalarValue::None) => None,
            _ => Some(self.int(i)),
        }
    }

    /// The optional bool at parameter `i` (`None` when left out).
    pub fn opt_bool(&self, i: usize) -> Option<bool> {
        match self.values[i] {
            ArgValue::Scalar(ScalarValue::None) => None,
            _ => Some(self.bool(i)),
        }
    }

    /// The string at parameter `i` (one of its choices).
    pub fn str(&self, i: usize) -> &'static str {
        match self.values[i] {
            ArgValue::Scalar(ScalarValue::Str(s)) => s,
            ref other => {
                panic!("kernel parameter {i} is {other:?}, not a str (macro/registry mismatch)")
            }
        }
    }

    /// The int at parameter `i`.
    pub fn int(&self, i: usize) -> i64 {
        match self.values[i] {
            ArgValue::Scalar(ScalarValue::Int(v)) => v,
            ref other => {
                panic!("kernel parameter {i} is {other:?}, not an int (macro/registry mismatch)")
            }
        }
    }

    /// The bool at parameter `i`.
    pub fn bool(&self, i: usize) -> bool {
        match self.values[i] {
            ArgValue::Scalar(ScalarValue::Bool(v)) => v,
            ref other => {
                panic!("kernel parameter {i} is {other:?}, not a bool (macro/registry mismatch)")
            }
        }
    }
}

/// Converts a kernel's return value (one handle or a tuple) into the output list.
#[doc(hidden)]
pub trait IntoOutputs {
    /// The outputs, in return order.
    fn into_outputs(self) -> Vec<Hbm>;
}

impl IntoOutputs for Hbm {
    fn into_outputs(self) -> Vec<Hbm> {
        vec![self]
    }
}

impl IntoOutputs for (Hbm, Hbm) {
    fn into_outputs(self) -> Vec<Hbm> {
        vec![self.0, self.1]
    }
}

impl IntoOutputs for (Hbm, Hbm, Hbm) {
    fn into_outputs(self) -> Vec<Hbm> {
        vec![self.0, self.1, self.2]
    }
}

impl IntoOutputs for (Hbm, Hbm, Hbm, Hbm) {
    fn into_outputs(self) -> Vec<Hbm> {
        vec![self.0, self.1, self.2, self.3]
    }
}
