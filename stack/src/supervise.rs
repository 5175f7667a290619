//! When to restart a replica that exited, as pure logic with the clock passed in: capped
//! exponential backoff (reset once a replica has stayed up long enough), and giving up
//! after too many crashes within a window. The process side is in [`crate::replicas`].

use clap::Args;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Flags of `warmpath up` that set the restart policy.
#[derive(Args, Clone, Debug)]
pub struct RestartArgs {
    /// First delay before restarting a replica that exited, in milliseconds; it doubles
    /// with each further crash up to --restart-backoff-max-ms.
    #[arg(long, default_value_t = 500)]
    pub restart_backoff_ms: u64,
    /// Longest delay before a restart, in milliseconds.
    #[arg(long, default_value_t = 10_000)]
    pub restart_backoff_max_ms: u64,
    /// A replica that stays up this many seconds starts again from the first delay.
    #[arg(long, default_value_t = 30)]
    pub restart_reset_s: u64,
    /// Give up on a replica after this many crashes within --restart-window-s (0: never).
    #[arg(long, default_value_t = 5)]
    pub restart_limit: u32,
    /// The window, in seconds, over which --restart-limit counts crashes.
    #[arg(long, default_value_t = 60)]
    pub restart_window_s: u64,
}

/// The restart policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RestartPolicy {
    /// Delay before the first restart.
    pub backoff_min: Duration,
    /// Cap of the delay.
    pub backoff_max: Duration,
    /// Uptime after which the delay starts again from `backoff_min`.
    pub reset_after: Duration,
    /// Crashes within `window` that make us give up (0: never give up).
    pub limit: u32,
    /// The crash-counting window.
    pub window: Duration,
}

impl RestartArgs {
    /// The policy these flags describe, or why they do not make one.
    pub fn policy(&self) -> Result<RestartPolicy, String> {
        if self.restart_backoff_max_ms < self.restart_backoff_ms {
            return Err("--restart-backoff-max-ms must be >= --restart-backoff-ms".into());
        }
        if self.restart_limit > 0 && self.restart_window_s == 0 {
            return Err("--restart-window-s must be positive".into());
        }
        Ok(RestartPolicy {
            backoff_min: Duration::from_millis(self.restart_backoff_ms),
            backoff_max: Duration::from_millis(self.restart_backoff_max_ms),
            reset_after: Duration::from_secs(self.restart_reset_s),
            limit: self.restart_limit,
            window: Duration::from_secs(self.restart_window_s),
        })
    }
}

/// What to do about a crash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Restart after `delay`; `crashes` is the count within the window, this one included.
    Restart {
        /// Wait this long first.
        delay: Duration,
        /// Crashes within the window.
        crashes: u32,
    },
    /// Too many crashes within the window: leave the replica down.
    GiveUp {
        /// Crashes within the window.
        crashes: u32,
    },
}

/// One replica's crash record.
#[derive(Clone, Debug)]
pub struct CrashHistory {
    policy: RestartPolicy,
    /// Crash times within the window, oldest first.
    crashes: VecDeque<Instant>,
    /// The delay the next restart waits.
    next_delay: Duration,
    /// When the current run started.
    started: Instant,
}

impl CrashHistory {
    /// A replica that started at `now`.
    pub fn new(policy: RestartPolicy, now: Instant) -> Self {
        Self {
            policy,
            crashes: VecDeque::new(),
            next_delay: policy.backoff_min,
            started: now,
        }
    }

    /// The replica was started (again) at `now`.
    pub fn started(&mut self, now: Instant) {
        self.started = now;
    }

    /// The replica exited (or failed to start) at `now`: restart it, and after how long,
    /// or give up.
    pub fn crashed(&mut self, now: Instant) -> Verdict {
        if now.saturating_duration_since(self.started) >= self.policy.reset_after {
            self.next_delay = self.policy.backoff_min;
        }
        self.crashes.push_back(now);
        while self
            .crashes
            .front()
            .is_some_and(|t| now.saturating_duration_since(*t) >= self.policy.window)
        {
            self.crashes.pop_front();
        }
        let crashes = u32::try_from(self.crashes.len()).unwrap_or(u32::MAX);
        if self.policy.limit > 0 && crashes >= self.policy.limit {
            return Verdict::GiveUp { crashes };
        }
        let delay = self.next_delay;
        self.next_delay = (self.next_delay * 2).min(self.policy.backoff_max);
        Verdict::Restart { delay, crashes }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> RestartPolicy {
        RestartArgs {
            restart_backoff_ms: 500,
            restart_backoff_max_ms: 10_000,
            restart_reset_s: 30,
            restart_limit: 5,
            restart_window_s: 60,
        }
        .policy()
        .expect("valid")
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Crashes at once after each restart: `(delay, crashes)` or give-up per crash.
    fn crash_loop(h: &mut CrashHistory, mut now: Instant, n: usize) -> Vec<Verdict> {
        let mut out = Vec::new();
        for _ in 0..n {
            let v = h.crashed(now);
            if let Verdict::Restart { delay, .. } = v {
                now += delay;
                h.started(now);
                now += ms(100);
            }
            out.push(v);
        }
        out
    }

    #[test]
    fn backoff_doubles_to_the_cap_then_gives_up_in_the_window() {
        let p = RestartPolicy {
            limit: 8,
            ..policy()
        };
        let t0 = Instant::now();
        let mut h = CrashHistory::new(p, t0);
        let v = crash_loop(&mut h, t0 + ms(100), 8);
        let delays: Vec<u64> = v
            .iter()
            .filter_map(|v| match v {
                Verdict::Restart { delay, .. } => Some(delay.as_millis() as u64),
                Verdict::GiveUp { .. } => None,
            })
            .collect();
        assert_eq!(delays, [500, 1000, 2000, 4000, 8000, 10_000, 10_000]);
        // 500+1000+...+10000 ms plus 0.1 s per run: all 8 crashes fall within 60 s.
        assert_eq!(v[7], Verdict::GiveUp { crashes: 8 });
    }

    #[test]
    fn gives_up_at_the_limit_and_counts_only_the_window() {
        let t0 = Instant::now();
        let mut h = CrashHistory::new(policy(), t0);
        let v = crash_loop(&mut h, t0 + ms(100), 5);
        assert!(matches!(v[3], Verdict::Restart { crashes: 4, .. }), "{v:?}");
        assert_eq!(v[4], Verdict::GiveUp { crashes: 5 });

        // Crashes 20 s apart: at most 3 within any 60 s, so never given up.
        let mut h = CrashHistory::new(policy(), t0);
        for i in 1..=20u64 {
            let v = h.crashed(t0 + Duration::from_secs(20 * i));
            assert!(
                matches!(v, Verdict::Restart { crashes, .. } if crashes <= 3),
                "crash {i}: {v:?}"
            );
        }
    }

    #[test]
    fn staying_up_resets_the_backoff() {
        let t0 = Instant::now();
        let mut h = CrashHistory::new(policy(), t0);
        let v = crash_loop(&mut h, t0 + ms(100), 3);
        assert!(matches!(v[2], Verdict::Restart { delay, .. } if delay == ms(2000)));
        // Restarted at t1, up for 29 s: not long enough, the delay keeps growing.
        let t1 = t0 + Duration::from_secs(100);
        h.started(t1);
        let v = h.crashed(t1 + Duration::from_secs(29));
        assert!(
            matches!(v, Verdict::Restart { delay, .. } if delay == ms(4000)),
            "{v:?}"
        );
        // Up for 30 s: back to the first delay.
        let t2 = t1 + Duration::from_secs(40);
        h.started(t2);
        let v = h.crashed(t2 + Duration::from_secs(30));
        assert_eq!(
            v,
            Verdict::Restart {
                delay: ms(500),
                crashes: 2
            }
        );
    }

    #[test]
    fn limit_zero_never_gives_up_and_flags_are_checked() {
        let p = RestartPolicy {
            limit: 0,
            ..policy()
        };
        let t0 = Instant::now();
        let mut h = CrashHistory::new(p, t0);
        let v = crash_loop(&mut h, t0, 50);
        assert!(v.iter().all(|v| matches!(v, Verdict::Restart { .. })));
        assert!(matches!(v[49], Verdict::Restart { delay, .. } if delay == ms(10_000)));

        let mut a = RestartArgs {
            restart_backoff_ms: 2000,
            restart_backoff_max_ms: 1000,
            restart_reset_s: 30,
            restart_limit: 5,
            restart_window_s: 60,
        };
        assert!(a.policy().is_err());
        a.restart_backoff_max_ms = 2000;
        assert!(a.policy().is_ok());
        a.restart_window_s = 0;
        assert!(a.policy().is_err());
    }
}
