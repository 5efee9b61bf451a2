//! The simulator's thread pool, per process.
//!
//! Threads do not survive `fork`: a child process inherits a pool whose worker threads do not
//! exist, and the first parallel loop there would wait for them forever (rayon's global pool
//! has exactly this problem). The pool is therefore owned here and tagged with the id of the
//! process that built it; a forked child sees a different id and builds its own. If a pool
//! cannot be built, or the pool slot is being replaced by another thread at that moment, the
//! caller runs serially (same results: parallel and serial runs are bit-identical).

use rayon::{ThreadPool, ThreadPoolBuilder};
use std::sync::{Arc, Mutex, RwLock};

/// `(process id, pool)`.
static POOL: RwLock<Option<(u32, Arc<ThreadPool>)>> = RwLock::new(None);

/// The kernel's thread ids of the current pool's threads (Linux; each thread adds its own as it
/// starts), for [`crate::sim::cores`]: a thread of the pool that has just finished a job keeps
/// running for a while before it sleeps, and is not another process's work.
static POOL_THREADS: Mutex<Vec<u32>> = Mutex::new(Vec::new());

/// The thread ids [`POOL_THREADS`] holds.
pub(crate) fn thread_ids() -> Vec<u32> {
    POOL_THREADS
        .lock()
        .map(|ids| ids.clone())
        .unwrap_or_default()
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
    if let Ok(mut ids) = POOL_THREADS.lock() {
        ids.clear();
    }
    let pool = Arc::new(
        ThreadPoolBuilder::new()
            .thread_name(|i| format!("nki-sim-{i}"))
            .start_handler(|_| {
                if let (Some(id), Ok(mut ids)) = (own_thread_id(), POOL_THREADS.lock()) {
                    ids.push(id);
                }
            })
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
