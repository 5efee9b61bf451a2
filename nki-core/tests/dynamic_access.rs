//! HBM accesses with runtime offsets (`HbmView::vector_offset` / `scalar_offset`, NKI's
//! `tensor.ap(..., vector_offset=, scalar_offset=, indirect_dim=)`): rows gathered by the
//! indices an SBUF tile holds when the DMA runs, the generated NKI spelling, an index outside
//! the tensor as a simulation error, and index tiles of the wrong dtype or shape as trace
//! errors at the call.

use nki_core::NkiError;
use nki_core::codegen::emit_nki;
use nki_core::ir::Program;
use nki_core::lang::{InputSpec, trace};
use nki_core::prelude::*;
use nki_core::sim::{SimOptions, simulate_to_vecs};

const ROWS: usize = 8;
const COLS: usize = 5;
const PICKED: usize = 3;

fn inputs(index: DType) -> Vec<InputSpec> {
    vec![
        InputSpec {
            name: "table".into(),
            shape: vec![ROWS, COLS],
            dtype: DType::F32,
        },
        InputSpec {
            name: "idx".into(),
            shape: vec![PICKED, 1],
            dtype: index,
        },
    ]
}

/// Rows `idx[r]` of `table`, then element `idx[0]` of each picked row's copy in HBM.
fn gather(index: DType, index_rows: usize) -> Result<Program, NkiError> {
    trace("gather", Target::Trn2, &inputs(index), |h| {
        let rows = shared_hbm(&[PICKED, COLS], DType::F32);
        let first = shared_hbm(&[1, 1], DType::F32);
        let idx = sbuf([index_rows, 1], index);
        dma_copy(
            idx.rows(PICKED.min(index_rows)),
            h[1].rows(0usize, PICKED.min(index_rows)),
        );
        let t = sbuf([PICKED, COLS], DType::F32);
        dma_copy(
            &t,
            h[0].rows(0usize, PICKED).vector_offset(&idx, COLS as i64),
        );
        dma_copy(&rows, &t);
        let one = sbuf([1, 1], DType::F32);
        dma_copy(
            &one,
            h[0].rows(0usize, 1)
                .cols(0usize, 1)
                .scalar_offset(idx.rows(1), 1),
        );
        dma_copy(&first, &one);
        vec![rows, first]
    })
}

fn run(p: &Program, idx: &[i32]) -> Result<Vec<Vec<f32>>, NkiError> {
    let table: Vec<f32> = (0..ROWS * COLS).map(|v| v as f32).collect();
    let t: Vec<u8> = table.iter().flat_map(|v| v.to_le_bytes()).collect();
    let i: Vec<u8> = idx.iter().flat_map(|v| v.to_le_bytes()).collect();
    let outs = simulate_to_vecs(p, &[&t, &i], SimOptions::default())?;
    Ok(outs
        .iter()
        .map(|b| {
            b.chunks(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                .collect()
        })
        .collect())
}

#[test]
fn vector_and_scalar_offsets_gather_what_the_indices_name() {
    let p = gather(DType::I32, PICKED).unwrap();
    let outs = run(&p, &[6, 1, 6]).unwrap();
    let want: Vec<f32> = [6, 1, 6]
        .iter()
        .flat_map(|&r| (0..COLS).map(move |c| (r * COLS + c) as f32))
        .collect();
    assert_eq!(outs[0], want);
    assert_eq!(outs[1], vec![6.0]);
    let source = emit_nki(&p);
    assert!(
        source.contains(
            "table.ap(pattern=[[5, 3], [1, 5]], offset=0, vector_offset=t0, indirect_dim=0)"
        ),
        "{source}"
    );
    assert!(
        source.contains("scalar_offset=t0[0:1, 0:1], indirect_dim=1"),
        "{source}"
    );
}

#[test]
fn an_index_outside_the_tensor_fails_the_run() {
    let p = gather(DType::I32, PICKED).unwrap();
    let e = run(&p, &[2, 8, 0]).unwrap_err().to_string();
    assert!(e.contains("out-of-bounds HBM access"), "{e}");
}

#[test]
fn index_tiles_must_be_integer_and_shaped_per_row() {
    let message = |r: Result<Program, NkiError>| match r {
        Err(NkiError::Trace { message, .. }) => message,
        other => panic!("expected a trace error, got {other:?}"),
    };
    let m = message(gather(DType::F32, PICKED));
    assert!(
        m.contains("vector_offset must be an integer tile, got f32"),
        "{m}"
    );
    let m = message(gather(DType::I32, 2));
    assert!(
        m.contains("vector_offset must be a [3, 1] tile region"),
        "{m}"
    );
}

/// Every row of `table`, doubled, copied through a device loop whose index register is the
/// `scalar_offset` of both DMAs (NKI's dynamic-range index as a `VirtualRegister`).
fn doubled_by_register() -> Program {
    let inputs = vec![InputSpec {
        name: "table".into(),
        shape: vec![ROWS, COLS],
        dtype: DType::F32,
    }];
    trace("rows", Target::Trn2, &inputs, |h| {
        let out = shared_hbm(&[ROWS, COLS], DType::F32);
        let t = sbuf([1, COLS], DType::F32);
        dynamic_range(0, ROWS as i32, 1, |i| {
            dma_copy(
                &t,
                h[0].rows(0usize, 1).register_offset(i.id(), COLS as i64),
            );
            tensor_scalar(&t, &t, BinOp::Multiply, 2.0);
            dma_copy(out.rows(0usize, 1).register_offset(i.id(), COLS as i64), &t);
        });
        vec![out]
    })
    .unwrap()
}

#[test]
fn a_register_offset_moves_the_access_each_iteration() {
    let p = doubled_by_register();
    let table: Vec<f32> = (0..ROWS * COLS).map(|v| v as f32).collect();
    let t: Vec<u8> = table.iter().flat_map(|v| v.to_le_bytes()).collect();
    let outs = simulate_to_vecs(&p, &[&t], SimOptions::default()).unwrap();
    let got: Vec<f32> = outs[0]
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(got, table.iter().map(|v| 2.0 * v).collect::<Vec<_>>());
    let source = emit_nki(&p);
    assert!(
        source.contains("table.ap(pattern=[[5, 1], [1, 5]], offset=0, scalar_offset=r"),
        "{source}"
    );
}
