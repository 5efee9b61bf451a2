//! The cost model against hand-computed expectations: single instructions, a dependency chain,
//! DMA/compute overlap, a pipelining loop; monotonicity; and the Chrome trace format.
//!
//! Numbers (Trn2 table): a DMA over P partitions spans ⌈P / 8⌉ of the 16 DMA engines, each busy
//! max(800 ns, its bytes / 23 B/ns) + 52 ns, and its data is visible 1200 ns (the completion
//! latency) after that; vector op = max(64, inputs × ⌈N / lanes⌉) cycles at 0.96 GHz with 2
//! lanes-elements per cycle for fp32, plus 100 cycles when it reads what the previous vector
//! instruction wrote; matmul = max(N, 64) cycles (× 4 for fp32) at 2.4 GHz, plus ⌈M / 4⌉
//! cycles of LoadStationary when nothing hides it.

use nki_core::cost::{Engine, Resource, estimate};
use nki_core::ir::Program;
use nki_core::lang::{InputSpec, trace};
use nki_core::prelude::*;

fn program(
    target: Target,
    inputs: &[(&str, &[usize], DType)],
    body: impl FnOnce(&[Hbm]) -> Vec<Hbm>,
) -> Program {
    let inputs: Vec<InputSpec> = inputs
        .iter()
        .map(|(n, s, d)| InputSpec {
            name: n.to_string(),
            shape: s.to_vec(),
            dtype: *d,
        })
        .collect();
    trace("k", target, &inputs, body).unwrap()
}

/// `tiles` row tiles of `[128, 512]` f32, each loaded, transformed in place by `compute` and
/// stored; tiles are fresh per iteration of an affine loop.
fn row_pipeline(tiles: usize, compute: impl Fn(&Tile)) -> Program {
    program(
        Target::Trn2,
        &[("x", &[tiles * 128, 512], DType::F32)],
        |h| {
            let out = shared_hbm(&[tiles * 128, 512], DType::F32);
            affine_range(tiles, |i| {
                let t = sbuf([128, 512], DType::F32);
                dma_copy(&t, h[0].rows(i.clone() * 128usize, 128));
                compute(&t);
                dma_copy(out.rows(i * 128usize, 128), &t);
            });
            vec![out]
        },
    )
}

fn close(a: f64, b: f64) {
    assert!((a - b).abs() < 1e-6 * b.abs().max(1.0), "{a} vs {b}");
}

const DMA_LATENCY: f64 = 1200.0;
const ENGINE: f64 = 23.0;

/// One DMA engine's time for `bytes` of a transfer.
fn engine_ns(bytes: f64) -> f64 {
    (bytes / ENGINE).max(800.0) + 52.0
}

/// A `[128, 512]` f32 transfer: 16 engines of 8 rows × 2 KiB.
fn tile_ns() -> f64 {
    engine_ns(8.0 * 2048.0)
}

/// Load a `[128, 512]` f32 tile and store it back: two dependent DMAs.
fn copy(target: Target) -> Program {
    program(target, &[("x", &[128, 512], DType::F32)], |h| {
        let out = shared_hbm(&[128, 512], DType::F32);
        let t = sbuf([128, 512], DType::F32);
        dma_copy(&t, &h[0]);
        dma_copy(&out, &t);
        vec![out]
    })
}

#[test]
fn one_dma_spans_sixteen_engines_then_its_latency() {
    let r = estimate(&copy(Target::Trn2));
    let stream = tile_ns();
    let one = stream + DMA_LATENCY;
    assert_eq!(r.slices.len(), 2);
    close(r.slices[0].end_ns, stream); // the queue is busy while it streams
    close(r.slices[0].done_ns, one); // the data lands a latency later
    close(r.slices[1].start_ns, one); // the store waits for the loaded data
    close(r.total_ns, 2.0 * one);
    // 128 partitions: all 16 engines, free again when the store's data is ready.
    assert_eq!(
        (r.slices[0].engine, r.slices[1].engine),
        (Engine::Dma(0), Engine::Dma(0))
    );
    assert_eq!(r.slices[0].tracks().len(), 16);
    assert_eq!(r.engines.len(), 16);
    close(r.hbm_read_bytes, 128.0 * 2048.0);
    close(r.hbm_write_bytes, 128.0 * 2048.0);
    assert_eq!(r.bound, Resource::Dma);
    // 512 KiB at 16 × 23 B/ns over the estimated time.
    close(
        r.roofline_fraction,
        (2.0 * 128.0 * 2048.0 / (16.0 * ENGINE)) / (2.0 * one),
    );
    assert_eq!(r.critical_path.len(), 2);
}

#[test]
fn a_small_transfer_costs_the_latency_bound_minimum() {
    let p = program(Target::Trn2, &[("x", &[128, 8], DType::F32)], |h| {
        let out = shared_hbm(&[128, 8], DType::F32);
        let t = sbuf([128, 8], DType::F32);
        dma_copy(&t, &h[0]);
        dma_copy(&out, &t);
        vec![out]
    });
    let r = estimate(&p);
    // 8 rows of 32 B per engine: latency-bound.
    close(r.slices[0].end_ns, 852.0);
    // Four partitions: one engine.
    let p = program(Target::Trn2, &[("x", &[4, 4096], DType::BF16)], |h| {
        let out = shared_hbm(&[4, 4096], DType::BF16);
        let t = sbuf([4, 4096], DType::BF16);
        dma_copy(&t, &h[0]);
        dma_copy(&out, &t);
        vec![out]
    });
    let r = estimate(&p);
    assert_eq!(r.slices[0].tracks(), vec![Engine::Dma(0)]);
    close(r.slices[0].end_ns, engine_ns(32768.0));
}

#[test]
fn one_matmul_is_max_of_n_and_64_cycles_and_fp32_is_four_times_slower() {
    for (dtype, factor) in [(DType::BF16, 1.0), (DType::F32, 4.0)] {
        let p = program(
            Target::Trn2,
            &[("a", &[128, 128], dtype), ("b", &[128, 512], dtype)],
            |h| {
                let out = shared_hbm(&[128, 512], DType::F32);
                let (s, m) = (sbuf([128, 128], dtype), sbuf([128, 512], dtype));
                dma_copy(&s, &h[0]);
                dma_copy(&m, &h[1]);
                let acc = psum([128, 512], DType::F32);
                nc_matmul(&acc, &s, &m, false);
                let res = sbuf([128, 512], DType::F32);
                tensor_copy(&res, &acc);
                dma_copy(&out, &res);
                vec![out]
            },
        );
        let r = estimate(&p);
        let mm = r.slices.iter().find(|s| s.name == "nc_matmul").unwrap();
        // Nothing runs before it on the tensor engine: its LoadStationary (128 / 4 cycles) shows.
        close(mm.end_ns - mm.start_ns, (512.0 + 32.0) * factor / 2.4);
        close(r.flops, 2.0 * 128.0 * 128.0 * 512.0);
        // The matmul waits for both loads.
        let loads_end = r.slices[0].done_ns.max(r.slices[1].done_ns);
        close(mm.start_ns, loads_end);
    }
}

#[test]
fn a_dependency_chain_runs_back_to_back_and_the_vector_op_costs_its_cycles() {
    let p = program(Target::Trn2, &[("x", &[128, 512], DType::F32)], |h| {
        let out = shared_hbm(&[128, 512], DType::F32);
        let t = sbuf([128, 512], DType::F32);
        dma_copy(&t, &h[0]);
        tensor_scalar(&t, &t, BinOp::Add, 1.0);
        tensor_tensor(&t, &t, &t, BinOp::Multiply);
        dma_copy(&out, &t);
        vec![out]
    });
    let r = estimate(&p);
    let v: Vec<_> = r
        .slices
        .iter()
        .filter(|s| s.engine == Engine::Vector)
        .collect();
    close(v[0].end_ns - v[0].start_ns, 256.0 / 0.96);
    // Reads what the previous vector instruction wrote: the static overhead.
    close(v[1].end_ns - v[1].start_ns, (100.0 + 2.0 * 256.0) / 0.96);
    for w in r.slices.windows(2) {
        close(w[1].start_ns, w[0].done_ns);
    }
    assert_eq!(r.critical_path.len(), 4);
}

#[test]
fn the_vector_engine_streams_at_the_16_bit_rate_only_when_every_operand_is_16_bit() {
    // bf16 · bf16 → bf16 takes 4 elements per lane-cycle; an fp32 output or an fp32 input
    // (whichever side) drops the instruction to the 2-element rate.
    let cases = [
        (DType::BF16, DType::BF16, DType::BF16, 4.0),
        (DType::BF16, DType::BF16, DType::F32, 2.0),
        (DType::BF16, DType::F32, DType::BF16, 2.0),
        (DType::F32, DType::BF16, DType::BF16, 2.0),
    ];
    for (a_dt, b_dt, out_dt, lanes) in cases {
        let p = program(
            Target::Trn2,
            &[("a", &[128, 512], a_dt), ("b", &[128, 512], b_dt)],
            |h| {
                let out = shared_hbm(&[128, 512], out_dt);
                let (a, b) = (sbuf([128, 512], a_dt), sbuf([128, 512], b_dt));
                dma_copy(&a, &h[0]);
                dma_copy(&b, &h[1]);
                let c = sbuf([128, 512], out_dt);
                tensor_tensor(&c, &a, &b, BinOp::Multiply);
                let d = sbuf([128, 512], out_dt);
                tensor_scalar(&d, &c, BinOp::Multiply, 2.0);
                dma_copy(&out, &d);
                vec![out]
            },
        );
        let r = estimate(&p);
        let v: Vec<_> = r
            .slices
            .iter()
            .filter(|s| s.engine == Engine::Vector)
            .collect();
        let case = format!("{a_dt:?} · {b_dt:?} -> {out_dt:?}");
        let per_input = 512.0 / lanes;
        assert!(
            (v[0].end_ns - v[0].start_ns - 2.0 * per_input / 0.96).abs() < 1e-6,
            "{case}: tensor_tensor"
        );
        // The tensor_scalar reads and writes `out_dt` only, and depends on the tensor_tensor.
        let one = if out_dt == DType::BF16 { 128.0 } else { 256.0 };
        assert!(
            (v[1].end_ns - v[1].start_ns - (100.0 + one) / 0.96).abs() < 1e-6,
            "{case}: tensor_scalar"
        );
    }
}

#[test]
fn independent_tiles_overlap_dma_with_compute_and_a_loop_pipelines() {
    // Four 128-row tiles: load, scale, store. Fresh tiles per iteration, DMAs on their own queues.
    let p = row_pipeline(4, |t| {
        tensor_scalar(t, t, BinOp::Multiply, 2.0);
    });
    let r = estimate(&p);
    let dma = DMA_LATENCY + tile_ns();
    let vector = 256.0 / 0.96;
    let serial = 4.0 * (2.0 * dma + vector);
    // Every transfer spans the 16 engines, so the eight run one after the other there; the
    // latencies and the scales overlap with later transfers.
    let floor = 8.0 * tile_ns() + DMA_LATENCY;
    assert!(r.total_ns >= floor - 1e-6, "{} vs {floor}", r.total_ns);
    assert!(r.total_ns < floor + dma, "{} vs {floor}", r.total_ns);
    assert!(
        r.total_ns < 0.6 * serial,
        "{} vs serial {serial}",
        r.total_ns
    );
    assert!(r.utilisation(Engine::Vector) > 0.0);
}

#[test]
fn more_bytes_are_never_cheaper_and_trn3_is_never_slower_than_trn2() {
    let rows = |n: usize, target: Target| {
        let p = program(target, &[("x", &[n, 512], DType::BF16)], |h| {
            let out = shared_hbm(&[n, 512], DType::BF16);
            for_each_tile(n, PMAX, |r| {
                let t = sbuf([r.size, 512], DType::BF16);
                dma_copy(&t, h[0].rows(r.start.clone(), r.size));
                activation(&t, ActFn::Exp, &t, None, 1.0);
                dma_copy(out.rows(r.start, r.size), &t);
            });
            vec![out]
        });
        estimate(&p).total_ns
    };
    let mut last = 0.0;
    for n in [1, 64, 128, 200, 256, 1000, 4096] {
        let t = rows(n, Target::Trn2);
        assert!(t >= last, "{n} rows: {t} < {last}");
        last = t;
        assert!(rows(n, Target::Trn3) <= t, "{n} rows slower on trn3");
    }
}

#[test]
fn the_chrome_trace_has_the_required_fields_and_no_overlap_within_a_track() {
    let p = row_pipeline(4, |t| activation(t, ActFn::Exp, t, None, 1.0));
    let r = estimate(&p);
    let doc: serde_json::Value = serde_json::from_str(&r.chrome_trace()).unwrap();
    let events = doc["traceEvents"].as_array().unwrap();
    let mut by_track: std::collections::BTreeMap<u64, Vec<(f64, f64)>> = Default::default();
    let mut names = 0;
    for e in events {
        let ph = e["ph"].as_str().unwrap();
        assert!(
            e["pid"].is_u64() && e["tid"].is_u64() && e["name"].is_string(),
            "{e}"
        );
        match ph {
            "M" => names += 1,
            "X" => {
                let (ts, dur) = (e["ts"].as_f64().unwrap(), e["dur"].as_f64().unwrap());
                assert!(ts >= 0.0 && dur > 0.0, "{e}");
                assert!(
                    e["args"]["loc"]
                        .as_str()
                        .unwrap()
                        .contains("tests/cost.rs:"),
                    "{e}"
                );
                by_track
                    .entry(e["tid"].as_u64().unwrap())
                    .or_default()
                    .push((ts, ts + dur));
            }
            other => panic!("unexpected phase {other}"),
        }
    }
    assert!(names > by_track.len(), "every track is named");
    for spans in by_track.values_mut() {
        spans.sort_by(|a, b| a.0.total_cmp(&b.0));
        for w in spans.windows(2) {
            assert!(w[1].0 >= w[0].1 - 1e-9, "overlap {w:?}");
        }
    }
    // Four iterations of a load, an activation and a store, one event each; a transfer names
    // the DMA engines it spans.
    assert_eq!(by_track.values().map(Vec::len).sum::<usize>(), 12);
    assert!(events.iter().any(|e| e["args"]["dma_engines"] == 16));
}

#[test]
fn a_store_waiting_for_its_data_does_not_hold_up_later_loads() {
    // 32 tiles over the 16 engines: the stores of early tiles wait for compute; loads of later
    // tiles fill the gaps before them instead of queueing behind them.
    let p = row_pipeline(32, |t| {
        tensor_scalar(t, t, BinOp::Multiply, 2.0);
    });
    let r = estimate(&p);
    // 64 transfers, each on all 16 engines, then a latency.
    let floor = 64.0 * tile_ns() + DMA_LATENCY;
    assert!(r.total_ns >= floor);
    assert!(r.total_ns < 1.5 * floor, "{} vs {floor}", r.total_ns);
    for q in 0..16u8 {
        let mut spans: Vec<(f64, f64)> = r
            .slices
            .iter()
            .filter(|s| s.tracks().contains(&Engine::Dma(q)))
            .map(|s| (s.start_ns, s.end_ns))
            .collect();
        spans.sort_by(|a, b| a.0.total_cmp(&b.0));
        for w in spans.windows(2) {
            assert!(w[1].0 >= w[0].1 - 1e-6, "queue {q} overlaps: {w:?}");
        }
    }
}

#[test]
fn the_critical_path_is_charged_to_the_constants_that_set_it() {
    let charged = |cols: usize| {
        let p = program(Target::Trn2, &[("x", &[128, cols], DType::F32)], |h| {
            let out = shared_hbm(&[128, cols], DType::F32);
            let t = sbuf([128, cols], DType::F32);
            dma_copy(&t, &h[0]);
            dma_copy(&out, &t);
            vec![out]
        });
        let r = estimate(&p);
        (r.critical_path_by_constant(), r.total_ns)
    };
    let get = |by: &[(&str, f64)], name: &str| {
        by.iter()
            .find(|(n, _)| *n == name)
            .map_or(0.0, |(_, ns)| *ns)
    };
    // 2 KiB per partition: below the curve's knee, so both transfers are latency-bound; the path
    // is load, its completion latency, store, its completion latency.
    let (by, total) = charged(512);
    close(get(&by, "dma_min_transfer_ns"), 2.0 * tile_ns());
    close(get(&by, "dma_latency_ns"), 2.0 * DMA_LATENCY);
    assert_eq!(by[0].0, "dma_latency_ns");
    // Every nanosecond of this chain is charged.
    close(by.iter().map(|(_, ns)| ns).sum::<f64>(), total);
    // 8 KiB per partition streams at the engines' rate.
    let (by, _) = charged(2048);
    close(
        get(&by, "dma_engine_bytes_per_ns"),
        2.0 * engine_ns(8.0 * 8192.0),
    );
    assert_eq!(by[0].0, "dma_engine_bytes_per_ns");
}
