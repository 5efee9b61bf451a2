//! When the simulator runs a launch's program instances at the same time
//! (`ExecPlan::instances_together`): only when nothing orders them and no instance reaches what
//! another writes, and then with the bits of running them one after the other.

use nki_core::Target;
use nki_core::ir::Program;
use nki_core::lang::{InputSpec, trace_instances};
use nki_core::prelude::*;
use nki_core::sim::{ExecPlan, HostTensor, HostTensorMut, SimOptions, set_split_min_work};

const ROWS: usize = 512;
const COLS: usize = 96;

/// How the two instances of the test kernel share `out = x · 3 + 1`.
#[derive(Clone, Copy)]
enum Share {
    /// Each instance its own rows.
    Split,
    /// Every instance all rows (the kernel ignores its program id).
    Replicated,
    /// Each instance its own rows, then a `core_barrier` on the output.
    SplitThenBarrier,
}

fn kernel(share: Share) -> Program {
    let input = InputSpec {
        name: "x".into(),
        shape: vec![ROWS, COLS],
        dtype: DType::F32,
    };
    trace_instances("scale", Target::Trn2, &[2], &[input], |h| {
        let out = shared_hbm(&[ROWS, COLS], DType::F32);
        let body = |rows: TileSpan| {
            let t = sbuf([rows.size, COLS], DType::F32);
            dma_copy(&t, h[0].view().rows(rows.start.clone(), rows.size));
            tensor_scalar(&t, &t, BinOp::Multiply, 3.0);
            tensor_scalar(&t, &t, BinOp::Add, 1.0);
            dma_copy(out.view().rows(rows.start, rows.size), &t);
        };
        match share {
            Share::Split => for_each_program_tile(ROWS, PMAX, body),
            Share::Replicated => for_each_tile(ROWS, PMAX, body),
            Share::SplitThenBarrier => {
                for_each_program_tile(ROWS, PMAX, body);
                core_barrier(&out, &[0, 1]);
            }
        }
        vec![out]
    })
    .unwrap()
}

fn run(program: &Program, x: &[u8], parallel: bool) -> Vec<u8> {
    let mut out = vec![0u8; ROWS * COLS * 4];
    let shape = [ROWS, COLS];
    let inputs = [HostTensor {
        dtype: DType::F32,
        shape: &shape,
        data: x,
    }];
    let mut outputs = [HostTensorMut {
        dtype: DType::F32,
        shape: &shape,
        data: &mut out,
    }];
    let opts = SimOptions {
        parallel,
        ..SimOptions::default()
    };
    nki_core::sim::simulate(program, &inputs, &mut outputs, opts).unwrap();
    out
}

#[test]
fn instances_run_together_only_when_independent_and_large_enough() {
    // One test, so that no other test of this binary moves the threshold meanwhile.
    set_split_min_work(0);
    let split = kernel(Share::Split);
    assert!(ExecPlan::new(&split).instances_together());
    assert!(
        !ExecPlan::new(&kernel(Share::Replicated)).instances_together(),
        "instances storing the same elements are not independent"
    );
    assert!(
        !ExecPlan::new(&kernel(Share::SplitThenBarrier)).instances_together(),
        "instances that synchronise run in lockstep"
    );

    let x: Vec<u8> = (0..ROWS * COLS)
        .flat_map(|i| ((i % 251) as f32 * 0.37 - 40.0).to_le_bytes())
        .collect();
    let together = run(&split, &x, true);
    let in_order = run(&split, &x, false);
    assert_eq!(together, in_order, "the same bits either way");
    let first = f32::from_le_bytes(together[4..8].try_into().unwrap());
    assert_eq!(first, (0.37f32 - 40.0) * 3.0 + 1.0);

    set_split_min_work(u64::MAX);
    assert!(
        !ExecPlan::new(&split).instances_together(),
        "a run below the threshold stays on the calling thread"
    );
}
