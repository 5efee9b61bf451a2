//! Output coverage: which elements of each kernel output the program writes, computed from the
//! affine access patterns of its stores. A kernel that never writes part of an output (a
//! forgotten ragged tail, an off-by-one tile count) would return uninitialised memory; tracing
//! reports it instead, naming the output and the first element never written.

use crate::affine::LoopVar;
use crate::error::NkiError;
use crate::ir::{DmaOperand, HbmAccess, HbmKind, Op, Program};
use crate::loc::SourceLoc;

/// A set of flat element indices of one tensor.
struct Bitmap {
    words: Vec<u64>,
    len: usize,
}

impl Bitmap {
    fn new(len: usize) -> Bitmap {
        Bitmap {
            words: vec![0; len.div_ceil(64)],
            len,
        }
    }

    /// Marks `start..start + n` (clipped to the tensor; validation reports out-of-bounds
    /// patterns separately).
    fn mark_run(&mut self, start: i64, n: usize) {
        let lo = start.max(0) as usize;
        let hi = ((start + n as i64).max(0) as usize).min(self.len);
        let mut i = lo;
        while i < hi {
            if i.is_multiple_of(64) && i + 64 <= hi {
                self.words[i / 64] = u64::MAX;
                i += 64;
            } else {
                self.words[i / 64] |= 1 << (i % 64);
                i += 1;
            }
        }
    }

    /// The first index not marked, and how many are not marked.
    fn missing(&self) -> Option<(usize, usize)> {
        let mut first = None;
        let mut count = 0;
        for (w, word) in self.words.iter().enumerate() {
            let valid = if (w + 1) * 64 <= self.len {
                u64::MAX
            } else {
                (1u64 << (self.len - w * 64)) - 1
            };
            let holes = !word & valid;
            if holes != 0 {
                first.get_or_insert(w * 64 + holes.trailing_zeros() as usize);
                count += holes.count_ones() as usize;
            }
        }
        first.map(|f| (f, count))
    }
}

/// Marks every element `access` writes, for every value of the loop variables it depends on.
fn mark(bitmap: &mut Bitmap, access: &HbmAccess, trips: &[usize]) {
    let vars: Vec<(LoopVar, usize)> = access
        .offset
        .terms
        .iter()
        .map(|&(v, _)| (v, trips[v.0 as usize]))
        .collect();
    let mut values = vec![0i64; trips.len()];
    loop {
        let base = access.offset.eval(&values);
        for p in 0..access.np {
            let row = base + p as i64 * access.p_stride;
            if access.free_dims.is_some() {
                for o in access.row_offsets() {
                    bitmap.mark_run(row + o, 1);
                }
            } else if access.f_stride == 1 {
                bitmap.mark_run(row, access.nf);
            } else {
                for f in 0..access.nf {
                    bitmap.mark_run(row + f as i64 * access.f_stride, 1);
                }
            }
        }
        // Next combination of the variables the offset depends on (odometer order).
        let mut k = 0;
        loop {
            let Some(&(v, trip)) = vars.get(k) else {
                return;
            };
            let slot = &mut values[v.0 as usize];
            *slot += 1;
            if (*slot as usize) < trip {
                break;
            }
            *slot = 0;
            k += 1;
        }
    }
}

/// `[i, j, ...]` of flat index `flat` in a row-major `shape`.
fn unflatten(mut flat: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for (d, &n) in shape.iter().enumerate().rev() {
        idx[d] = flat % n.max(1);
        flat /= n.max(1);
    }
    idx
}

/// Checks that `program` writes every element of every output. `names` are the outputs' names
/// in return order (from the contract); `kernel` is the kernel's definition site, used when an
/// output has no allocation site.
pub fn check_output_coverage(
    program: &Program,
    names: &[&str],
    kernel: SourceLoc,
) -> Result<(), NkiError> {
    let trips = program.trips();
    let mut maps: Vec<Option<Bitmap>> = program
        .hbm
        .iter()
        .map(|d| (d.kind == HbmKind::Output).then(|| Bitmap::new(d.numel())))
        .collect();
    program.visit_instructions(&mut |inst, _| {
        if let Op::DmaCopy {
            dst: DmaOperand::Hbm { access },
            ..
        } = &inst.op
            && access.dynamic.is_none()
            && let Some(Some(map)) = maps.get_mut(access.tensor.0 as usize)
        {
            // A runtime offset's writes land where its indices say: they are not counted.
            mark(map, access, &trips);
        }
    });
    for (i, id) in program.outputs.iter().enumerate() {
        let decl = &program.hbm[id.0 as usize];
        let Some(Some(map)) = maps.get(id.0 as usize) else {
            continue;
        };
        if let Some((first, count)) = map.missing() {
            let name = names.get(i).copied().unwrap_or(&decl.name);
            return Err(NkiError::Trace {
                message: format!(
                    "kernel {}: output `{name}` (shape {:?}) is not fully written: {count} of {} elements \
                     are never stored, the first at {:?} (a ragged tail or a tile count that misses the end?)",
                    program.name,
                    decl.shape,
                    decl.numel(),
                    unflatten(first, &decl.shape)
                ),
                loc: decl.loc.unwrap_or(kernel),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bitmap_marks_runs_and_finds_holes() {
        let mut b = Bitmap::new(200);
        b.mark_run(0, 130);
        b.mark_run(131, 69);
        assert_eq!(b.missing(), Some((130, 1)));
        b.mark_run(130, 1);
        assert_eq!(b.missing(), None);
        b.mark_run(-5, 1000); // clipped
        assert_eq!(Bitmap::new(0).missing(), None);
    }

    #[test]
    fn flat_indices_become_coordinates() {
        assert_eq!(unflatten(7, &[2, 3, 2]), vec![1, 0, 1]);
        assert_eq!(unflatten(0, &[]), Vec::<usize>::new());
    }
}
