//! Whether the machine has a core free right now for the simulator's second thread.
//!
//! A run handed to the pool splits its work between threads that only go faster when they get
//! cores of their own. When other processes hold the other cores, the pool's threads share the
//! calling thread's core (measured on a 2-core machine with one busy process: 0.89 CPU-seconds
//! per wall second for a split `linear`, against 1.00 on the calling thread alone, and each
//! call 8% slower), so a large run goes to the pool only while a core is free.
//!
//! On Linux the kernel counts the threads that are running or ready to run, system-wide, in
//! the fourth field of `/proc/loadavg` (`running/total`); the calling thread is one of them, and
//! so is a thread of the simulator's pool that finished a job moments ago and has not yet gone
//! to sleep (rayon's workers look for more work for a while first; a large call right after
//! another would otherwise always see a busy machine). A core is free when the count, less the
//! pool's threads the kernel reports running (`/proc/self/task/<id>/stat`, read only when the
//! count alone says no core is free), is below the number of online CPUs
//! (`/sys/devices/system/cpu/online`). Elsewhere, or when the files cannot be read, every core
//! is taken to be free, which is what the simulator did before it looked.

use std::sync::OnceLock;

/// Whether at least one online CPU is running nothing right now (see the module docs);
/// `true` when that cannot be read.
pub fn a_core_is_free() -> bool {
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
