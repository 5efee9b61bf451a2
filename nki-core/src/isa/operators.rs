//! How instructions may use the ALU operators, checked when each is recorded: a unary operator
//! (`nl.abs`, `nl.invert`, ...) is `tensor_scalar`'s with a 0 operand, never `tensor_tensor`'s;
//! `tensor_scalar`'s two operators are both bitvec or both arithmetic; a bitvec operator needs
//! integer tiles (the docs: "input elements are treated as bit patterns"). The simulator
//! implements bitvec operators in `tensor_tensor`, `tensor_scalar`, `tensor_reduce` and
//! `tensor_partition_reduce`, the instructions whose docs describe them.

use crate::ir::{BinOp, Op, OperandUse, ScalarOperand, TileDecl};

/// What is wrong with how `op` uses its operators, if anything.
pub(crate) fn operator_problem(tiles: &[TileDecl], op: &Op) -> Option<String> {
    let name = op.name();
    match op {
        Op::TensorTensor { op: o, .. } => {
            if o.is_unary() {
                return Some(format!(
                    "tensor_tensor: op={} is a unary operator and tensor_tensor takes a binary \
                     one (a unary operator is tensor_scalar's op0 with operand0=0)",
                    o.nki_name()
                ));
            }
            o.is_bitvec()
                .then(|| integer_problem(tiles, op, *o))
                .flatten()
        }
        Op::TensorScalar {
            op0, operand0, op1, ..
        } => {
            let ops = std::iter::once(("op0", "operand0", *op0, operand0))
                .chain(op1.iter().map(|(o, v)| ("op1", "operand1", *o, v)));
            for (kw, operand_kw, o, operand) in ops {
                if o.is_unary() && *operand != (ScalarOperand::Imm { value: 0.0 }) {
                    return Some(format!(
                        "tensor_scalar: {kw}={} is a unary operator, so {operand_kw} must be None \
                         or 0 (got {})",
                        o.nki_name(),
                        describe(operand)
                    ));
                }
            }
            if let Some((o1, _)) = op1
                && o1.is_bitvec() != op0.is_bitvec()
            {
                return Some(format!(
                    "tensor_scalar: op0={} and op1={} must both be bitvec or both arithmetic \
                     operators",
                    op0.nki_name(),
                    o1.nki_name()
                ));
            }
            op0.is_bitvec()
                .then(|| integer_problem(tiles, op, *op0))
                .flatten()
        }
        // bitwise_or / bitwise_and of values in an integer dtype's range stay in it, so the
        // fp32 partition reduction computes them exactly.
        Op::TensorPartitionReduce { op: o, .. } if o.is_bitvec() => integer_problem(tiles, op, *o),
        Op::TensorReduce { op: o, negate, .. } if o.is_bitvec() => {
            if *negate {
                return Some(format!(
                    "tensor_reduce: negate=True with the bitvec operator {} (negation is \
                     arithmetic)",
                    o.nki_name()
                ));
            }
            integer_problem(tiles, op, *o)
        }
        _ => {
            let mut bitvec = None;
            op.visit_operators(&mut |o| {
                if o.is_bitvec() {
                    bitvec.get_or_insert(o);
                }
            });
            bitvec.map(|o| {
                format!(
                    "{name}: {} is a bitvec operator; the simulator implements bitvec operators \
                     in tensor_tensor, tensor_scalar, tensor_reduce and tensor_partition_reduce",
                    o.nki_name()
                )
            })
        }
    }
}

/// A bitvec operator's tiles must all be integer (or bool) tiles.
fn integer_problem(tiles: &[TileDecl], op: &Op, o: BinOp) -> Option<String> {
    let mut problem = None;
    op.visit_operands(&mut |u| {
        if let OperandUse::Tile(r, _) = u
            && let Some(t) = tiles.get(r.tile.0 as usize)
            && t.dtype.is_float()
            && problem.is_none()
        {
            problem = Some(format!(
                "{}: the bitvec operator {} works on integer bit patterns, but tile {} is {} \
                 (use integer tiles, or an arithmetic operator)",
                op.name(),
                o.nki_name(),
                t.name,
                t.dtype
            ));
        }
    });
    problem
}

fn describe(s: &ScalarOperand) -> String {
    match s {
        ScalarOperand::Imm { value } => format!("{value}"),
        ScalarOperand::Column { .. } => "a (P, 1) tile".into(),
    }
}
