//! Contracts on symbolic shapes (`torch.compile(dynamic=True)`): the same binder as concrete
//! checks, run on dimensions that may be unknown sizes. It returns each output dimension as an
//! expression over input dimensions, and the equalities between unknown sizes that the contract
//! needs, each with the violation message (worded here) to raise if it fails. The caller (the
//! Python fake kernel) only evaluates these on its `SymInt`s; no contract logic lives there.

use crate::bind::{Binder, Dim};
use crate::violation::ContractViolation;
use crate::{Contract, DType, DimExpr, DimOp, OutDim};
use serde::Serialize;

/// A dimension of an actual input under symbolic shapes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SymInput {
    /// A concrete size.
    Known(u64),
    /// An unknown size, named as the caller prints it (`s0`).
    Named(String),
}

/// An integer expression over input dimensions.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SymExpr {
    /// A constant.
    Const {
        /// The value.
        value: i64,
    },
    /// Dimension `axis` of tensor argument `tensor` (tensor parameters in order).
    Dim {
        /// Which tensor argument.
        tensor: usize,
        /// Which dimension.
        axis: usize,
    },
    /// A binary operation (`/` is floor division, `%` its remainder).
    Binary {
        /// The operator.
        op: DimOp,
        /// Left operand.
        lhs: Box<SymExpr>,
        /// Right operand.
        rhs: Box<SymExpr>,
    },
}

/// An equality the contract needs between sizes that are not known yet.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SymCheck {
    /// Left side.
    pub lhs: SymExpr,
    /// Right side.
    pub rhs: SymExpr,
    /// The violation to raise if they differ, e.g. `neuron::add: y has shape [s0, s2], but ...`.
    pub message: String,
}

/// Output shapes as expressions, and the checks to assert.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SymbolicOutputs {
    /// One shape per output, each dimension an expression over input dimensions.
    pub shapes: Vec<Vec<SymExpr>>,
    /// Equalities between unknown sizes.
    pub checks: Vec<SymCheck>,
}

#[derive(Clone, Debug)]
struct SymDim {
    known: Option<u64>,
    text: String,
    expr: SymExpr,
}

impl Dim for SymDim {
    fn text(&self) -> String {
        self.text.clone()
    }

    fn value(&self) -> Option<u64> {
        self.known
    }
}

fn substitute(e: &DimExpr, dims: &std::collections::BTreeMap<&'static str, SymDim>) -> SymExpr {
    match e {
        DimExpr::Sym { name } => dims[name].expr.clone(),
        DimExpr::Const { value } => SymExpr::Const { value: *value },
        DimExpr::Binary { op, lhs, rhs } => {
            let (l, r) = (substitute(lhs, dims), substitute(rhs, dims));
            if let (SymExpr::Const { value: a }, SymExpr::Const { value: b }) = (&l, &r) {
                let folded = match op {
                    DimOp::Add => a.checked_add(*b),
                    DimOp::Sub => a.checked_sub(*b),
                    DimOp::Mul => a.checked_mul(*b),
                    DimOp::Div => (*b != 0).then(|| a.div_euclid(*b)),
                    DimOp::Rem => (*b != 0).then(|| a.rem_euclid(*b)),
                };
                if let Some(value) = folded {
                    return SymExpr::Const { value };
                }
            }
            SymExpr::Binary {
                op: *op,
                lhs: Box::new(l),
                rhs: Box::new(r),
            }
        }
    }
}

impl Contract {
    /// Binds symbolic input shapes (tensor parameters in order). Violations that the known sizes
    /// already decide are returned as errors; the rest become [`SymCheck`]s. `require(...)`
    /// clauses are left to the concrete call (asserting them here would specialise sizes).
    pub fn bind_symbolic(
        &self,
        op: &str,
        shapes: &[Option<Vec<SymInput>>],
    ) -> Result<SymbolicOutputs, ContractViolation> {
        let dims: Vec<Option<Vec<SymDim>>> = shapes
            .iter()
            .enumerate()
            .map(|(t, shape)| {
                let shape = shape.as_ref()?;
                Some(
                    shape
                        .iter()
                        .enumerate()
                        .map(|(axis, d)| match d {
                            SymInput::Known(v) => SymDim {
                                known: Some(*v),
                                text: v.to_string(),
                                expr: SymExpr::Const { value: *v as i64 },
                            },
                            SymInput::Named(name) => SymDim {
                                known: None,
                                text: name.clone(),
                                expr: SymExpr::Dim { tensor: t, axis },
                            },
                        })
                        .collect(),
                )
            })
            .collect();
        let mut b = Binder::<SymDim>::new();
        b.bind_shapes(self, &dims)
            .map_err(|violation| ContractViolation {
                op: op.to_string(),
                violation,
            })?;
        let checks = b
            .deferred
            .iter()
            .map(|(a, other, violation)| SymCheck {
                lhs: a.expr.clone(),
                rhs: match other {
                    Ok(d) => d.expr.clone(),
                    Err(lit) => SymExpr::Const { value: *lit as i64 },
                },
                message: ContractViolation {
                    op: op.to_string(),
                    violation: violation.clone(),
                }
                .to_string(),
            })
            .collect();
        let shapes = self
            .outputs
            .iter()
            .map(|o| {
                let mut shape = Vec::new();
                for d in o.shape {
                    match d {
                        OutDim::Expr { expr } => shape.push(substitute(expr, &b.dims)),
                        OutDim::Rest { name } => {
                            shape.extend(b.rests[name].iter().map(|d| d.expr.clone()))
                        }
                    }
                }
                shape
            })
            .collect();
        Ok(SymbolicOutputs { shapes, checks })
    }

    /// Output dtypes when the tensor parameters compute in `dtypes` (in order).
    pub fn output_dtypes(&self, dtypes: &[DType]) -> Vec<DType> {
        self.outputs
            .iter()
            .map(|o| self.output_dtype(o.dtype, &|i| dtypes[i]))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::*;

    static ADD: Contract = Contract {
        inputs: &[
            InputShape {
                param: "x",
                dims: &[
                    DimPattern::Rest { name: "S" },
                    DimPattern::Sym { name: "D" },
                ],
            },
            InputShape {
                param: "y",
                dims: &[
                    DimPattern::Rest { name: "S" },
                    DimPattern::Const { value: 4 },
                ],
            },
        ],
        dtypes: &[],
        outputs: &[OutputSpec {
            name: "out",
            saved: false,
            shape: &[
                OutDim::Rest { name: "S" },
                OutDim::Expr {
                    expr: DimExpr::Binary {
                        op: DimOp::Mul,
                        lhs: &DimExpr::Const { value: 2 },
                        rhs: &DimExpr::Sym { name: "D" },
                    },
                },
            ],
            dtype: OutputDtype::Fixed { dtype: DType::F32 },
        }],
        requires: &[],
    };

    fn named(s: &str) -> SymInput {
        SymInput::Named(s.to_string())
    }

    #[test]
    fn outputs_are_expressions_over_input_dims_and_unknown_equalities_are_checks() {
        let out = ADD
            .bind_symbolic(
                "add",
                &[
                    Some(vec![named("s0"), SymInput::Known(3), named("s1")]),
                    Some(vec![named("s2"), SymInput::Known(3), named("s3")]),
                ],
            )
            .unwrap();
        let dim = |tensor, axis| SymExpr::Dim { tensor, axis };
        assert_eq!(
            out.shapes,
            vec![vec![
                dim(0, 0),
                SymExpr::Const { value: 3 },
                SymExpr::Binary {
                    op: DimOp::Mul,
                    lhs: Box::new(SymExpr::Const { value: 2 }),
                    rhs: Box::new(dim(0, 2)),
                }
            ]]
        );
        let msgs: Vec<(&SymExpr, &SymExpr, &str)> = out
            .checks
            .iter()
            .map(|c| (&c.lhs, &c.rhs, c.message.as_str()))
            .collect();
        assert_eq!(
            msgs,
            vec![
                (
                    &dim(1, 0),
                    &dim(0, 0),
                    "neuron::add: y has shape [s2, 3, s3], but the contract y[..S, 4] needs ..S = [s0, 3] (bound by x[..S, D] = [s0, 3, s1])"
                ),
                (
                    &dim(1, 2),
                    &SymExpr::Const { value: 4 },
                    "neuron::add: y has shape [s2, 3, s3], but the contract y[..S, 4] needs dimension 2 = 4"
                ),
            ]
        );
    }

    #[test]
    fn known_mismatches_are_errors_now() {
        let err = ADD
            .bind_symbolic(
                "add",
                &[
                    Some(vec![named("s0"), SymInput::Known(3)]),
                    Some(vec![named("s0"), SymInput::Known(5)]),
                ],
            )
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "neuron::add: y has shape [s0, 5], but the contract y[..S, 4] needs dimension 1 = 4"
        );
        let err = ADD
            .bind_symbolic("add", &[Some(vec![]), Some(vec![])])
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "neuron::add: x has rank 0 (shape []), but the contract x[..S, D] needs rank >= 1"
        );
    }
}
