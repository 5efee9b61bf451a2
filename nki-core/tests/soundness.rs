//! Simulator soundness.
//!
//! - The parallel-loop analysis against brute force: random affine write patterns in two nested
//!   `affine_range` loops; whenever the analysis lets a loop run in parallel, enumerating every
//!   element each iteration writes must show the iterations' writes disjoint.
//! - HBM accesses are bounds-checked in release builds too: a malformed program (built by hand,
//!   not by the tracer, so nothing upstream caught it) gets an error, never a read or write
//!   outside the caller's buffers, including patterns whose reach overflows `i64`.

use nki_core::affine::{AffineExpr, LoopVar};
use nki_core::ir::{
    Buffer, DmaOperand, HbmAccess, HbmDecl, HbmId, HbmKind, Instruction, LoopDecl, LoopKind,
    OobMode, Op, Program, Stmt, TileDecl, TileId, TileRegion,
};
use nki_core::loc::SourceLoc;
use nki_core::sim::{HostTensor, HostTensorMut, SimOptions, parallel_loops, simulate};
use nki_core::{DType, NkiError, Target};
use std::collections::HashSet;

/// splitmix64: a tiny deterministic generator (the cases are reproducible from the seed).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> i64 {
        (self.next() % n) as i64
    }

    fn pick(&mut self, options: &[i64]) -> i64 {
        options[self.below(options.len() as u64) as usize]
    }
}

fn decl_loc() -> SourceLoc {
    SourceLoc::caller()
}

/// One write: `np × nf` elements at `offset + p·p_stride + f·f_stride`.
struct Write {
    access: HbmAccess,
}

fn random_write(rng: &mut Rng, rows: i64, cols: i64) -> Write {
    let np = 1 + rng.below(6) as usize;
    let nf = 1 + rng.below(6) as usize;
    let (npi, nfi) = (np as i64, nf as i64);
    let p_stride = rng.pick(&[cols, cols, 2 * cols, 1, 0, nfi, -cols, 3]);
    let f_stride = rng.pick(&[1, 1, 1, cols, 0, 2, -1]);
    let coefficient = |rng: &mut Rng| {
        let k = rng.pick(&[0, 1, npi, nfi, cols, npi * cols, 2 * nfi, -npi * cols, -1]);
        if rng.below(8) == 0 {
            rng.below(40) - 20
        } else {
            k
        }
    };
    let k0 = coefficient(rng);
    let k1 = coefficient(rng);
    let mut terms = Vec::new();
    for (v, k) in [(0u32, k0), (1u32, k1)] {
        if k != 0 {
            terms.push((LoopVar(v), k));
        }
    }
    Write {
        access: HbmAccess {
            tensor: HbmId(0),
            offset: AffineExpr {
                constant: rng.below((rows * cols) as u64),
                terms,
            },
            np,
            nf,
            p_stride,
            f_stride,
            dynamic: None,
            free_dims: None,
        },
    }
}

/// `for i0 in affine_range(t0): for i1 in affine_range(t1): <writes>` into one output.
fn program(writes: &[Write], trips: [usize; 2], rows: i64, cols: i64) -> Program {
    let loc = decl_loc();
    let mut tiles = Vec::new();
    let mut body = Vec::new();
    for (i, w) in writes.iter().enumerate() {
        let tile = TileId(i as u32);
        tiles.push(TileDecl {
            name: format!("t{i}"),
            partitions: w.access.np,
            free: w.access.nf,
            dtype: DType::F32,
            buffer: Buffer::Sbuf,
            loc,
            address: None,
        });
        let region = TileRegion::rect(tile, 0, w.access.np, 0, w.access.nf);
        body.push(Stmt::Alloc { tile });
        body.push(Stmt::Inst(Instruction {
            op: Op::Memset {
                dst: region.clone(),
                value: 1.0,
            },
            loc,
        }));
        body.push(Stmt::Inst(Instruction {
            op: Op::DmaCopy {
                dst: DmaOperand::Hbm {
                    access: w.access.clone(),
                },
                src: DmaOperand::Tile { region },
                oob_mode: OobMode::Error,
                reinterpret: false,
            },
            loc,
        }));
    }
    let inner = Stmt::Loop {
        var: LoopVar(1),
        body,
    };
    Program {
        name: "random_writes".into(),
        target: Target::Trn2,
        hbm: vec![HbmDecl {
            name: "out0".into(),
            kind: HbmKind::Output,
            shape: vec![rows as usize, cols as usize],
            dtype: DType::F32,
            loc: Some(loc),
            domain: None,
            values: None,
        }],
        outputs: vec![HbmId(0)],
        tiles,
        loops: trips
            .iter()
            .map(|&trip| LoopDecl {
                trip,
                kind: LoopKind::Affine,
                loc,
            })
            .collect(),
        registers: Vec::new(),
        device_loops: Vec::new(),
        grid: Vec::new(),
        body: vec![Stmt::Loop {
            var: LoopVar(0),
            body: vec![inner],
        }],
    }
}

/// Flat elements the writes touch with loop values `env`.
fn written(writes: &[Write], env: &[i64]) -> HashSet<i64> {
    let mut out = HashSet::new();
    for w in writes {
        let a = &w.access;
        let base = a.offset.eval(env);
        for p in 0..a.np as i64 {
            for f in 0..a.nf as i64 {
                out.insert(base + p * a.p_stride + f * a.f_stride);
            }
        }
    }
    out
}

/// Whether iterations of loop `var` write disjoint elements, for every value of the other loop.
fn brute_force_disjoint(writes: &[Write], trips: [usize; 2], var: usize) -> bool {
    let other = 1 - var;
    for o in 0..trips[other] as i64 {
        let mut seen: HashSet<i64> = HashSet::new();
        for i in 0..trips[var] as i64 {
            let mut env = [0i64; 2];
            env[var] = i;
            env[other] = o;
            let mine = written(writes, &env);
            if mine.iter().any(|e| seen.contains(e)) {
                return false;
            }
            seen.extend(mine);
        }
    }
    true
}

#[test]
fn parallel_loops_never_share_a_written_element() {
    let mut rng = Rng(0x5eed);
    let mut parallel_cases = 0;
    let cases = 20_000;
    for case in 0..cases {
        let (rows, cols) = (1 + rng.below(40), 1 + rng.below(40));
        let n_writes = 1 + rng.below(2) as usize;
        let writes: Vec<Write> = (0..n_writes)
            .map(|_| random_write(&mut rng, rows, cols))
            .collect();
        let trips = [2 + rng.below(4) as usize, 2 + rng.below(4) as usize];
        let p = program(&writes, trips, rows, cols);
        let parallel = parallel_loops(&p);
        for (var, &is_parallel) in parallel.iter().enumerate() {
            if is_parallel {
                parallel_cases += 1;
                assert!(
                    brute_force_disjoint(&writes, trips, var),
                    "case {case}: loop i{var} judged parallel but its iterations overlap: {:?}",
                    writes.iter().map(|w| &w.access).collect::<Vec<_>>()
                );
            }
        }
    }
    // The generator must exercise the analysis, not only cases it rejects.
    assert!(
        parallel_cases > cases / 10,
        "only {parallel_cases} loops judged parallel"
    );
}

fn run(program: &Program, out: &mut [u8]) -> Result<(), NkiError> {
    let decl = &program.hbm[0];
    let mut outputs = [HostTensorMut {
        dtype: decl.dtype,
        shape: &decl.shape,
        data: out,
    }];
    let inputs: [HostTensor<'_>; 0] = [];
    simulate(program, &inputs, &mut outputs, SimOptions::default())
}

#[test]
fn a_tile_region_larger_than_its_access_pattern_is_an_error_not_an_overrun() {
    // The last 4 elements of a [4, 4] output are written from a tile row of 8: without the
    // shape check the row would run 4 elements past the buffer.
    let write = Write {
        access: HbmAccess {
            tensor: HbmId(0),
            offset: AffineExpr::constant(12),
            np: 1,
            nf: 4,
            p_stride: 4,
            f_stride: 1,
            dynamic: None,
            free_dims: None,
        },
    };
    let mut p = program(&[write], [1, 1], 4, 4);
    p.tiles[0].free = 8;
    for s in walk_mut(&mut p.body) {
        if let Stmt::Inst(Instruction {
            op:
                Op::DmaCopy {
                    src: DmaOperand::Tile { region },
                    ..
                }
                | Op::Memset { dst: region, .. },
            ..
        }) = s
        {
            region.nf = 8;
        }
    }
    let mut out = vec![0u8; 16 * 4];
    let err = run(&p, &mut out).unwrap_err().to_string();
    assert!(err.contains("dma_copy") && err.contains("shape"), "{err}");
}

#[test]
fn an_access_pattern_past_the_buffer_is_an_error() {
    let write = Write {
        access: HbmAccess {
            tensor: HbmId(0),
            offset: AffineExpr::constant(14),
            np: 1,
            nf: 4,
            p_stride: 4,
            f_stride: 1,
            dynamic: None,
            free_dims: None,
        },
    };
    let p = program(&[write], [1, 1], 4, 4);
    let mut out = vec![0u8; 16 * 4];
    let err = run(&p, &mut out).unwrap_err().to_string();
    assert!(err.contains("out-of-bounds HBM access"), "{err}");
}

/// A pattern whose reach overflows `i64`: rows `2^61 + 1` elements apart wrap around to a
/// span of 8 elements when multiplied out in `i64`.
fn wrapping_write() -> Write {
    Write {
        access: HbmAccess {
            tensor: HbmId(0),
            offset: AffineExpr::constant(0),
            np: 9,
            nf: 1,
            p_stride: (1 << 61) + 1,
            f_stride: 1,
            dynamic: None,
            free_dims: None,
        },
    }
}

#[test]
fn an_access_pattern_whose_reach_overflows_is_an_error_not_a_wild_write() {
    let p = program(&[wrapping_write()], [1, 1], 4, 4);
    let mut out = vec![0u8; 16 * 4];
    let err = run(&p, &mut out).unwrap_err().to_string();
    assert!(err.contains("out-of-bounds HBM access"), "{err}");
    assert!(out.iter().all(|&b| b == 0), "nothing was written");
    let err = nki_core::validate::validate(&p).unwrap_err().to_string();
    assert!(err.contains("hbm-bounds"), "{err}");
}

#[test]
fn loops_writing_through_an_overflowing_pattern_never_run_in_parallel() {
    // Iterations 2^61 + 1 elements apart, one element each: in i64 the windows look disjoint
    // only because the offsets wrap; the analysis must not reason about such a pattern at all.
    let mut write = wrapping_write();
    write.access.np = 1;
    write.access.offset = AffineExpr {
        constant: 0,
        terms: vec![(LoopVar(0), (1 << 61) + 1)],
    };
    let p = program(&[write], [9, 1], 4, 4);
    assert_eq!(parallel_loops(&p), vec![false, false]);
}

fn walk_mut(body: &mut [Stmt]) -> Vec<&mut Stmt> {
    let mut out = Vec::new();
    for s in body {
        if let Stmt::Loop { body, .. } = s {
            out.extend(walk_mut(body));
        } else {
            out.push(s);
        }
    }
    out
}

#[test]
fn a_kernel_returning_one_tensor_twice_is_a_trace_error() {
    use nki_core::lang::{InputSpec, trace};
    use nki_core::prelude::*;
    let inputs = [InputSpec {
        name: "x".into(),
        shape: vec![4, 8],
        dtype: DType::F32,
    }];
    let err = trace("twice", Target::Trn2, &inputs, |_| {
        let out = shared_hbm(&[4, 8], DType::F32);
        let t = sbuf([4, 8], DType::F32);
        memset(&t, 0.0);
        dma_copy(&out, &t);
        vec![out.clone(), out]
    })
    .unwrap_err();
    assert!(matches!(err, NkiError::Trace { .. }), "{err:?}");
    assert!(
        err.to_string()
            .contains("as output 0 and again as output 1"),
        "{err}"
    );
}

#[test]
fn a_program_listing_an_output_twice_is_refused_by_the_simulator() {
    // Hand-built (simulate does not validate): two caller buffers for one tensor would leave
    // one of them unwritten.
    let write = Write {
        access: HbmAccess {
            tensor: HbmId(0),
            offset: AffineExpr::constant(0),
            np: 4,
            nf: 4,
            p_stride: 4,
            f_stride: 1,
            dynamic: None,
            free_dims: None,
        },
    };
    let mut p = program(&[write], [1, 1], 4, 4);
    p.outputs.push(HbmId(0));
    let decl = &p.hbm[0];
    let (mut a, mut b) = (vec![7u8; 64], vec![7u8; 64]);
    let mut outputs = [
        HostTensorMut {
            dtype: decl.dtype,
            shape: &decl.shape,
            data: &mut a,
        },
        HostTensorMut {
            dtype: decl.dtype,
            shape: &decl.shape,
            data: &mut b,
        },
    ];
    let err = simulate(&p, &[], &mut outputs, SimOptions::default()).unwrap_err();
    assert!(err.to_string().contains("listed twice"), "{err}");
}
