//! Output coverage: which elements of each kernel output the program writes, computed from the
//! affine access patterns of its stores. A kernel that never writes part of an output (a
//! forgotten ragged tail, an off-by-one tile count) would return uninitialised memory; tracing
//! reports it instead, naming the output and the first element never written.

use crate::affine::LoopVar;
use crate::error::NkiError;
use crate::ir::{HbmAccess, HbmKind, Instruction, Program, Stmt};
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

/// Calls `f(start, len)` for every run of consecutive elements `access` writes, for every value
/// of the loop variables it depends on (rows that continue each other are one run).
fn runs(access: &HbmAccess, trips: &[usize], f: &mut dyn FnMut(i64, usize)) {
    let vars: Vec<(LoopVar, usize)> = access
        .offset
        .terms
        .iter()
        .map(|&(v, _)| (v, trips[v.0 as usize]))
        .collect();
    if vars.iter().any(|&(_, trip)| trip == 0) {
        return;
    }
    let contiguous = access.free_dims.is_none()
        && (access.f_stride == 1 || access.nf == 1)
        && (access.np == 1 || access.p_stride == access.nf as i64);
    let offsets = access.free_dims.as_ref().map(|_| access.row_offsets());
    let mut values = vec![0i64; trips.len()];
    loop {
        let base = access.offset.eval(&values);
        if contiguous {
            f(base, access.np * access.nf);
        } else {
            for p in 0..access.np {
                let row = base + p as i64 * access.p_stride;
                if let Some(offsets) = &offsets {
                    for o in offsets {
                        f(row + o, 1);
                    }
                } else if access.f_stride == 1 {
                    f(row, access.nf);
                } else {
                    for i in 0..access.nf {
                        f(row + i as i64 * access.f_stride, 1);
                    }
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

fn gcd(mut a: usize, mut b: usize) -> usize {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// The most granules a coverage bitmap takes (1 GiB); beyond, written runs are kept as
/// intervals.
const MAX_GRANULES: usize = 1 << 33;

/// The elements of a `len`-element output that `accesses` never write: `(first, count)`.
/// Elements are marked in granules of the largest size every written run starts and ends on
/// (a `[2^20, 2^16]` output written in 2048-element rows is 2^25 granules, not 2^36 bits).
fn missing(len: usize, accesses: &[&HbmAccess], trips: &[usize]) -> Option<(usize, usize)> {
    let clip = |start: i64, n: usize| {
        let lo = start.clamp(0, len as i64) as usize;
        let hi = (start.saturating_add(n as i64)).clamp(0, len as i64) as usize;
        (lo < hi).then_some((lo, hi))
    };
    let mut granule = len;
    for a in accesses {
        runs(a, trips, &mut |start, n| {
            if let Some((lo, hi)) = clip(start, n) {
                granule = gcd(gcd(granule, lo), hi);
            }
        });
    }
    if len == 0 {
        return None;
    }
    let granule = granule.max(1);
    if len / granule <= MAX_GRANULES {
        let mut map = Bitmap::new(len / granule);
        for a in accesses {
            runs(a, trips, &mut |start, n| {
                if let Some((lo, hi)) = clip(start, n) {
                    map.mark_run((lo / granule) as i64, (hi - lo) / granule);
                }
            });
        }
        return map.missing().map(|(f, c)| (f * granule, c * granule));
    }
    let mut set = std::collections::BTreeMap::<usize, usize>::new();
    for a in accesses {
        runs(a, trips, &mut |start, n| {
            if let Some((lo, hi)) = clip(start, n) {
                insert_interval(&mut set, lo, hi);
            }
        });
    }
    let (mut at, mut first, mut count) = (0, None, 0);
    for (&lo, &hi) in &set {
        if lo > at {
            first.get_or_insert(at);
            count += lo - at;
        }
        at = at.max(hi);
    }
    if at < len {
        first.get_or_insert(at);
        count += len - at;
    }
    first.map(|f| (f, count))
}

/// Adds `lo..hi` to a set of disjoint, non-adjacent intervals (start → end), merging.
fn insert_interval(
    set: &mut std::collections::BTreeMap<usize, usize>,
    mut lo: usize,
    mut hi: usize,
) {
    if let Some((&s, &e)) = set.range(..=lo).next_back()
        && e >= lo
    {
        lo = s;
        hi = hi.max(e);
        set.remove(&s);
    }
    while let Some((&s, &e)) = set.range(lo..).next()
        && s <= hi
    {
        hi = hi.max(e);
        set.remove(&s);
    }
    set.insert(lo, hi);
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
    check(program, names, kernel, false)
}

/// [`check_output_coverage`] for a kernel the NKI frontend traced (outputs named as the program
/// names them). Stores whose place is decided at run time — at a runtime offset, or inside a
/// device loop whose iterations registers decide — cover what their indices say when the
/// program runs: an output any of them reaches is not checked.
pub fn check_traced_output_coverage(program: &Program, kernel: SourceLoc) -> Result<(), NkiError> {
    check(program, &[], kernel, true)
}

/// Every instruction with whether it runs inside a device loop.
fn visit<'a>(body: &'a [Stmt], in_device_loop: bool, f: &mut dyn FnMut(&'a Instruction, bool)) {
    for s in body {
        match s {
            Stmt::Alloc { .. } => {}
            Stmt::Inst(i) => f(i, in_device_loop),
            Stmt::Loop { body, .. } => visit(body, in_device_loop, f),
            Stmt::DeviceLoop { body, .. } => visit(body, true, f),
        }
    }
}

fn check(
    program: &Program,
    names: &[&str],
    kernel: SourceLoc,
    runtime_stores_cover: bool,
) -> Result<(), NkiError> {
    let trips = program.trips();
    let mut stores: Vec<Vec<&HbmAccess>> = vec![Vec::new(); program.hbm.len()];
    let mut unchecked = vec![false; program.hbm.len()];
    visit(&program.body, false, &mut |inst, in_device_loop| {
        for (access, write) in inst.op.hbm_accesses() {
            if !write {
                continue;
            }
            if access.dynamic.is_none() {
                // Every store counts (`dma_copy`, `dma_compute`, ...); a runtime offset's
                // writes land where its indices say and are not counted.
                stores[access.tensor.0 as usize].push(access);
            }
            if runtime_stores_cover && (access.dynamic.is_some() || in_device_loop) {
                unchecked[access.tensor.0 as usize] = true;
            }
        }
    });
    for (i, id) in program.outputs.iter().enumerate() {
        let decl = &program.hbm[id.0 as usize];
        if decl.kind != HbmKind::Output || unchecked[id.0 as usize] {
            continue;
        }
        if let Some((first, count)) = missing(decl.numel(), &stores[id.0 as usize], &trips) {
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
    fn intervals_merge_and_granules_scale_with_the_runs() {
        let mut set = std::collections::BTreeMap::new();
        for (lo, hi) in [(10, 20), (30, 40), (20, 25), (0, 5), (24, 31), (100, 120)] {
            insert_interval(&mut set, lo, hi);
        }
        let got: Vec<(usize, usize)> = set.into_iter().collect();
        assert_eq!(got, vec![(0, 5), (10, 40), (100, 120)]);
        assert_eq!(gcd(65536 * 3, 2048), 2048);
        assert_eq!(gcd(7, 0), 7);
    }

    #[test]
    fn flat_indices_become_coordinates() {
        assert_eq!(unflatten(7, &[2, 3, 2]), vec![1, 0, 1]);
        assert_eq!(unflatten(0, &[]), Vec::<usize>::new());
    }
}
