//! The order the simulator runs `affine_range` iterations in ([`IterationOrder`]).
//!
//! The device may run the iterations of an `affine_range` in any order, overlapped; a kernel
//! whose result depends on the order is wrong there even when it is right in program order.
//! Validation rejects the dependences it can prove (`affine-range-dependence`); running the
//! iterations reversed or shuffled shows one it missed as different bits.
//!
//! A loop traced once (Rust kernels) runs its iterations in the permuted order. An unrolled loop
//! (NKI frontend kernels, [`crate::ir::unroll`]): a run of one-trip loops,
//! [`crate::ir::affine_runs`]) is permuted as statements before the program runs, the
//! allocations between its iterations moved in front of the first. `sequential_range` loops
//! always run in order, and so do loops the simulator runs in parallel (it proved their
//! iterations independent, so the order cannot change their bits).

use crate::ir::{Program, Stmt, affine_runs};

/// In which order `affine_range` iterations run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IterationOrder {
    /// In program order, `0, 1, ..., n - 1` (the default).
    #[default]
    Program,
    /// Last first: `n - 1, ..., 1, 0`.
    Reversed,
    /// A permutation drawn from `seed` (the same seed, the same permutation of each loop;
    /// different executions of one loop nested in another get different permutations).
    Shuffled {
        /// The seed.
        seed: u64,
    },
}

impl IterationOrder {
    /// Parses `program`, `reversed`, `shuffled` (seed 0) or `shuffled:SEED`.
    pub fn parse(text: &str) -> Result<IterationOrder, String> {
        match text {
            "program" => Ok(IterationOrder::Program),
            "reversed" => Ok(IterationOrder::Reversed),
            "shuffled" => Ok(IterationOrder::Shuffled { seed: 0 }),
            other => other
                .strip_prefix("shuffled:")
                .and_then(|s| s.parse().ok())
                .map(|seed| IterationOrder::Shuffled { seed })
                .ok_or_else(|| {
                    format!(
                        "iteration order `{other}` (expected program, reversed, shuffled or \
                         shuffled:SEED)"
                    )
                }),
        }
    }

    /// The iterations `0..trip` in this order; `salt` tells apart the executions of a loop a
    /// shuffle permutes differently.
    pub fn permutation(self, trip: usize, salt: u64) -> Vec<usize> {
        let mut order: Vec<usize> = (0..trip).collect();
        match self {
            IterationOrder::Program => {}
            IterationOrder::Reversed => order.reverse(),
            IterationOrder::Shuffled { seed } => {
                let mut state = splitmix(seed ^ splitmix(salt));
                for i in (1..trip).rev() {
                    state = splitmix(state);
                    order.swap(i, (state % (i as u64 + 1)) as usize);
                }
            }
        }
        order
    }
}

/// splitmix64's finaliser of `x + γ`.
pub(crate) fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// `program` with the iterations of its unrolled `affine_range` loops in `order`; `None` when
/// nothing moves.
pub(crate) fn reorder_unrolled(program: &Program, order: IterationOrder) -> Option<Program> {
    if order == IterationOrder::Program {
        return None;
    }
    let mut out = program.clone();
    let mut salt = 0u64;
    let moved = reorder_block(program, &mut out.body, order, &mut salt);
    moved.then_some(out)
}

fn reorder_block(
    program: &Program,
    block: &mut Vec<Stmt>,
    order: IterationOrder,
    salt: &mut u64,
) -> bool {
    let mut moved = false;
    for s in block.iter_mut() {
        match s {
            Stmt::Loop { body, .. } | Stmt::DeviceLoop { body, .. } => {
                moved |= reorder_block(program, body, order, salt);
            }
            Stmt::Alloc { .. } | Stmt::Inst(_) => {}
        }
    }
    let runs = affine_runs(program, block);
    if runs.is_empty() {
        return moved;
    }
    let old = std::mem::take(block);
    let mut slots: Vec<Option<Stmt>> = old.into_iter().map(Some).collect();
    let mut out = Vec::with_capacity(slots.len());
    let mut next = 0;
    for run in runs {
        out.extend(slots[next..run.start].iter_mut().filter_map(Option::take));
        let iterations: Vec<Stmt> = run
            .iterations
            .iter()
            .filter_map(|&i| slots[i].take())
            .collect();
        // The allocations between the iterations go first: every iteration may use them.
        out.extend(
            slots[run.start..run.end]
                .iter_mut()
                .filter_map(Option::take),
        );
        *salt = salt.wrapping_add(1);
        let mut iterations: Vec<Option<Stmt>> = iterations.into_iter().map(Some).collect();
        for k in order.permutation(iterations.len(), *salt) {
            out.extend(iterations[k].take());
        }
        next = run.end;
        moved = true;
    }
    out.extend(slots[next..].iter_mut().filter_map(Option::take));
    *block = out;
    moved
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permutations() {
        assert_eq!(IterationOrder::Program.permutation(3, 7), [0, 1, 2]);
        assert_eq!(IterationOrder::Reversed.permutation(3, 7), [2, 1, 0]);
        let s = IterationOrder::Shuffled { seed: 5 };
        let mut p = s.permutation(10, 1);
        assert_eq!(p, s.permutation(10, 1));
        p.sort_unstable();
        assert_eq!(p, (0..10).collect::<Vec<_>>());
        assert_eq!(
            IterationOrder::parse("shuffled:9"),
            Ok(IterationOrder::Shuffled { seed: 9 })
        );
        assert!(IterationOrder::parse("random").is_err());
    }
}
