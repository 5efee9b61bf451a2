//! The simulator's thread pool, per process.
//!
//! Threads do not survive `fork`: a child process inherits a pool whose worker threads do not
//! exist, and the first parallel loop there would wait for them forever (rayon's global pool
//! has exactly this problem). The pool is therefore owned here and tagged with the id of the
//! process that built it; a forked child sees a different id and builds its own. If a pool
//! cannot be built, or the pool slot is being replaced by another thread at that moment, the
//! caller runs serially (same results: parallel and serial runs are bit-identical).

use rayon::{ThreadPool, ThreadPoolBuilder};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

/// `(process id, pool)`.
static POOL: RwLock<Option<(u32, Arc<ThreadPool>)>> = RwLock::new(None);

/// How many of the simulator's worker threads (the current pool's, and the host's that ran a
/// piece: [`record_worker_thread`]) [`crate::sim::cores`] can recognise (the first ones to
/// start; others are not discounted there).
const RECORDED_THREADS: usize = 64;

/// The kernel's thread ids of the current pool's threads (Linux; each thread writes its own
/// slot as it starts; 0: empty), for [`crate::sim::cores`]: a thread of the pool that has just
/// finished a job keeps running for a while before it sleeps, and is not another process's
/// work. Atomics rather than a lock, so that a process forked while a pool thread was writing
/// cannot inherit a held lock.
static POOL_THREADS: [AtomicU32; RECORDED_THREADS] =
    [const { AtomicU32::new(0) }; RECORDED_THREADS];

/// Slots of [`POOL_THREADS`] claimed since the current pool was built.
static POOL_THREADS_STARTED: AtomicUsize = AtomicUsize::new(0);

/// The thread ids [`POOL_THREADS`] holds.
pub(crate) fn thread_ids() -> Vec<u32> {
    let started = POOL_THREADS_STARTED
        .load(Ordering::Acquire)
        .min(RECORDED_THREADS);
    POOL_THREADS[..started]
        .iter()
        .map(|slot| slot.load(Ordering::Relaxed))
        .filter(|&id| id != 0)
        .collect()
}

/// Bumped whenever [`POOL_THREADS`] is cleared, so host threads record themselves again.
static GENERATION: AtomicU32 = AtomicU32::new(0);

thread_local! {
    /// `(process id, generation)` when this thread last recorded itself.
    static RECORDED: std::cell::Cell<(u32, u32)> = const { std::cell::Cell::new((0, u32::MAX)) };
}

/// Records the calling thread among the simulator's workers, once per [`GENERATION`]: a host
/// thread running a piece of a run ([`crate::sim::threads`]) is one, as much as a pool thread.
pub(crate) fn record_worker_thread() {
    let key = (std::process::id(), GENERATION.load(Ordering::Acquire));
    RECORDED.with(|recorded| {
        if recorded.get() != key {
            recorded.set(key);
            record_pool_thread();
        }
    });
}

/// Records the calling pool thread's id in the next free slot.
fn record_pool_thread() {
    let slot = POOL_THREADS_STARTED.fetch_add(1, Ordering::AcqRel);
    if let (Some(slot), Some(id)) = (POOL_THREADS.get(slot), own_thread_id()) {
        slot.store(id, Ordering::Relaxed);
    }
}

/// The calling thread's kernel thread id, from `/proc/thread-self` (Linux).
fn own_thread_id() -> Option<u32> {
    let link = std::fs::read_link("/proc/thread-self").ok()?;
    link.file_name()?.to_str()?.parse().ok()
}

/// The pool of the current process, built on first use (and again after a fork); `None` to run
/// serially.
pub(crate) fn current() -> Option<Arc<ThreadPool>> {
    let pid = std::process::id();
    if let Ok(guard) = POOL.try_read() {
        match guard.as_ref() {
            Some((owner, pool)) if *owner == pid => return Some(Arc::clone(pool)),
            _ => {}
        }
    } else {
        // A writer holds the slot: either another thread is building the pool right now, or
        // this process was forked while one was (and the lock will never be released here).
        return None;
    }
    let mut guard = POOL.try_write().ok()?;
    if let Some((owner, pool)) = guard.as_ref()
        && *owner == pid
    {
        return Some(Arc::clone(pool));
    }
    for slot in &POOL_THREADS {
        slot.store(0, Ordering::Relaxed);
    }
    POOL_THREADS_STARTED.store(0, Ordering::Release);
    GENERATION.fetch_add(1, Ordering::AcqRel);
    let pool = Arc::new(
        ThreadPoolBuilder::new()
            .thread_name(|i| format!("nki-sim-{i}"))
            .start_handler(|_| record_pool_thread())
            .build()
            .ok()?,
    );
    if let Some((_, inherited)) = guard.replace((pid, Arc::clone(&pool))) {
        // The parent's pool: its threads are not in this process, so dropping it could wait on
        // them. Leak it (one per fork that uses the simulator).
        std::mem::forget(inherited);
    }
    Some(pool)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The thread that runs a job on the pool has recorded itself, and every recorded id is a
    /// thread of this process.
    #[cfg(target_os = "linux")]
    #[test]
    fn pool_threads_record_their_kernel_ids() {
        let pool = current().expect("a pool on Linux");
        let runner = pool.install(own_thread_id).expect("the job's thread id");
        let ids = thread_ids();
        assert!(ids.contains(&runner), "{runner} not in {ids:?}");
        assert!(ids.len() <= pool.current_num_threads());
        for id in ids {
            assert!(
                std::path::Path::new(&format!("/proc/self/task/{id}")).exists(),
                "{id} is not a thread of this process"
            );
        }
    }
}
