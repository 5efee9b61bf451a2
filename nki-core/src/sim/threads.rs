//! Where the simulator's parallel work runs: on its own thread pool (`sim/pool.rs`, rayon), or on
//! threads the host lends it ([`set_host_threads`]).
//!
//! Inside PyTorch the host is ATen's intra-op pool: the torch ops register `at::parallel_for`
//! (the fast path's C++ library, `torch_nki/csrc/fast_ops.cpp`), so a simulated op splits its
//! work across the threads ATen's own ops use. Those threads are the ones ATen keeps awake
//! between its parallel regions, so a piece of a run starts on them at once; the simulator's
//! own pool would have to wake a thread of its own, and then share a core with ATen's still
//! running one (docs/bench.md, "The host's threads").
//!
//! A large run while no core is free runs [`alone`]: on the calling thread, the host's other
//! threads asleep on a condition variable rather than spin-waiting beside it.
//!
//! Every parallel part of a run goes through [`map`] or [`map_rows_mut`], which keep rayon's
//! results (in index order) on either executor. A host parallel-for called inside another one
//! may run its pieces on the calling thread (ATen does); the simulator's parallel parts nest
//! that way (loops, then rows), and results are the same bits on any number of threads.

use std::any::Any;
use std::ffi::c_void;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, RwLock};

/// Runs one piece of a host parallel-for: `(context, begin, end)`.
pub type HostPiece = unsafe extern "C" fn(*mut c_void, i64, i64);

/// A host's parallel-for: `(n, context, piece)` calls `piece(context, begin, end)` for pieces
/// that cover `0..n` exactly once, possibly at the same time on several threads, and returns
/// after the last has returned.
pub type HostParallelFor = unsafe extern "C" fn(i64, *mut c_void, HostPiece);

/// How many threads a host parallel-for may use at most.
pub type HostThreadCount = unsafe extern "C" fn() -> i64;

/// Threads a host lends the simulator.
#[derive(Clone, Copy, Debug)]
pub struct HostThreads {
    /// Its parallel-for.
    pub parallel_for: HostParallelFor,
    /// Its thread count (bands of a run are shared among this many workers).
    pub threads: HostThreadCount,
}

/// The host's threads, with the id of the process that lent them.
static HOST: RwLock<Option<(u32, HostThreads)>> = RwLock::new(None);

/// Whether [`HOST`] holds a host: every call asks ([`crate::sim::split_min_work`]), so an
/// atomic rather than the lock.
static HOST_SET: AtomicBool = AtomicBool::new(false);

/// Runs the simulator's parallel work on `host`'s threads from now on (`None`: on its own pool
/// again). Which runs are split at all does not change ([`crate::sim::ExecPlan::hand_to_pool`]).
///
/// # Safety
/// `host.parallel_for` must do what [`HostParallelFor`] says: every index of `0..n` in exactly
/// one piece (an index left out is detected and reported as a panic; one given twice is two
/// threads writing the same memory), and not return before its pieces have. Neither function
/// may unwind or throw (the pieces the simulator passes do not).
pub unsafe fn set_host_threads(host: Option<HostThreads>) {
    // Every op's registration lends the same threads: once is enough.
    let same = |a: HostThreads, b: HostThreads| {
        std::ptr::fn_addr_eq(a.parallel_for, b.parallel_for)
            && std::ptr::fn_addr_eq(a.threads, b.threads)
    };
    if let (Some(new), Some(old)) = (host, self::host())
        && same(new, old)
    {
        return;
    }
    *HOST
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = host.map(|h| (std::process::id(), h));
    HOST_SET.store(host.is_some(), Ordering::Release);
    if let Some(host) = host {
        // Each of the host's threads runs a piece now, which records it among the simulator's
        // workers: `sim/cores.rs` must not take one still running after the host's own work
        // (ATen's threads keep running a while between parallel regions) for another
        // process's, or no run would ever be split onto it.
        on_host(host, count(), &|_, _| {});
        // And the first window of other processes' work starts (`sim/cores.rs`).
        crate::sim::cores::a_core_is_free();
    }
}

/// The host's threads, if a host lent some to this process. A process forked from the one that
/// did has none: ATen's OpenMP threads do not survive `fork`, and a parallel region in the child
/// waits for them forever (ATen's own ops hang there too), so the child's runs go to the
/// simulator's own pool, which it rebuilds (`sim/pool.rs`).
pub(crate) fn host() -> Option<HostThreads> {
    if !host_threads_set() {
        return None;
    }
    let host = *HOST
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    host.and_then(|(pid, h)| (pid == std::process::id()).then_some(h))
}

/// Whether a host lent its threads ([`set_host_threads`]; in a forked child too, where they are
/// not used: see [`host`]). One atomic load, for every call's threshold.
pub fn host_threads_set() -> bool {
    HOST_SET.load(Ordering::Acquire)
}

/// How many threads a split run's parallel parts can use: the host's, or the current rayon
/// pool's.
pub(crate) fn count() -> usize {
    match host() {
        Some(h) => threads_of(h),
        None => rayon::current_num_threads(),
    }
}

/// How many threads `host`'s parallel-for may use (at least one).
fn threads_of(host: HostThreads) -> usize {
    // SAFETY: `set_host_threads`' contract.
    usize::try_from(unsafe { (host.threads)() })
        .unwrap_or(1)
        .max(1)
}

/// `f(state, i)` for every `i < n`, in parallel, each thread's calls sharing one `init()`
/// state; the results in index order.
pub(crate) fn map<T: Send, S>(
    n: usize,
    init: impl Fn() -> S + Sync + Send,
    f: impl Fn(&mut S, usize) -> T + Sync + Send,
) -> Vec<T> {
    map_on(host(), n, init, f)
}

/// [`map`] on `host`'s threads, or on rayon's.
fn map_on<T: Send, S>(
    host: Option<HostThreads>,
    n: usize,
    init: impl Fn() -> S + Sync + Send,
    f: impl Fn(&mut S, usize) -> T + Sync + Send,
) -> Vec<T> {
    let Some(host) = host else {
        use rayon::prelude::*;
        return (0..n).into_par_iter().map_init(init, f).collect();
    };
    let slots = Slots::new(n);
    on_host(host, n, &|begin, end| {
        let mut state = init();
        for i in begin..end {
            // SAFETY: each index is in exactly one piece (the host's contract).
            unsafe { slots.put(i, f(&mut state, i)) };
        }
    });
    slots.into_vec()
}

/// `f(state, r, row)` for each `stride`-long row of `rows` (the last may be shorter), in
/// parallel, as [`map`].
pub(crate) fn map_rows_mut<T: Send, S>(
    rows: &mut [f32],
    stride: usize,
    init: impl Fn() -> S + Sync + Send,
    f: impl Fn(&mut S, usize, &mut [f32]) -> T + Sync + Send,
) -> Vec<T> {
    let Some(host) = host() else {
        use rayon::prelude::*;
        return rows
            .par_chunks_mut(stride)
            .enumerate()
            .map_init(init, |s, (r, row)| f(s, r, row))
            .collect();
    };
    let len = rows.len();
    let n = len.div_ceil(stride.max(1));
    let base = SendPtr(rows.as_mut_ptr());
    let slots = Slots::new(n);
    on_host(host, n, &|begin, end| {
        let mut state = init();
        for r in begin..end {
            let start = r * stride;
            // SAFETY: rows `r` of different pieces are disjoint slices of `rows` (each index
            // is in one piece), inside it, and `rows` is borrowed mutably until `on_host`
            // returns.
            let row = unsafe {
                std::slice::from_raw_parts_mut(base.get().add(start), stride.min(len - start))
            };
            // SAFETY: as in `map`.
            unsafe { slots.put(r, f(&mut state, r, row)) };
        }
    });
    slots.into_vec()
}

/// A raw pointer the pieces share (each writes through it only where no other piece does).
struct SendPtr<T>(*mut T);

impl<T> Clone for SendPtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for SendPtr<T> {}

// SAFETY: see the uses: every piece writes its own elements.
unsafe impl<T> Send for SendPtr<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for SendPtr<T> {}

impl<T> SendPtr<T> {
    fn get(self) -> *mut T {
        self.0
    }
}

/// One result slot per index, each written by the piece holding the index.
struct Slots<T> {
    slots: Vec<Option<T>>,
    at: SendPtr<Option<T>>,
}

impl<T> Slots<T> {
    fn new(n: usize) -> Self {
        let mut slots: Vec<Option<T>> = (0..n).map(|_| None).collect();
        let at = SendPtr(slots.as_mut_ptr());
        Slots { slots, at }
    }

    /// # Safety
    /// `i < n`, and no other thread touches slot `i` meanwhile.
    unsafe fn put(&self, i: usize, value: T) {
        assert!(i < self.slots.len(), "host piece index {i} out of range");
        // SAFETY: in range; the caller's exclusivity.
        unsafe { *self.at.get().add(i) = Some(value) };
    }

    /// The results; a slot no piece filled is a host that broke its contract.
    fn into_vec(self) -> Vec<T> {
        let n = self.slots.len();
        self.slots
            .into_iter()
            .enumerate()
            .map(|(i, v)| {
                v.unwrap_or_else(|| panic!("the host's parallel-for skipped index {i} of {n}"))
            })
            .collect()
    }
}

// SAFETY: the slots are written only through `put`'s contract.
unsafe impl<T: Send> Sync for Slots<T> {}

/// Runs `job` on one of the host's threads while its others sleep until it is done, and
/// returns its result; without a host (or with one thread) on the calling thread.
///
/// For a run large enough to split when no core is free for a second thread
/// ([`crate::sim::Placement::Alone`]). ATen's OpenMP threads spin-wait for several
/// milliseconds after each parallel region (about 8.5 ms here, measured: docs/bench.md); with
/// the machine's other cores busy, one of them spinning on the core the run is on takes half of
/// it. Handed a piece of a host parallel-for that waits on a condition variable, each sleeps in
/// the kernel instead. The calling thread's piece takes the job (ATen's parallel-for runs a
/// piece on the calling thread); another thread's piece waits for it to finish, and takes the
/// job itself if no piece has within [`ALONE_CALLER_WAIT`] (a host that runs no piece on the
/// calling thread). The bits are the same whichever thread runs it: the run is serial. A piece
/// that starts after the job was taken on its own thread returns at once, so a host that runs
/// pieces one after another on one thread cannot deadlock. A panic in the job reaches the
/// caller after every piece returned.
///
/// The job should run on the calling thread: measured with one busy process on the 2-core
/// machine, a llama-512 forward whose runs went to whichever piece started first took 337–382
/// ms a step against 200–214 ms on the calling thread alone (the other thread often shares a
/// core with the busy process).
pub(crate) fn alone<T: Send>(job: impl FnOnce() -> T + Send) -> T {
    alone_on(host(), job)
}

/// [`alone`] on `host`'s threads.
fn alone_on<T: Send>(host: Option<HostThreads>, job: impl FnOnce() -> T + Send) -> T {
    let Some((host, threads)) = host
        .map(|h| (h, threads_of(h)))
        .filter(|&(_, threads)| threads > 1)
    else {
        return job();
    };
    let caller = std::thread::current().id();
    /// Whether the job has finished (or unwound), with the pieces waiting for it.
    struct Done {
        finished: Mutex<bool>,
        changed: Condvar,
    }
    /// Marks the job finished when dropped, normally or while a panic unwinds.
    struct Finish<'d>(&'d Done);
    impl Drop for Finish<'_> {
        fn drop(&mut self) {
            *self
                .0
                .finished
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = true;
            self.0.changed.notify_all();
        }
    }
    let job = Mutex::new(Some(job));
    let result = Mutex::new(None);
    let done = Done {
        finished: Mutex::new(false),
        changed: Condvar::new(),
    };
    // Takes the job if nobody has, and runs it: whether this call did.
    let run = || {
        let taken = job
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        let Some(job) = taken else { return false };
        let _finish = Finish(&done);
        let value = job();
        *result
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(value);
        true
    };
    on_host(host, threads, &|_, _| {
        if std::thread::current().id() == caller {
            run();
            return;
        }
        let since = std::time::Instant::now();
        let mut finished = done
            .finished
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        while !*finished {
            let left = ALONE_CALLER_WAIT.saturating_sub(since.elapsed());
            if left.is_zero() {
                drop(finished);
                if run() {
                    return;
                }
                // The caller has it: wait for the end without a deadline.
                finished = done
                    .finished
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                while !*finished {
                    finished = done
                        .changed
                        .wait(finished)
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                }
                return;
            }
            finished = done
                .changed
                .wait_timeout(finished, left)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
    });
    result
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .expect("a host piece ran the job (the host's contract: every index is in a piece)")
}

/// How long [`alone`]'s pieces on other threads leave the job to the calling thread's piece
/// before one takes it.
const ALONE_CALLER_WAIT: std::time::Duration = std::time::Duration::from_millis(2);

/// Calls `piece(begin, end)` over `0..n` on the host's threads. A panic in a piece is caught
/// there (it must not unwind into the host) and resumed here once every piece has returned.
fn on_host(host: HostThreads, n: usize, piece: &(dyn Fn(usize, usize) + Sync)) {
    struct Context<'p> {
        piece: &'p (dyn Fn(usize, usize) + Sync),
        panic: Mutex<Option<Box<dyn Any + Send>>>,
        caller: std::thread::ThreadId,
    }
    unsafe extern "C" fn run_piece(context: *mut c_void, begin: i64, end: i64) {
        // SAFETY: `context` is the `Context` below, alive until the parallel-for returns.
        let context = unsafe { &*(context as *const Context<'_>) };
        // The host's other threads are the simulator's workers (`sim/cores.rs` does not count
        // them as another process's work); the calling thread, which runs a piece too, is not.
        if std::thread::current().id() != context.caller {
            crate::sim::pool::record_worker_thread();
        }
        let (begin, end) = (begin.max(0) as usize, end.max(0) as usize);
        if let Err(payload) = catch_unwind(AssertUnwindSafe(|| (context.piece)(begin, end))) {
            let mut first = context
                .panic
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            first.get_or_insert(payload);
        }
    }
    if n == 0 {
        return;
    }
    let context = Context {
        piece,
        panic: Mutex::new(None),
        caller: std::thread::current().id(),
    };
    let n = i64::try_from(n).expect("a run's piece count fits i64");
    // SAFETY: `set_host_threads`' contract; `run_piece` does not unwind.
    unsafe { (host.parallel_for)(n, &context as *const Context<'_> as *mut c_void, run_piece) };
    let panic = context
        .panic
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(payload) = panic {
        resume_unwind(payload);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    static PIECES: AtomicUsize = AtomicUsize::new(0);

    /// A host that cuts `0..n` at a fifth and a half, each piece on a thread of its own.
    unsafe extern "C" fn uneven(n: i64, context: *mut c_void, piece: HostPiece) {
        let (n, context) = (n as usize, context as usize);
        std::thread::scope(|s| {
            for cut in [[0, n / 5], [n / 5, n / 2], [n / 2, n]] {
                if cut[0] < cut[1] {
                    PIECES.fetch_add(1, Ordering::Relaxed);
                    // SAFETY: the simulator's piece, called as its contract says.
                    s.spawn(move || unsafe {
                        piece(context as *mut c_void, cut[0] as i64, cut[1] as i64)
                    });
                }
            }
        });
    }

    unsafe extern "C" fn three() -> i64 {
        3
    }

    /// A host that runs nothing at all.
    unsafe extern "C" fn idle(_: i64, _: *mut c_void, _: HostPiece) {}

    /// A panic's message.
    fn text(payload: Box<dyn Any + Send>) -> String {
        match payload.downcast::<String>() {
            Ok(s) => *s,
            Err(payload) => payload
                .downcast_ref::<&str>()
                .copied()
                .unwrap_or_default()
                .into(),
        }
    }

    const UNEVEN: HostThreads = HostThreads {
        parallel_for: uneven,
        threads: three,
    };

    #[test]
    fn host_pieces_give_every_result_in_index_order() {
        let before = PIECES.load(Ordering::Relaxed);
        let got = map_on(Some(UNEVEN), 11, Vec::<usize>::new, |seen, i| {
            seen.push(i);
            (i * i, seen.len())
        });
        assert_eq!(
            got.iter().map(|r| r.0).collect::<Vec<_>>(),
            (0..11).map(|i| i * i).collect::<Vec<_>>()
        );
        // One state per piece: the third index of a piece has seen three.
        assert_eq!(got[2].1, 1, "index 2 starts the second piece (11 / 5)");
        assert_eq!(got[7].1, 3, "index 7 is the third of the piece from 5");
        assert_eq!(PIECES.load(Ordering::Relaxed) - before, 3);
        assert!(map_on(Some(UNEVEN), 0, || (), |_, i| i).is_empty());
    }

    #[test]
    fn a_panicking_piece_reaches_the_caller_after_every_piece_returned() {
        let done = AtomicUsize::new(0);
        let caught = std::panic::catch_unwind(AssertUnwindSafe(|| {
            map_on(
                Some(UNEVEN),
                10,
                || (),
                |_, i| {
                    done.fetch_add(1, Ordering::Relaxed);
                    assert!(i != 7, "piece failure at 7");
                },
            )
        }));
        let message = text(caught.expect_err("the panic is resumed"));
        assert!(message.contains("piece failure at 7"), "{message}");
        // The piece holding 7 stopped there; the others ran to their ends.
        assert_eq!(done.load(Ordering::Relaxed), 8);
    }

    /// A host that runs the first piece on the calling thread and the others on threads of
    /// their own, as ATen's parallel-for does.
    unsafe extern "C" fn with_caller(n: i64, context: *mut c_void, piece: HostPiece) {
        let context = context as usize;
        std::thread::scope(|s| {
            for i in 1..n {
                // SAFETY: the simulator's piece, called as its contract says.
                s.spawn(move || unsafe { piece(context as *mut c_void, i, i + 1) });
            }
            // SAFETY: as above.
            unsafe { piece(context as *mut c_void, 0, 1.min(n)) };
        });
    }

    /// A host that runs every piece on the calling thread, one after another, last first.
    unsafe extern "C" fn one_by_one(n: i64, context: *mut c_void, piece: HostPiece) {
        for i in (0..n).rev() {
            // SAFETY: the simulator's piece, called as its contract says.
            unsafe { piece(context, i, i + 1) };
        }
    }

    #[test]
    fn alone_runs_the_job_once_on_the_calling_thread_while_the_others_wait() {
        let host = HostThreads {
            parallel_for: with_caller,
            threads: three,
        };
        let runs = AtomicUsize::new(0);
        let caller = std::thread::current().id();
        let started = std::time::Instant::now();
        let on = alone_on(Some(host), || {
            runs.fetch_add(1, Ordering::Relaxed);
            // Longer than the others' deadline: they must not take it meanwhile.
            std::thread::sleep(ALONE_CALLER_WAIT * 3);
            std::thread::current().id()
        });
        assert_eq!(on, caller);
        assert_eq!(runs.load(Ordering::Relaxed), 1);
        assert!(started.elapsed() >= ALONE_CALLER_WAIT * 3);
    }

    #[test]
    fn alone_without_a_piece_on_the_calling_thread_runs_the_job_elsewhere_once() {
        let runs = AtomicUsize::new(0);
        let value = alone_on(Some(UNEVEN), || {
            runs.fetch_add(1, Ordering::Relaxed);
            std::thread::current().id()
        });
        assert_ne!(value, std::thread::current().id());
        assert_eq!(runs.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn alone_on_one_thread_or_no_host_runs_the_job_here() {
        let host = HostThreads {
            parallel_for: one_by_one,
            threads: three,
        };
        let here = std::thread::current().id();
        assert_eq!(alone_on(Some(host), || std::thread::current().id()), here);
        assert_eq!(alone_on(None, || std::thread::current().id()), here);
    }

    #[test]
    fn a_panicking_job_alone_reaches_the_caller_and_releases_the_waiters() {
        let host = HostThreads {
            parallel_for: with_caller,
            threads: three,
        };
        let caught = std::panic::catch_unwind(|| alone_on(Some(host), || panic!("job failure")));
        assert!(text(caught.expect_err("the panic is resumed")).contains("job failure"));
    }

    #[test]
    fn a_host_that_skips_indices_is_reported() {
        let host = HostThreads {
            parallel_for: idle,
            threads: three,
        };
        let caught = std::panic::catch_unwind(|| map_on(Some(host), 4, || (), |_, i| i));
        let message = text(caught.expect_err("a skipped index panics"));
        assert!(message.contains("skipped index 0 of 4"), "{message}");
    }
}
