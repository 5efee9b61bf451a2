//! The non-finite trap on a tile whose storage an earlier run used: a fresh tile is poisoned
//! under the trap whatever the plan says, so a NaN the instruction computes is caught even when
//! the reused buffer held a NaN at that very element (the trap tells "never written" from
//! "already non-finite" by the poison).

use nki_core::Target;
use nki_core::ir::Program;
use nki_core::lang::{InputSpec, trace};
use nki_core::prelude::*;
use nki_core::sim::{SimOptions, simulate_to_vecs};

fn x_spec() -> [InputSpec; 1] {
    [InputSpec {
        name: "x".into(),
        shape: vec![4, 8],
        dtype: DType::F32,
    }]
}

/// `x` loaded and its logarithm taken in place: under the trap this stops at the logarithm,
/// leaving its buffer (NaN at the negative element) to the thread's pool of tile storage.
fn log_in_place() -> Program {
    trace("log_in_place", Target::Trn2, &x_spec(), |h| {
        let out = shared_hbm(&[4, 8], DType::F32);
        let t = sbuf([4, 8], DType::F32);
        dma_copy(&t, &h[0]);
        activation(&t, ActFn::Log, &t, None, 1.0);
        dma_copy(&out, &t);
        vec![out]
    })
    .unwrap()
}

/// The logarithm into a fresh tile, allocated first, so that it takes the pool's buffer: every
/// element of it is written before it is read, so the plan alone would not poison it.
fn log_into_fresh_tile() -> Program {
    trace("log_into_fresh_tile", Target::Trn2, &x_spec(), |h| {
        let out = shared_hbm(&[4, 8], DType::F32);
        let logs = sbuf([4, 8], DType::F32);
        let t = sbuf([4, 8], DType::F32);
        dma_copy(&t, &h[0]);
        activation(&logs, ActFn::Log, &t, None, 1.0);
        dma_copy(&out, &logs);
        vec![out]
    })
    .unwrap()
}

#[test]
fn a_nan_over_a_reused_buffers_nan_is_still_trapped() {
    let x: Vec<u8> = (0..32)
        .flat_map(|i| if i == 11 { -1.0f32 } else { 2.0 }.to_le_bytes())
        .collect();
    let trap = SimOptions {
        trap_nonfinite: true,
        ..SimOptions::default()
    };
    let first = simulate_to_vecs(&log_in_place(), &[&x], trap);
    assert!(first.is_err(), "the first run stops at its logarithm");
    let second = simulate_to_vecs(&log_into_fresh_tile(), &[&x], trap)
        .expect_err("the second run's logarithm makes element [1, 3] NaN");
    let message = second.to_string();
    assert!(message.contains("[1, 3]"), "{message}");
}
