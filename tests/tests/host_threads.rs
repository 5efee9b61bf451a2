//! The simulator on threads a host lends it (`nki_core::sim::threads::set_host_threads`, which
//! the torch ops use for ATen's intra-op pool) against one thread, for every registry kernel
//! (and the backward each implies) at every sample and dtype: the same bits, with the default
//! bands and with bands of three partitions (so band workers meet on the host's threads too).
//! Its own test binary: the host is process-wide.

use nki_core::sim::threads::{HostPiece, HostThreads, set_host_threads};
use nki_core::sim::{BandPolicy, SimOptions, simulate_to_vecs};
use nki_kernels as _;
use nki_tests::{Samples, prng, sample_signatures};
use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};

static PIECES: AtomicUsize = AtomicUsize::new(0);

/// Cuts `0..n` at a third and at two thirds plus one, each piece on a thread of its own.
unsafe extern "C" fn three_pieces(n: i64, context: *mut c_void, piece: HostPiece) {
    let (n, context) = (n as usize, context as usize);
    let (a, b) = (n / 3, (2 * n / 3 + 1).min(n));
    std::thread::scope(|s| {
        for [begin, end] in [[0, a], [a, b], [b, n]] {
            if begin < end {
                PIECES.fetch_add(1, Ordering::Relaxed);
                // SAFETY: the simulator's piece, called as its contract says.
                s.spawn(move || unsafe { piece(context as *mut c_void, begin as i64, end as i64) });
            }
        }
    });
}

unsafe extern "C" fn three() -> i64 {
    3
}

#[test]
fn runs_on_a_host_s_threads_give_the_bits_of_one_thread() {
    let mut compared = 0;
    for (def, sig) in sample_signatures(Samples::Every) {
        let compiled =
            nki_core::compile(def, &sig).unwrap_or_else(|e| panic!("{} at {sig:?}: {e}", def.name));
        let program = compiled.program();
        let inputs: Vec<Vec<u8>> = program
            .inputs()
            .enumerate()
            .map(|(i, (_, d))| prng::encode(&prng::input_values(i as u64 + 1, d), d.dtype))
            .collect();
        let inputs: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
        let run = |parallel: bool, bands: BandPolicy| {
            let opts = SimOptions {
                parallel,
                bands,
                ..SimOptions::default()
            };
            simulate_to_vecs(program, &inputs, opts)
                .unwrap_or_else(|e| panic!("{} at {sig:?}: {e}", def.name))
        };
        // SAFETY: `three_pieces` covers `0..n` once and returns after its pieces.
        unsafe { set_host_threads(None) };
        let one = run(false, BandPolicy::default());
        unsafe {
            set_host_threads(Some(HostThreads {
                parallel_for: three_pieces,
                threads: three,
            }))
        };
        for bands in [BandPolicy::default(), BandPolicy::everywhere(3)] {
            assert!(
                run(true, bands) == one,
                "{} at {sig:?}: {bands:?} on the host's threads changes the outputs",
                def.name
            );
        }
        compared += 1;
    }
    unsafe { set_host_threads(None) };
    assert!(compared > 50, "only {compared} signatures");
    assert!(
        PIECES.load(Ordering::Relaxed) > 1000,
        "the host ran few pieces"
    );
}

/// Launch-grid instances run together on a host's threads only when they share the work nearly
/// evenly: `add` of 130 narrow rows gives its second instance the 2 rows left after 128, of 130
/// wide rows half of every row's columns to each, and `linear` splits its output into equal
/// halves.
#[test]
fn only_balanced_instances_run_together_on_a_host_s_threads_and_small_gemms_stay_whole() {
    use nki_core::Signature;
    use nki_core::kernel_def::TensorSig;
    use nki_core::kernel_def::registered_kernels;
    use nki_core::prelude::{DType, Target};
    use nki_core::sim::HOST_SPLIT_MIN_WORK;
    let plan_of = |name: &str, shapes: &[&[u64]]| {
        let def = registered_kernels()
            .find(|d| d.name == name)
            .unwrap_or_else(|| panic!("{name} is registered"));
        let sig = Signature {
            tensors: shapes
                .iter()
                .map(|s| {
                    Some(TensorSig {
                        shape: s.to_vec(),
                        dtype: DType::F32,
                    })
                })
                .collect(),
            scalars: Vec::new(),
            target: Target::Trn2,
        };
        let compiled = nki_core::compile(def, &sig).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(compiled.program().program_count(), 2, "{name}");
        let plan = compiled.plan();
        (plan.instances_balanced(), plan.work(), plan.host_work())
    };
    assert!(!plan_of("add", &[&[130, 1000], &[130, 1000]]).0);
    assert!(plan_of("add", &[&[130, 4100], &[130, 4100]]).0);
    assert!(plan_of("linear", &[&[256, 512], &[1024, 512], &[1024]]).0);
    // On a host's threads a multiply-add weighs an eighth of an element: a llama-tiny MLP
    // linear (1.3 M multiply-adds) stays under the threshold, an elementwise run is unchanged.
    let (_, work, host_work) = plan_of("linear", &[&[2, 64, 64], &[160, 64], &[160]]);
    assert!(
        host_work < HOST_SPLIT_MIN_WORK && HOST_SPLIT_MIN_WORK <= work,
        "{host_work} {work}"
    );
    let (_, work, host_work) = plan_of("add", &[&[130, 4100], &[130, 4100]]);
    assert_eq!(host_work, work);
}
