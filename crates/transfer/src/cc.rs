//! Congestion window: fixed, AIMD and CUBIC, with ndncatchunks' semantics
//! (slow start below ssthresh; one window per RTT; decrease on loss,
//! congestion mark or congestion Nack).

use std::time::Instant;

use crate::config::{Config, PipelineType};

/// Smallest ssthresh after a decrease.
pub const MIN_SSTHRESH: f64 = 2.0;
/// CUBIC's scaling constant C.
const CUBIC_C: f64 = 0.4;

/// A congestion window.
#[derive(Debug, Clone)]
pub struct Window {
    kind: PipelineType,
    cwnd: f64,
    ssthresh: f64,
    init: f64,
    max: f64,
    aimd_step: f64,
    aimd_beta: f64,
    cubic_beta: f64,
    fast_conv: bool,
    reset_to_init: bool,
    w_max: f64,
    last_w_max: f64,
    last_decrease: Instant,
    hystart: bool,
    min_rtt: f64,
}

impl Window {
    /// A window per `cfg`.
    pub fn new(cfg: &Config, now: Instant) -> Self {
        let init = match cfg.pipeline_type {
            PipelineType::Fixed => cfg.pipeline_size.max(1) as f64,
            _ => cfg.init_cwnd.max(1.0),
        };
        Window {
            kind: cfg.pipeline_type,
            cwnd: init,
            ssthresh: cfg.init_ssthresh,
            init,
            max: cfg.max_cwnd.max(init),
            aimd_step: cfg.aimd_step,
            aimd_beta: cfg.aimd_beta,
            cubic_beta: cfg.cubic_beta,
            fast_conv: cfg.fast_conv,
            reset_to_init: cfg.reset_cwnd_to_init,
            w_max: 0.0,
            last_w_max: 0.0,
            last_decrease: now,
            hystart: cfg.hystart && cfg.pipeline_type != PipelineType::Fixed,
            min_rtt: f64::MAX,
        }
    }

    /// An RTT sample (s): in slow start, a sample well above the path's
    /// minimum means a queue is building: leave slow start (HyStart delay
    /// increase; ssthresh = cwnd, no decrease). True when it left.
    pub fn rtt_sample(&mut self, rtt: f64) -> bool {
        self.min_rtt = self.min_rtt.min(rtt);
        if !self.hystart || self.cwnd >= self.ssthresh || self.cwnd < 16.0 {
            return false;
        }
        let eta = (self.min_rtt / 8.0).clamp(0.004, 0.016);
        if rtt > self.min_rtt + eta {
            self.ssthresh = self.cwnd;
            // CUBIC grows from here as after a decrease to this window.
            self.w_max = self.cwnd;
            return true;
        }
        false
    }

    /// The window, in Interests.
    pub fn cwnd(&self) -> f64 {
        self.cwnd
    }

    /// ssthresh.
    pub fn ssthresh(&self) -> f64 {
        self.ssthresh
    }

    /// When the window last shrank.
    pub fn last_decrease(&self) -> Instant {
        self.last_decrease
    }

    /// One Data arrived (not marked). `srtt` in seconds.
    pub fn increase(&mut self, now: Instant, srtt: f64) {
        match self.kind {
            PipelineType::Fixed => {}
            PipelineType::Aimd => {
                if self.cwnd < self.ssthresh {
                    self.cwnd += self.aimd_step;
                } else {
                    self.cwnd += self.aimd_step / self.cwnd;
                }
            }
            PipelineType::Cubic => {
                if self.cwnd < self.ssthresh {
                    self.cwnd += 1.0;
                } else {
                    let t = now.duration_since(self.last_decrease).as_secs_f64();
                    let b = self.cubic_beta;
                    let k = (self.w_max * (1.0 - b) / CUBIC_C).cbrt();
                    let w_cubic = CUBIC_C * (t - k).powi(3) + self.w_max;
                    let rtt = srtt.max(1e-6);
                    let w_est = self.w_max * b + 3.0 * (1.0 - b) / (1.0 + b) * t / rtt;
                    let target = w_cubic.max(w_est);
                    if target > self.cwnd {
                        self.cwnd += (target - self.cwnd) / self.cwnd;
                    }
                }
            }
        }
        self.cwnd = self.cwnd.min(self.max);
    }

    /// Loss or congestion signal: shrink the window. Returns false for the
    /// fixed pipeline (nothing changes).
    pub fn decrease(&mut self, now: Instant) -> bool {
        let beta = match self.kind {
            PipelineType::Fixed => return false,
            PipelineType::Aimd => self.aimd_beta,
            PipelineType::Cubic => {
                if self.fast_conv && self.cwnd < self.last_w_max {
                    self.last_w_max = self.cwnd;
                    self.w_max = self.cwnd * (1.0 + self.cubic_beta) / 2.0;
                } else {
                    self.w_max = self.cwnd;
                    self.last_w_max = self.cwnd;
                }
                self.cubic_beta
            }
        };
        self.ssthresh = (self.cwnd * beta).max(MIN_SSTHRESH);
        self.cwnd = if self.reset_to_init {
            self.init
        } else {
            self.ssthresh
        };
        self.last_decrease = now;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn cfg(kind: PipelineType) -> Config {
        Config {
            pipeline_type: kind,
            ..Config::default()
        }
    }

    #[test]
    fn aimd_slow_start_then_linear_then_halves() {
        let now = Instant::now();
        let mut w = Window::new(&cfg(PipelineType::Aimd), now);
        assert_eq!(w.cwnd(), 2.0);
        for _ in 0..8 {
            w.increase(now, 0.01);
        }
        assert_eq!(w.cwnd(), 10.0);
        assert!(w.decrease(now));
        assert_eq!((w.cwnd(), w.ssthresh()), (5.0, 5.0));
        for _ in 0..5 {
            w.increase(now, 0.01);
        }
        // Congestion avoidance: about +1 per window's worth of Data.
        assert!(w.cwnd() > 5.9 && w.cwnd() < 6.0, "{}", w.cwnd());
    }

    #[test]
    fn cubic_decreases_by_beta_and_regrows_to_w_max() {
        let t0 = Instant::now();
        let mut w = Window::new(&cfg(PipelineType::Cubic), t0);
        for _ in 0..98 {
            w.increase(t0, 0.01);
        }
        assert_eq!(w.cwnd(), 100.0);
        w.decrease(t0);
        assert!((w.cwnd() - 70.0).abs() < 1e-9);
        // K = cbrt(100*0.3/0.4) ≈ 4.2 s: the window is back near W_max then.
        let mut t = t0;
        for _ in 0..4200 {
            t += Duration::from_millis(1);
            w.increase(t, 0.01);
        }
        assert!(w.cwnd() > 95.0, "{}", w.cwnd());
    }

    #[test]
    fn hystart_leaves_slow_start_on_delay_increase() {
        let now = Instant::now();
        let mut w = Window::new(&cfg(PipelineType::Cubic), now);
        for _ in 0..30 {
            w.increase(now, 0.001);
            assert!(!w.rtt_sample(0.001));
        }
        assert_eq!(w.cwnd(), 32.0);
        assert!(!w.rtt_sample(0.004), "within min + 4 ms");
        assert!(w.rtt_sample(0.0055));
        assert_eq!(w.ssthresh(), 32.0);
        w.increase(now, 0.001);
        assert!(w.cwnd() < 33.0, "no longer slow start: {}", w.cwnd());
    }

    #[test]
    fn fixed_never_moves() {
        let now = Instant::now();
        let mut w = Window::new(
            &Config {
                pipeline_type: PipelineType::Fixed,
                pipeline_size: 7,
                ..Config::default()
            },
            now,
        );
        w.increase(now, 0.1);
        assert!(!w.decrease(now));
        assert_eq!(w.cwnd(), 7.0);
    }
}
