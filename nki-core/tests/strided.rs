//! Strided tile regions (`Tile::ap`: NKI's access patterns on SBUF/PSUM tiles): instructions
//! read and write through them as through a rectangle, only the elements the walk names change,
//! the generated NKI source spells them as `.ap(...)`, and patterns outside the tile or with
//! a partition step other than the tile's free size are trace errors at the call.

mod common;

use common::{input, run, values};
use nki_core::NkiError;
use nki_core::codegen::emit_nki;
use nki_core::ir::Program;
use nki_core::lang::trace;
use nki_core::prelude::*;
use nki_core::validate::validate;

const C: usize = 4;
const H: usize = 4;
const W: usize = 6;

/// `x` `[C, H·W]`: the maximum of every 2x2 window (a 5-D walk per window row, reduced by
/// `tensor_reduce`) as output 0 `[C, (H/2)·(W/2)]`, and `x` with its odd columns negated
/// in place through a step walk as output 1.
fn program() -> Program {
    trace("pool", Target::Trn2, &input([C, H * W], DType::F32), |h| {
        let pooled = shared_hbm(&[C, (H / 2) * (W / 2)], DType::F32);
        let signed = shared_hbm(&[C, H * W], DType::F32);
        let t = sbuf([C, H, W], DType::F32);
        dma_copy(&t, &h[0]);
        let out = sbuf([C, (H / 2) * (W / 2)], DType::F32);
        for i in 0..H / 2 {
            for j in 0..W / 2 {
                let window = t.ap(&[[H * W, C], [W, 2], [1, 2]], 2 * i * W + 2 * j);
                let k = i * (W / 2) + j;
                tensor_reduce(out.cols(k, 1), BinOp::Maximum, &window, 1, false);
            }
        }
        dma_copy(&pooled, &out);
        let odd = t.ap(&[[H * W, C], [2, H * W / 2]], 1);
        tensor_scalar(&odd, &odd, BinOp::Multiply, -1.0);
        dma_copy(&signed, &t);
        vec![pooled, signed]
    })
    .unwrap()
}

#[test]
fn instructions_read_and_write_through_access_patterns() {
    let p = program();
    validate(&p).unwrap();
    let x = values(C * H * W, 7, 4.0);
    let outs = run(&p, &[&x]);
    let mut want_pool = Vec::new();
    let mut want_signed = x.clone();
    for c in 0..C {
        for i in 0..H / 2 {
            for j in 0..W / 2 {
                let at = |di: usize, dj: usize| x[c * H * W + (2 * i + di) * W + 2 * j + dj];
                want_pool.push(at(0, 0).max(at(0, 1)).max(at(1, 0)).max(at(1, 1)));
            }
        }
        for f in (1..H * W).step_by(2) {
            want_signed[c * H * W + f] = -x[c * H * W + f];
        }
    }
    assert_eq!(outs[0], want_pool);
    assert_eq!(outs[1], want_signed);
}

#[test]
fn codegen_spells_a_walk_as_an_access_pattern() {
    let source = emit_nki(&program());
    assert!(
        source.contains("data=t0.ap(pattern=[[24, 4], [6, 2], [1, 2]], offset=14), axis=(1, 2)"),
        "{source}"
    );
    assert!(
        source.contains(".ap(pattern=[[24, 4], [2, 12]], offset=1)"),
        "{source}"
    );
}

#[test]
fn patterns_the_rules_forbid_are_trace_errors_at_the_call() {
    let traced = |pattern: [[usize; 2]; 2], offset: usize| {
        trace("bad", Target::Trn2, &input([8, 16], DType::F32), |h| {
            let out = shared_hbm(&[8, 16], DType::F32);
            let t = sbuf([8, 16], DType::F32);
            memset(t.ap(&pattern, offset), 0.0);
            dma_copy(&out, &h[0]);
            vec![out]
        })
    };
    let message = |r: Result<Program, NkiError>| match r {
        Err(NkiError::Trace { message, .. }) => message,
        other => panic!("expected a trace error, got {other:?}"),
    };
    assert!(message(traced([[32, 4], [1, 16]], 0)).contains("must be the tile's free size 16"));
    let m = message(traced([[16, 8], [3, 7]], 0));
    assert!(m.contains("reaches outside the tile"), "{m}");
    assert!(message(traced([[16, 8], [1, 16]], 1)).contains("reaches outside the tile"));
    traced([[16, 8], [2, 8]], 1).unwrap();
}
