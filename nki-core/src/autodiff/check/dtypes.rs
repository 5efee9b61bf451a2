//! Dtype rules for the backward check: a forward tensor's dtype resolved through its `=` rules
//! (`Root`), compared with the backward's rules.

use super::super::msg::{ConstMsg, str_eq};
use super::Source;
use crate::contract::{Contract, DtypeRule, OutputDtype};
use crate::dtype::DType;

pub(super) const fn push_dtypes(mut m: ConstMsg, ds: &[DType]) -> ConstMsg {
    m = m.push("{");
    let mut i = 0;
    while i < ds.len() {
        if i > 0 {
            m = m.push(", ");
        }
        m = m.push(ds[i].name());
        i += 1;
    }
    m.push("}")
}

/// A forward tensor's dtype, resolved through `=` rules.
#[derive(Clone, Copy)]
pub(super) enum Root {
    /// The dtype of this forward tensor parameter, one of its `in {..}` set.
    Param(&'static str, &'static [DType]),
    /// A fixed dtype.
    Fixed(DType),
}

pub(super) const fn input_root(c: &Contract, param: &'static str) -> Root {
    let mut cur = param;
    let mut steps = 0;
    while steps <= c.dtypes.len() {
        let mut i = 0;
        while i < c.dtypes.len() {
            if str_eq(c.dtypes[i].param, cur) {
                match c.dtypes[i].rule {
                    DtypeRule::OneOf { allowed } => return Root::Param(cur, allowed),
                    DtypeRule::SameAs { param } => cur = param,
                }
                break;
            }
            i += 1;
        }
        steps += 1;
    }
    // The macro rejects `=` cycles and missing rules; an empty set admits nothing.
    Root::Param(cur, &[])
}

pub(super) const fn source_root(c: &Contract, s: Source) -> Root {
    match s {
        Source::Input(i) => input_root(c, c.inputs[i].param),
        Source::Output(o) => match c.outputs[o].dtype {
            OutputDtype::SameAs { param } => input_root(c, param),
            OutputDtype::Fixed { dtype } => Root::Fixed(dtype),
        },
    }
}

pub(super) const fn root_eq(a: Root, b: Root) -> bool {
    match (a, b) {
        (Root::Param(x, _), Root::Param(y, _)) => str_eq(x, y),
        (Root::Fixed(x), Root::Fixed(y)) => x as u8 == y as u8,
        (Root::Param(_, set), Root::Fixed(d)) | (Root::Fixed(d), Root::Param(_, set)) => {
            set.len() == 1 && set[0] as u8 == d as u8
        }
    }
}

pub(super) const fn dtype_in(d: DType, set: &[DType]) -> bool {
    let mut i = 0;
    while i < set.len() {
        if set[i] as u8 == d as u8 {
            return true;
        }
        i += 1;
    }
    false
}

pub(super) const fn root_within(r: Root, allowed: &[DType]) -> bool {
    match r {
        Root::Fixed(d) => dtype_in(d, allowed),
        Root::Param(_, set) => {
            let mut i = 0;
            while i < set.len() {
                if !dtype_in(set[i], allowed) {
                    return false;
                }
                i += 1;
            }
            true
        }
    }
}

pub(super) const fn push_root(m: ConstMsg, r: Root) -> ConstMsg {
    match r {
        Root::Param(p, set) => push_dtypes(m.push("the dtype of ").push(p).push(" "), set),
        Root::Fixed(d) => m.push(d.name()),
    }
}
