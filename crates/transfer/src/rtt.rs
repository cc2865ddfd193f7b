//! RTT estimation and retransmission timeout, RFC 6298: SRTT/RTTVAR with
//! alpha/beta/K, an initial RTO of 1 s, exponential backoff on timeout,
//! clamped to [min, max]. Karn's rule (no samples from retransmitted
//! Interests) is the caller's part.

use std::time::Duration;

/// RFC 6298 estimator.
#[derive(Debug, Clone)]
pub struct RttEstimator {
    srtt: Option<f64>,
    rttvar: f64,
    rto: f64,
    alpha: f64,
    beta: f64,
    k: f64,
    min: f64,
    max: f64,
    /// Smallest sample (s).
    pub min_sample: f64,
    /// Largest sample (s).
    pub max_sample: f64,
    sum: f64,
    /// Samples taken.
    pub samples: u64,
}

/// Clock granularity G of RFC 6298 (s).
const GRANULARITY: f64 = 0.001;

impl RttEstimator {
    /// A new estimator.
    pub fn new(alpha: f64, beta: f64, k: f64, min: Duration, max: Duration) -> Self {
        let (min, max) = (min.as_secs_f64(), max.as_secs_f64().max(min.as_secs_f64()));
        RttEstimator {
            srtt: None,
            rttvar: 0.0,
            rto: 1.0f64.clamp(min, max),
            alpha,
            beta,
            k,
            min,
            max,
            min_sample: f64::MAX,
            max_sample: 0.0,
            sum: 0.0,
            samples: 0,
        }
    }

    /// Adds a measurement (from an Interest sent once).
    pub fn add(&mut self, rtt: Duration) {
        let r = rtt.as_secs_f64();
        match self.srtt {
            None => {
                self.srtt = Some(r);
                self.rttvar = r / 2.0;
            }
            Some(s) => {
                self.rttvar = (1.0 - self.beta) * self.rttvar + self.beta * (s - r).abs();
                self.srtt = Some((1.0 - self.alpha) * s + self.alpha * r);
            }
        }
        let s = self.srtt.unwrap_or(r);
        self.rto = (s + (self.k * self.rttvar).max(GRANULARITY)).clamp(self.min, self.max);
        self.min_sample = self.min_sample.min(r);
        self.max_sample = self.max_sample.max(r);
        self.sum += r;
        self.samples += 1;
    }

    /// Doubles the RTO (after a timeout), up to the maximum.
    pub fn backoff(&mut self) {
        self.rto = (self.rto * 2.0).min(self.max);
    }

    /// Current RTO.
    pub fn rto(&self) -> Duration {
        Duration::from_secs_f64(self.rto)
    }

    /// Smoothed RTT, if there is a sample.
    pub fn srtt(&self) -> Option<Duration> {
        self.srtt.map(Duration::from_secs_f64)
    }

    /// Mean of the samples (s).
    pub fn mean(&self) -> f64 {
        if self.samples == 0 {
            0.0
        } else {
            self.sum / self.samples as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn est() -> RttEstimator {
        RttEstimator::new(
            0.125,
            0.25,
            8.0,
            Duration::from_millis(200),
            Duration::from_secs(60),
        )
    }

    #[test]
    fn rfc6298_first_and_later_samples() {
        let mut e = est();
        assert_eq!(e.rto(), Duration::from_secs(1), "initial RTO 1 s");
        e.add(Duration::from_millis(100));
        // SRTT = 100 ms, RTTVAR = 50 ms, RTO = 100 + 8*50 = 500 ms.
        assert!((e.rto().as_secs_f64() - 0.5).abs() < 1e-9);
        e.add(Duration::from_millis(100));
        // RTTVAR = 0.75*50 + 0 = 37.5; SRTT = 100; RTO = 100 + 300 = 400 ms.
        assert!((e.rto().as_secs_f64() - 0.4).abs() < 1e-9);
        for _ in 0..200 {
            e.add(Duration::from_millis(1));
        }
        assert_eq!(e.rto(), Duration::from_millis(200), "clamped to min");
        assert_eq!(e.samples, 202);
        assert!((e.min_sample - 0.001).abs() < 1e-12 && (e.max_sample - 0.1).abs() < 1e-12);
    }

    #[test]
    fn backoff_doubles_up_to_max() {
        let mut e = est();
        for _ in 0..10 {
            e.backoff();
        }
        assert_eq!(e.rto(), Duration::from_secs(60));
    }
}
