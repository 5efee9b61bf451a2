//! What each dimension symbol of a kernel means when its tensors are split across devices
//! (DTensor sharding), derived from the contract once and exported in the manifest.
//!
//! Every symbol of the input patterns (a single dimension `N`, or each dimension of a
//! sequence `..B`) gets one of three kinds:
//!
//! - **independent**: every output that depends on the symbol keeps it as one of its own
//!   dimensions, and each output element depends on one index of it. Splitting the symbol
//!   splits those outputs the same way, with no communication (`B` of a norm, `N` of a
//!   matmul).
//! - **summed**: the outputs that depend on it do not have it: the kernel contracts it away,
//!   so a split gives each device a partial sum (`K` of a matmul, the rows in a weight
//!   gradient). A symbol can be kept by one output and summed by another (`B` of
//!   `rmsnorm_backward`: kept by `grad_x`, summed into `grad_weight`): its kind is **mixed**.
//! - **whole**: the kernel needs every index of it (a norm's `D`, attention's keys): it is
//!   never split, so its tensors are replicated along it.
//!
//! The derivation, from the contract alone:
//!
//! 1. Per output, the inputs it reads are every tensor parameter, unless the kernel declares
//!    `reads(output: a, b)` ([`ShardDecl::Reads`]).
//! 2. A symbol an output has as a whole dimension (`N`, or `..B` spliced) is *kept* by it. An
//!    output that lacks the symbol but reads an input that has it *sums* it; one that reads no
//!    such input does not use it (it is the same on every device).
//! 3. A symbol is **whole** when the contract cannot describe a split of it: it appears in an
//!    output only inside an expression (`2 * D`), twice in one pattern, or in a `require`
//!    together with another symbol (`H % Hkv == 0` ties `H` to `Hkv`) unless the kernel
//!    declares the two split `together(H, Hkv)` (then both are split on the same devices,
//!    evenly). A `require` on one symbol (`K >= 1`, `D % 2 == 0`) does not make it whole: the
//!    local shapes of a split are checked against the contract when the split is chosen.
//!
//! What the contract cannot tell, the kernel declares with `shard(...)` in its `#[kernel]`
//! attribute ([`ShardDecl`]): `whole(D)` for a kernel that mixes the indices of an
//! independent-looking dimension (a norm's row, softmax, rotary embeddings), optionally under a
//! scalar's value (`whole(S) if causal`); `together(A, B)`; `additive(bias)` for an input
//! added once to outputs that sum a split symbol (it is split as a partial sum too); and
//! `reads(output: inputs)`.

use crate::{Contract, DimExpr, DimPattern, OutDim, OutputSpec};
use serde::Serialize;

/// A condition on a scalar parameter, under which a `whole(...)` declaration holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ShardCondition {
    /// `if causal` (`value: true`) or `if !causal` (`value: false`): a `bool` parameter.
    Flag {
        /// The parameter.
        param: &'static str,
        /// The value the condition holds for.
        value: bool,
    },
    /// `if reduction == "mean"` (`equal: true`) or `if reduction != "none"` (`equal: false`):
    /// a string parameter is (not) one of `values`.
    Choice {
        /// The parameter.
        param: &'static str,
        /// The values compared against (`"a" | "b"`).
        values: &'static [&'static str],
        /// `==` (true) or `!=` (false).
        equal: bool,
    },
}

impl std::fmt::Display for ShardCondition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ShardCondition::Flag { param, value } => {
                write!(f, "{}{param}", if *value { "" } else { "!" })
            }
            ShardCondition::Choice {
                param,
                values,
                equal,
            } => {
                let values: Vec<String> = values.iter().map(|v| format!("{v:?}")).collect();
                let op = if *equal { "==" } else { "!=" };
                write!(f, "{param} {op} {}", values.join(" | "))
            }
        }
    }
}

/// One clause of a kernel's `shard(...)` declaration.
#[derive(Clone, Copy, Debug, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ShardDecl {
    /// `whole(S, Dh)` / `whole(S) if causal`: the kernel needs every index of these symbols
    /// (under the condition, if given).
    Whole {
        /// The symbols.
        symbols: &'static [&'static str],
        /// The condition, if any.
        when: Option<ShardCondition>,
    },
    /// `together(H, Hkv)`: symbols the contract relates, split together (on the same devices,
    /// evenly).
    Together {
        /// The symbols.
        symbols: &'static [&'static str],
    },
    /// `additive(bias)`: an input added once to the outputs; where those sum a split symbol it
    /// is split as a partial sum too.
    Additive {
        /// The tensor parameter.
        param: &'static str,
    },
    /// `reads(grad_bias: grad_out)`: the only inputs an output depends on.
    Reads {
        /// The output.
        output: &'static str,
        /// The tensor parameters it reads.
        inputs: &'static [&'static str],
    },
}

/// What a split of a symbol does to one output.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OutputRole {
    /// The output has the symbol as a dimension: it is split the same way.
    Kept,
    /// The output sums over the symbol: each device holds a partial sum.
    Summed,
    /// The output does not depend on the symbol: every device computes all of it.
    Unused,
}

/// The role of a symbol for an output whose shape a string parameter chooses, for the values
/// that select one arm.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CaseRole {
    /// The values selecting the arm.
    pub values: Vec<&'static str>,
    /// The role under that arm.
    pub role: OutputRole,
}

/// A symbol's role for one output.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct OutputUse {
    /// The output's name.
    pub output: &'static str,
    /// The role (for a `match` shape, under the default arm).
    pub role: OutputRole,
    /// For a `match` shape, the role under each other arm.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cases: Vec<CaseRole>,
}

/// The derived kind of a symbol.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DimKind {
    /// Kept by every output that depends on it.
    Independent,
    /// Summed by every output that depends on it.
    Summed,
    /// Kept by some outputs, summed by others.
    Mixed,
    /// Never split.
    Whole,
}

/// The sharding semantics of one symbol.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DimSharding {
    /// The symbol.
    pub symbol: &'static str,
    /// A `..S` sequence (each of its dimensions behaves alike).
    pub sequence: bool,
    /// Its kind; [`DimKind::Whole`] only when it is whole for every call.
    pub kind: DimKind,
    /// Why, in words.
    pub reason: String,
    /// Conditions under which it is whole as well (`whole(S) if causal`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub whole_when: Vec<ShardCondition>,
    /// Symbols split together with it (`together(...)`), itself excluded.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub with: Vec<&'static str>,
    /// Its role for each output, in return order (empty for a whole symbol).
    pub outputs: Vec<OutputUse>,
}

/// A kernel's sharding semantics: one entry per symbol of its input patterns, in order of
/// first binding, and what the declaration adds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Sharding {
    /// Every symbol.
    pub dims: Vec<DimSharding>,
    /// Inputs split as partial sums where an output sums a split symbol (`additive(...)`).
    pub additive: Vec<&'static str>,
    /// The inputs each output reads, in return order.
    pub reads: Vec<(&'static str, Vec<&'static str>)>,
}

fn expr_symbols(e: &DimExpr, out: &mut Vec<&'static str>) {
    match *e {
        DimExpr::Sym { name } => out.push(name),
        DimExpr::Const { .. } => {}
        DimExpr::Binary { lhs, rhs, .. } => {
            expr_symbols(lhs, out);
            expr_symbols(rhs, out);
        }
    }
}

/// How an output shape uses a symbol: `Some(true)` as a whole dimension (once), `Some(false)`
/// inside an expression or more than once, `None` not at all.
fn shape_use(shape: &[OutDim], symbol: &str) -> Option<bool> {
    let mut bare = 0;
    let mut inside = false;
    for d in shape {
        match d {
            OutDim::Rest { name } if *name == symbol => bare += 1,
            OutDim::Rest { .. } => {}
            OutDim::Expr {
                expr: DimExpr::Sym { name },
            } if *name == symbol => bare += 1,
            OutDim::Expr { expr } => {
                let mut syms = Vec::new();
                expr_symbols(expr, &mut syms);
                inside |= syms.contains(&symbol);
            }
        }
    }
    match (bare, inside) {
        (0, false) => None,
        (1, false) => Some(true),
        _ => Some(false),
    }
}

fn pattern_symbol(d: &DimPattern) -> Option<(&'static str, bool)> {
    match *d {
        DimPattern::Sym { name } => Some((name, false)),
        DimPattern::Rest { name } => Some((name, true)),
        DimPattern::Const { .. } => None,
    }
}

impl Contract {
    /// The sharding semantics of this contract's symbols with the kernel's `shard(...)`
    /// declarations (see the [module documentation](self)).
    pub fn sharding(&self, decls: &[ShardDecl]) -> Sharding {
        let mut symbols: Vec<(&'static str, bool)> = Vec::new();
        let mut repeated: Vec<(&'static str, &'static str)> = Vec::new();
        for input in self.inputs {
            let mut seen = Vec::new();
            for (name, seq) in input.dims.iter().filter_map(pattern_symbol) {
                if seen.contains(&name) {
                    repeated.push((name, input.param));
                }
                seen.push(name);
                if !symbols.iter().any(|(s, _)| *s == name) {
                    symbols.push((name, seq));
                }
            }
        }
        let has = |param: &str, symbol: &str| {
            self.inputs.iter().any(|i| {
                i.param == param
                    && i.dims
                        .iter()
                        .any(|d| pattern_symbol(d).is_some_and(|(s, _)| s == symbol))
            })
        };
        let all_inputs: Vec<&'static str> = self.inputs.iter().map(|i| i.param).collect();
        let reads: Vec<(&'static str, Vec<&'static str>)> = self
            .outputs
            .iter()
            .map(|o| {
                let declared = decls.iter().find_map(|d| match d {
                    ShardDecl::Reads { output, inputs } if *output == o.name => {
                        Some(inputs.to_vec())
                    }
                    _ => None,
                });
                (o.name, declared.unwrap_or_else(|| all_inputs.clone()))
            })
            .collect();
        let groups: Vec<&'static [&'static str]> = decls
            .iter()
            .filter_map(|d| match d {
                ShardDecl::Together { symbols } => Some(*symbols),
                _ => None,
            })
            .collect();
        let partners = |symbol: &str| -> Vec<&'static str> {
            let mut with: Vec<&'static str> = Vec::new();
            for g in groups.iter().filter(|g| g.contains(&symbol)) {
                for s in g.iter() {
                    if *s != symbol && !with.contains(s) {
                        with.push(s);
                    }
                }
            }
            with
        };
        let additive: Vec<&'static str> = decls
            .iter()
            .filter_map(|d| match d {
                ShardDecl::Additive { param } => Some(*param),
                _ => None,
            })
            .collect();

        // Why each symbol cannot be split at all, if it cannot.
        let whole_reason = |symbol: &'static str| -> Option<String> {
            for d in decls {
                if let ShardDecl::Whole {
                    symbols,
                    when: None,
                } = d
                    && symbols.contains(&symbol)
                {
                    return Some(format!("declared `whole({})`", symbols.join(", ")));
                }
            }
            if let Some((_, param)) = repeated.iter().find(|(s, _)| *s == symbol) {
                return Some(format!("appears twice in the pattern of `{param}`"));
            }
            for o in self.outputs {
                for shape in output_shapes(o) {
                    if shape_use(shape, symbol) == Some(false) {
                        return Some(format!(
                            "output `{}` has it inside an expression or twice",
                            o.name
                        ));
                    }
                }
            }
            let with = partners(symbol);
            for r in self.requires {
                let mut syms = Vec::new();
                expr_symbols(&r.lhs, &mut syms);
                expr_symbols(&r.rhs, &mut syms);
                if syms.contains(&symbol) && syms.iter().any(|s| *s != symbol && !with.contains(s))
                {
                    return Some(format!(
                        "`require({})` relates it to another symbol (declare `together(...)` to split them together)",
                        r
                    ));
                }
            }
            None
        };

        let mut dims: Vec<DimSharding> = symbols
            .iter()
            .map(|&(symbol, sequence)| {
                let with = partners(symbol);
                let whole_when: Vec<ShardCondition> = decls
                    .iter()
                    .filter_map(|d| match d {
                        ShardDecl::Whole {
                            symbols,
                            when: Some(c),
                        } if symbols.contains(&symbol) => Some(*c),
                        _ => None,
                    })
                    .collect();
                if let Some(reason) = whole_reason(symbol) {
                    return DimSharding {
                        symbol,
                        sequence,
                        kind: DimKind::Whole,
                        reason,
                        whole_when: Vec::new(),
                        with,
                        outputs: Vec::new(),
                    };
                }
                let members: Vec<&'static str> = std::iter::once(symbol)
                    .chain(with.iter().copied())
                    .collect();
                let role = |o: &OutputSpec, shape: &[OutDim]| {
                    if members.iter().any(|m| shape_use(shape, m) == Some(true)) {
                        OutputRole::Kept
                    } else {
                        let read = reads.iter().find(|(n, _)| *n == o.name);
                        let read = read.map(|(_, r)| r.as_slice()).unwrap_or(&[]);
                        if read.iter().any(|p| members.iter().any(|m| has(p, m))) {
                            OutputRole::Summed
                        } else {
                            OutputRole::Unused
                        }
                    }
                };
                let outputs: Vec<OutputUse> = self
                    .outputs
                    .iter()
                    .map(|o| OutputUse {
                        output: o.name,
                        role: role(o, o.shape),
                        cases: o
                            .by_choice
                            .iter()
                            .flat_map(|m| m.cases.iter())
                            .map(|c| CaseRole {
                                values: c.values.to_vec(),
                                role: role(o, c.shape),
                            })
                            .collect(),
                    })
                    .collect();
                let roles: Vec<OutputRole> = outputs
                    .iter()
                    .flat_map(|u| std::iter::once(u.role).chain(u.cases.iter().map(|c| c.role)))
                    .collect();
                let kept = roles.contains(&OutputRole::Kept);
                let summed = roles.contains(&OutputRole::Summed);
                let (kind, reason) = match (kept, summed) {
                    (true, true) => (
                        DimKind::Mixed,
                        "kept by some outputs, summed by the others".to_string(),
                    ),
                    (false, true) => (
                        DimKind::Summed,
                        "contracted away: no output keeps it".to_string(),
                    ),
                    _ => (
                        DimKind::Independent,
                        "kept by every output that depends on it".to_string(),
                    ),
                };
                DimSharding {
                    symbol,
                    sequence,
                    kind,
                    reason,
                    whole_when,
                    with,
                    outputs,
                }
            })
            .collect();
        // A symbol split together with a whole one cannot be split either.
        let whole: Vec<&'static str> = dims
            .iter()
            .filter(|d| d.kind == DimKind::Whole)
            .map(|d| d.symbol)
            .collect();
        for d in &mut dims {
            if d.kind != DimKind::Whole
                && let Some(w) = d.with.iter().find(|s| whole.contains(s))
            {
                d.kind = DimKind::Whole;
                d.reason = format!("split together with `{w}`, which is whole");
                d.outputs.clear();
                d.whole_when.clear();
            }
        }
        Sharding {
            dims,
            additive,
            reads,
        }
    }
}

/// Every shape an output can have: its default and each `match` arm's.
fn output_shapes(o: &OutputSpec) -> impl Iterator<Item = &'static [OutDim]> {
    std::iter::once(o.shape).chain(
        o.by_choice
            .iter()
            .flat_map(|m| m.cases.iter().map(|c| c.shape)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CmpOp, DimOp, DtypeRule, InputDtype, InputShape, OutputDtype, Requirement};

    const F32: DtypeRule = DtypeRule::OneOf {
        allowed: &[crate::DType::F32],
    };

    const fn sym(name: &'static str) -> DimPattern {
        DimPattern::Sym { name }
    }

    const fn out(name: &'static str) -> OutDim {
        OutDim::Expr {
            expr: DimExpr::Sym { name },
        }
    }

    const fn output(name: &'static str, shape: &'static [OutDim]) -> OutputSpec {
        OutputSpec {
            name,
            saved: false,
            shape,
            by_choice: None,
            dtype: OutputDtype::Fixed {
                dtype: crate::DType::F32,
            },
        }
    }

    // matmul_backward: grad_out[..B, N], x[..B, K], w[K, N] -> (grad_x[..B, K], grad_w[K, N])
    static MATMUL_BACKWARD: Contract = Contract {
        inputs: &[
            InputShape {
                param: "grad_out",
                dims: &[DimPattern::Rest { name: "B" }, sym("N")],
            },
            InputShape {
                param: "x",
                dims: &[DimPattern::Rest { name: "B" }, sym("K")],
            },
            InputShape {
                param: "w",
                dims: &[sym("K"), sym("N")],
            },
        ],
        dtypes: &[InputDtype {
            param: "grad_out",
            rule: F32,
        }],
        outputs: &[
            output("grad_x", &[OutDim::Rest { name: "B" }, out("K")]),
            output("grad_w", &[out("K"), out("N")]),
        ],
        requires: &[Requirement {
            lhs: DimExpr::Sym { name: "N" },
            op: CmpOp::Ge,
            rhs: DimExpr::Const { value: 1 },
        }],
    };

    fn roles(s: &Sharding, symbol: &str) -> (DimKind, Vec<OutputRole>) {
        let d = s.dims.iter().find(|d| d.symbol == symbol).unwrap();
        (d.kind, d.outputs.iter().map(|o| o.role).collect())
    }

    #[test]
    fn derives_kept_summed_and_mixed_symbols_from_the_shapes() {
        let s = MATMUL_BACKWARD.sharding(&[]);
        let names: Vec<_> = s.dims.iter().map(|d| (d.symbol, d.sequence)).collect();
        assert_eq!(names, [("B", true), ("N", false), ("K", false)]);
        use OutputRole::*;
        assert_eq!(roles(&s, "B"), (DimKind::Mixed, vec![Kept, Summed]));
        assert_eq!(roles(&s, "N"), (DimKind::Mixed, vec![Summed, Kept]));
        assert_eq!(roles(&s, "K"), (DimKind::Independent, vec![Kept, Kept]));
    }

    #[test]
    fn declarations_make_symbols_whole_or_narrow_what_an_output_reads() {
        static WHOLE: [ShardDecl; 2] = [
            ShardDecl::Whole {
                symbols: &["K"],
                when: None,
            },
            ShardDecl::Reads {
                output: "grad_x",
                inputs: &["grad_out", "w"],
            },
        ];
        let s = MATMUL_BACKWARD.sharding(&WHOLE);
        let k = s.dims.iter().find(|d| d.symbol == "K").unwrap();
        assert_eq!(k.kind, DimKind::Whole);
        assert_eq!(k.reason, "declared `whole(K)`");
        // grad_x no longer reads x, but grad_out still has B: grad_x keeps it, grad_w sums it.
        use OutputRole::*;
        assert_eq!(roles(&s, "B"), (DimKind::Mixed, vec![Kept, Summed]));
        assert_eq!(s.reads[0], ("grad_x", vec!["grad_out", "w"]));
        static CONDITIONAL: [ShardDecl; 1] = [ShardDecl::Whole {
            symbols: &["N"],
            when: Some(ShardCondition::Flag {
                param: "causal",
                value: true,
            }),
        }];
        let s = MATMUL_BACKWARD.sharding(&CONDITIONAL);
        let n = s.dims.iter().find(|d| d.symbol == "N").unwrap();
        assert_eq!(n.kind, DimKind::Mixed);
        assert_eq!(n.whole_when[0].to_string(), "causal");
    }

    // attention-like: q[H, S], k[Hkv, S] -> o[H, S], with require(H % Hkv == 0)
    static GROUPED: Contract = Contract {
        inputs: &[
            InputShape {
                param: "q",
                dims: &[sym("H"), sym("S")],
            },
            InputShape {
                param: "k",
                dims: &[sym("Hkv"), sym("S")],
            },
        ],
        dtypes: &[],
        outputs: &[output(
            "o",
            &[
                out("H"),
                OutDim::Expr {
                    expr: DimExpr::Binary {
                        op: DimOp::Mul,
                        lhs: &DimExpr::Const { value: 2 },
                        rhs: &DimExpr::Sym { name: "S" },
                    },
                },
            ],
        )],
        requires: &[Requirement {
            lhs: DimExpr::Binary {
                op: DimOp::Rem,
                lhs: &DimExpr::Sym { name: "H" },
                rhs: &DimExpr::Sym { name: "Hkv" },
            },
            op: CmpOp::Eq,
            rhs: DimExpr::Const { value: 0 },
        }],
    };

    #[test]
    fn related_symbols_and_expressions_are_whole_unless_split_together() {
        let s = GROUPED.sharding(&[]);
        let h = s.dims.iter().find(|d| d.symbol == "H").unwrap();
        assert_eq!(h.kind, DimKind::Whole);
        assert!(h.reason.contains("`require(H % Hkv == 0)`"), "{}", h.reason);
        let sd = s.dims.iter().find(|d| d.symbol == "S").unwrap();
        assert_eq!(sd.kind, DimKind::Whole);
        assert_eq!(sd.reason, "output `o` has it inside an expression or twice");
        static TOGETHER: [ShardDecl; 1] = [ShardDecl::Together {
            symbols: &["H", "Hkv"],
        }];
        let s = GROUPED.sharding(&TOGETHER);
        use OutputRole::*;
        assert_eq!(roles(&s, "H"), (DimKind::Independent, vec![Kept]));
        // Hkv is split with H, which o keeps.
        assert_eq!(roles(&s, "Hkv"), (DimKind::Independent, vec![Kept]));
        assert_eq!(s.dims[2].with, ["H"]);
    }
}
