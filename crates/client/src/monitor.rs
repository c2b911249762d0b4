//! Watches the client itself during the timed run, off the hot path: a ticker task on the
//! run's runtime notes how late each tick woke against its due time (a busy or starved runtime
//! wakes late, and so does every request it drives), and once a second samples the process's
//! CPU time and open file descriptors. Everything stays in the task's own locals and comes back
//! once, as [`ClientObservations`], when the run ends.

use std::time::{Duration, Instant};

use servebench_core::metrics::Sorted;
use servebench_core::record::{ClientObservations, ClientSecond};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// The ticker's period.
pub(crate) const TICK: Duration = Duration::from_millis(5);
/// Ticks later than this are kept individually (with their due time).
const NOTED_LATE: Duration = Duration::from_millis(5);
/// At most this many late ticks are kept.
const MAX_NOTED: usize = 1000;

/// The running watcher; [`Monitor::finish`] stops it and returns what it saw.
pub(crate) struct Monitor {
    stop: oneshot::Sender<()>,
    task: JoinHandle<ClientObservations>,
}

impl Monitor {
    /// Starts watching; times are counted from `t0`, the run's start.
    pub fn start(t0: Instant) -> Monitor {
        let (stop, stopped) = oneshot::channel();
        Monitor { stop, task: tokio::spawn(watch(t0, TICK, stopped)) }
    }

    /// Stops the watcher; `None` if its task was lost.
    pub async fn finish(self) -> Option<ClientObservations> {
        let _ = self.stop.send(());
        self.task.await.ok()
    }
}

async fn watch(t0: Instant, period: Duration, mut stopped: oneshot::Receiver<()>) -> ClientObservations {
    let cpu0 = process_cpu();
    let mut lateness_us: Vec<u32> = Vec::with_capacity(4096);
    let mut late_ticks = Vec::new();
    let mut per_second = Vec::new();
    let mut last_sample = (t0, cpu0);
    let mut k: u32 = 1;
    loop {
        let due = t0 + period * k;
        tokio::select! {
            biased;
            _ = &mut stopped => break,
            () = tokio::time::sleep_until(due.into()) => {}
        }
        let now = Instant::now();
        let late = now.saturating_duration_since(due);
        lateness_us.push(u32::try_from(late.as_micros()).unwrap_or(u32::MAX));
        if late > NOTED_LATE && late_ticks.len() < MAX_NOTED {
            late_ticks.push(((due - t0).as_secs_f64(), late.as_secs_f64() * 1000.0));
        }
        // Ticks missed while late are skipped, not taken in a burst.
        let since = now.saturating_duration_since(t0);
        k = u32::try_from(since.as_nanos() / period.as_nanos()).unwrap_or(u32::MAX - 1) + 1;
        let whole_seconds = since.as_secs();
        if whole_seconds > per_second.len() as u64 {
            let cpu = process_cpu();
            let wall = now.saturating_duration_since(last_sample.0).as_secs_f64();
            let cores = match (cpu, last_sample.1) {
                (Some(c), Some(c0)) if wall > 0.0 => Some((c - c0) / wall),
                _ => None,
            };
            let second = ClientSecond { cpu_cores: cores, open_fds: open_fds() };
            while (per_second.len() as u64) < whole_seconds {
                per_second.push(second);
            }
            last_sample = (now, cpu);
        }
    }
    let lateness_ms: Vec<f64> = lateness_us.iter().map(|&us| f64::from(us) / 1000.0).collect();
    let sorted = Sorted::new(&lateness_ms);
    let (p50, p99, max) = if lateness_ms.is_empty() {
        (0.0, 0.0, 0.0)
    } else {
        (sorted.percentile(50.0), sorted.percentile(99.0), sorted.max())
    };
    ClientObservations {
        tick_ms: period.as_secs_f64() * 1000.0,
        ticks: lateness_ms.len() as u64,
        lateness_p50_ms: p50,
        lateness_p99_ms: p99,
        lateness_max_ms: max,
        late_ticks,
        wall_s: t0.elapsed().as_secs_f64(),
        cpu_s: process_cpu().zip(cpu0).map(|(c, c0)| c - c0),
        cores: std::thread::available_parallelism().map_or(1, |n| u32::try_from(n.get()).unwrap_or(u32::MAX)),
        fd_limit: rlimit::getrlimit(rlimit::Resource::NOFILE).ok().map(|(soft, _)| soft),
        per_second,
    }
}

/// CPU seconds the whole process has used (every thread, user and system).
#[cfg(any(target_os = "linux", target_os = "android", target_os = "macos", target_os = "freebsd"))]
fn process_cpu() -> Option<f64> {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    Some(t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9)
}

#[cfg(not(any(target_os = "linux", target_os = "android", target_os = "macos", target_os = "freebsd")))]
fn process_cpu() -> Option<f64> {
    None
}

/// File descriptors this process has open, where the system lists them.
fn open_fds() -> Option<u64> {
    let dir = if cfg!(target_os = "linux") { "/proc/self/fd" } else { "/dev/fd" };
    std::fs::read_dir(dir).ok().map(|entries| entries.count() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn a_blocked_runtime_shows_as_a_late_tick_at_its_due_time() {
        let t0 = Instant::now();
        let monitor = Monitor::start(t0);
        tokio::time::sleep(Duration::from_millis(30)).await;
        // Nothing else can run on this thread while it sleeps: the ticker wakes ~120 ms late.
        std::thread::sleep(Duration::from_millis(120));
        tokio::time::sleep(Duration::from_millis(20)).await;
        let obs = monitor.finish().await.unwrap();
        assert!(obs.lateness_max_ms >= 100.0, "{obs:?}");
        let &(due, late) = obs.late_ticks.iter().find(|(_, l)| *l >= 100.0).unwrap();
        assert!((0.025..0.06).contains(&due), "due at {due} s");
        assert!(late < 200.0);
        // Missed ticks are skipped: about 170 ms at 5 ms, minus the ~24 skipped.
        assert!(obs.ticks < 20, "{} ticks", obs.ticks);
        assert!(obs.cpu_s.is_some_and(|c| c >= 0.0) && obs.cores >= 1);
        assert!(obs.per_second.is_empty(), "no whole second passed");
    }

    #[test]
    fn this_process_has_files_open_and_uses_cpu() {
        assert!(open_fds().is_some_and(|n| n >= 3));
        let before = process_cpu().unwrap();
        let mut x = 0u64;
        for i in 0..3_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        assert!(x != 1);
        assert!(process_cpu().unwrap() > before);
    }
}
