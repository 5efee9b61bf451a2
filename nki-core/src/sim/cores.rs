//! Whether the machine has a core free for the simulator's second thread.
//!
//! A run split across threads only goes faster when they get cores of their own. When other
//! processes hold the other cores, the simulator's threads share the calling thread's core
//! (measured on a 2-core machine with one busy process: 0.89 CPU-seconds per wall second for a
//! split `linear`, against 1.00 on the calling thread alone, and each call 8% slower; a split on
//! ATen's threads can wait a whole scheduler slice, about 8 ms, for its piece on the shared
//! core), so a run is split only while a core is free. A large run while none is free runs on
//! the calling thread with the host's spinning threads asleep ([`crate::sim::Placement::Alone`],
//! which asks [`a_worker_is_running`]).
//!
//! On Linux, "free" is measured over windows of at least [`WINDOW`]: the CPU time all CPUs spent
//! running anything (`/proc/stat`) less this process's own (`/proc/self/stat`: the calling
//! thread, the simulator's workers, ATen's threads still running between their parallel
//! regions) is the other processes' work. A core is free while that averages at most half a
//! core beside the caller's (`online CPUs − 1.5`); the answer holds until the next window ends,
//! so a call pays for the two file reads once per window. The running-thread count of one
//! instant is what other work looks like in a window of a microsecond: a daemon that runs for a
//! moment reads as a busy core. It is used only for the first question, before any window:
//! the fourth field of `/proc/loadavg` (`running/total`), less the simulator's workers the kernel
//! reports running (`/proc/self/task/<id>/stat`, read only when the count alone says no core is
//! free), below the number of online CPUs (`/sys/devices/system/cpu/online`). Elsewhere, or
//! when the files cannot be read, every core is taken to be free, which is what the simulator
//! did before it looked.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Whether a core is free for a second thread of the simulator (see the module docs); `true`
/// when that cannot be read.
pub fn a_core_is_free() -> bool {
    /// The start of the current window and the answer the last one gave (none before the
    /// first window ends).
    static STATE: Mutex<Option<(Sample, Option<bool>)>> = Mutex::new(None);
    static FREE: AtomicBool = AtomicBool::new(true);
    // Another thread is deciding right now: its last answer.
    let Ok(mut state) = STATE.try_lock() else {
        return FREE.load(Ordering::Relaxed);
    };
    let free = match *state {
        // Before the first window ends: the threads running right now.
        Some((start, None)) if start.at.elapsed() < WINDOW => a_core_is_free_now(),
        Some((start, Some(free))) if start.at.elapsed() < WINDOW => return free,
        // A window nobody asked about for long averages a past the machine may have left: a
        // new one starts, and meanwhile the threads running now answer.
        Some(_) if start_is_stale(&state) => {
            *state = Sample::now().map(|start| (start, None));
            a_core_is_free_now()
        }
        Some((start, _)) => match (Sample::now(), online_cpus()) {
            (Some(end), Some(online)) => {
                let free = free_beside(online, others_busy(start, end));
                *state = Some((end, Some(free)));
                free
            }
            _ => a_core_is_free_now(),
        },
        None => {
            *state = Sample::now().map(|start| (start, None));
            a_core_is_free_now()
        }
    };
    FREE.store(free, Ordering::Relaxed);
    free
}

/// The shortest span over which [`a_core_is_free`] measures other processes' work; its answer
/// holds until the next span ends. A span longer than [`STALE`] is not used.
pub const WINDOW: Duration = Duration::from_millis(100);

/// The longest span [`a_core_is_free`] averages over.
pub const STALE: Duration = Duration::from_millis(400);

/// Whether the current window began more than [`STALE`] ago.
fn start_is_stale(state: &Option<(Sample, Option<bool>)>) -> bool {
    state.is_some_and(|(start, _)| start.at.elapsed() > STALE)
}

/// Clock ticks per second in `/proc/stat` and `/proc/<pid>/stat` (`USER_HZ`, 100 on Linux).
const TICKS_PER_SECOND: f64 = 100.0;

/// The CPU time the machine and this process have spent, at an instant.
#[derive(Clone, Copy, Debug)]
struct Sample {
    at: Instant,
    /// Ticks all CPUs spent running anything (`/proc/stat`: user, nice, system, irq, softirq).
    machine: u64,
    /// Ticks this process's threads spent (`/proc/self/stat`: utime, stime).
    ours: u64,
}

impl Sample {
    fn now() -> Option<Sample> {
        let machine = machine_busy(&std::fs::read_to_string("/proc/stat").ok()?)?;
        let ours = own_ticks(&std::fs::read_to_string("/proc/self/stat").ok()?)?;
        Some(Sample {
            at: Instant::now(),
            machine,
            ours,
        })
    }
}

/// How many cores other processes kept busy on average from `start` to `end`.
fn others_busy(start: Sample, end: Sample) -> f64 {
    let ticks = end.at.duration_since(start.at).as_secs_f64() * TICKS_PER_SECOND;
    let machine = end.machine.saturating_sub(start.machine) as f64;
    let ours = end.ours.saturating_sub(start.ours) as f64;
    if ticks <= 0.0 {
        return 0.0;
    }
    ((machine - ours) / ticks).max(0.0)
}

/// Whether `online` CPUs leave one free beside the calling thread's while other processes keep
/// `others` cores busy: at most half a core's worth of their work may share it (a process that
/// runs now and then, not one that holds a core).
fn free_beside(online: usize, others: f64) -> bool {
    others + 1.5 <= online as f64
}

/// The busy ticks of `/proc/stat`'s first line (`cpu  user nice system idle iowait irq softirq
/// steal ...`): user, nice, system, irq and softirq.
fn machine_busy(stat: &str) -> Option<u64> {
    let line = stat.lines().next()?;
    let mut fields = line.split_whitespace();
    if fields.next()? != "cpu" {
        return None;
    }
    let v: Vec<u64> = fields
        .take(7)
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    (v.len() == 7).then(|| v[0] + v[1] + v[2] + v[5] + v[6])
}

/// utime + stime of a `/proc/<pid>/stat` line (the 14th and 15th fields; the command name,
/// which may hold spaces and parentheses, ends at the last `)`).
fn own_ticks(stat: &str) -> Option<u64> {
    let (_, rest) = stat.rsplit_once(')')?;
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// Whether a core is free right now, from the threads running at this instant.
fn a_core_is_free_now() -> bool {
    let Some(online) = online_cpus() else {
        return true;
    };
    let loadavg = std::fs::read_to_string("/proc/loadavg").ok();
    free_given(online, loadavg.as_deref(), pool_threads_running)
}

/// [`a_core_is_free`] from the online CPU count, the text of `/proc/loadavg` (if read), and a
/// count of the pool's running threads (asked only when the system-wide count reaches the
/// CPUs).
fn free_given(online: usize, loadavg: Option<&str>, pool_running: impl FnOnce() -> usize) -> bool {
    let Some(runnable) = loadavg.and_then(runnable_threads) else {
        return true;
    };
    runnable < online || runnable.saturating_sub(pool_running()) < online
}

/// Whether one of the simulator's recorded worker threads (the pool's, or a host's that ran a
/// piece: ATen's OpenMP threads) is running or ready to run right now, as the kernel reports
/// it. Between runs, that is a thread spin-waiting after a parallel region ([`crate::sim::Placement::Alone`]
/// puts it to sleep for a run); `false` where `/proc` cannot be read.
pub(crate) fn a_worker_is_running() -> bool {
    pool_threads_running() > 0
}

/// How many of the pool's threads the kernel reports running or ready to run (state `R`).
fn pool_threads_running() -> usize {
    crate::sim::pool::thread_ids()
        .into_iter()
        .filter(|id| {
            std::fs::read_to_string(format!("/proc/self/task/{id}/stat"))
                .ok()
                .and_then(|stat| thread_state(&stat))
                == Some('R')
        })
        .count()
}

/// The state letter of a `/proc/.../stat` line: the first field after the parenthesised
/// command name (which may itself contain spaces and parentheses).
fn thread_state(stat: &str) -> Option<char> {
    let (_, rest) = stat.rsplit_once(')')?;
    rest.trim_start().chars().next()
}

/// The online CPUs, read once per process.
fn online_cpus() -> Option<usize> {
    static ONLINE: OnceLock<Option<usize>> = OnceLock::new();
    *ONLINE.get_or_init(|| {
        std::fs::read_to_string("/sys/devices/system/cpu/online")
            .ok()
            .and_then(|text| cpu_list_len(&text))
    })
}

/// The number of CPUs in a kernel CPU list such as `0-3,8,10-11`.
fn cpu_list_len(list: &str) -> Option<usize> {
    let mut total = 0;
    for range in list.trim().split(',') {
        total += match range.split_once('-') {
            Some((lo, hi)) => {
                let (lo, hi) = (lo.parse::<usize>().ok()?, hi.parse::<usize>().ok()?);
                hi.checked_sub(lo)? + 1
            }
            None => {
                range.parse::<usize>().ok()?;
                1
            }
        };
    }
    (total > 0).then_some(total)
}

/// The running-or-ready thread count of a `/proc/loadavg` line (`0.38 0.82 0.94 1/81 13587`).
fn runnable_threads(loadavg: &str) -> Option<usize> {
    let field = loadavg.split_whitespace().nth(3)?;
    field.split_once('/')?.0.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_count_ranges_and_single_cpus() {
        assert_eq!(cpu_list_len("0-1\n"), Some(2));
        assert_eq!(cpu_list_len("0"), Some(1));
        assert_eq!(cpu_list_len("0-3,8,10-11"), Some(7));
        assert_eq!(cpu_list_len(""), None);
        assert_eq!(cpu_list_len("3-1"), None);
        assert_eq!(cpu_list_len("a-b"), None);
    }

    #[test]
    fn the_runnable_count_is_the_fourth_field() {
        assert_eq!(runnable_threads("0.38 0.82 0.94 1/81 13587\n"), Some(1));
        assert_eq!(runnable_threads("1.00 1.10 1.25 3/456 99"), Some(3));
        assert_eq!(runnable_threads("0.38 0.82 0.94"), None);
        assert_eq!(runnable_threads("0.38 0.82 0.94 81 1"), None);
    }

    #[test]
    fn a_core_is_free_while_fewer_threads_run_than_there_are_cpus() {
        let unasked = || -> usize { panic!("the pool is asked only when the count is high") };
        assert!(free_given(2, Some("0.38 0.82 0.94 1/81 13587"), unasked));
        assert!(free_given(8, Some("3.00 1.10 1.25 5/81 13587"), unasked));
        assert!(!free_given(2, Some("1.00 1.10 1.25 2/81 13587"), || 0));
        assert!(!free_given(2, Some("3.00 1.10 1.25 5/81 13587"), || 2));
        // Unreadable or unparsable: free, as before the simulator looked.
        assert!(free_given(2, None, unasked));
        assert!(free_given(2, Some("garbage"), unasked));
    }

    #[test]
    fn the_pool_s_own_running_threads_are_not_another_process_s_work() {
        // The caller and one pool thread still looking for work: no one else is running.
        assert!(free_given(2, Some("1.00 1.10 1.25 2/81 13587"), || 1));
        // The caller, both pool threads and a busy process.
        assert!(!free_given(2, Some("1.00 1.10 1.25 4/81 13587"), || 2));
    }

    #[test]
    fn other_processes_work_is_the_machine_s_less_this_process_s() {
        assert_eq!(
            machine_busy("cpu  10 1 5 100 3 2 1 7 0 0\ncpu0 5 0 2 50 1 1 0 3 0 0\n"),
            Some(19)
        );
        assert_eq!(machine_busy("cpu0 1 2 3 4 5 6 7"), None);
        assert_eq!(machine_busy("cpu  1 2 3"), None);
        let stat = "4321 (a) b) R 1 2 3 4 5 6 7 8 9 10 120 30 0 0 20 0";
        assert_eq!(own_ticks(stat), Some(150));
        assert_eq!(own_ticks("4321 (x) R 1 2"), None);
        let at = Instant::now();
        let start = Sample {
            at,
            machine: 1000,
            ours: 400,
        };
        // 0.2 s = 20 ticks per core: the machine ran 40 ticks, this process 25 of them.
        let end = Sample {
            at: at + Duration::from_millis(200),
            machine: 1040,
            ours: 425,
        };
        assert!((others_busy(start, end) - 0.75).abs() < 1e-9);
        assert_eq!(others_busy(start, start), 0.0);
    }

    #[test]
    fn a_core_is_free_beside_less_than_half_a_core_of_other_work() {
        assert!(free_beside(2, 0.0));
        assert!(free_beside(2, 0.5));
        assert!(!free_beside(2, 0.75), "a busy process holds the other core");
        assert!(!free_beside(1, 0.0), "one CPU: the caller's");
        assert!(free_beside(8, 5.0));
        assert!(!free_beside(8, 6.6));
    }

    #[test]
    fn the_state_follows_the_last_parenthesis() {
        assert_eq!(thread_state("4321 (nki-sim-0) R 1 2 3"), Some('R'));
        assert_eq!(thread_state("4321 (a) b) S 1 2 3"), Some('S'));
        assert_eq!(thread_state("4321 nki-sim-0 R"), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn linux_reports_its_online_cpus() {
        assert!(online_cpus().is_some_and(|n| n >= 1));
    }
}
