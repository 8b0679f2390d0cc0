//! A log-linear histogram of durations (about 3 % resolution, 1 us to hours) for
//! queueing delay and timer lateness: mean, p50, p99 and max without keeping samples.

use serde::Serialize;

const SUB: u32 = 32; // sub-buckets per power of two

#[derive(Debug, Clone)]
pub struct Histogram {
    buckets: Vec<u64>,
    count: u64,
    sum_ns: u128,
    max_ns: u64,
}

/// A summary in milliseconds, as the control socket reports it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Summary {
    pub count: u64,
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

fn index(us: u64) -> usize {
    if us < SUB as u64 {
        return us as usize;
    }
    let exp = 63 - us.leading_zeros(); // >= 5
    let shift = exp - SUB.trailing_zeros();
    let mantissa = (us >> shift) as u32 - SUB; // 0..SUB
    ((shift + 1) * SUB + mantissa) as usize
}

fn upper_us(i: usize) -> u64 {
    let i = i as u32;
    if i < SUB {
        return i as u64;
    }
    let shift = i / SUB - 1;
    let mantissa = i % SUB;
    (((SUB + mantissa + 1) as u64) << shift) - 1
}

impl Histogram {
    pub fn new() -> Self {
        Histogram {
            buckets: vec![0; (64 * SUB) as usize],
            count: 0,
            sum_ns: 0,
            max_ns: 0,
        }
    }

    pub fn record(&mut self, ns: u64) {
        self.buckets[index(ns / 1000)] += 1;
        self.count += 1;
        self.sum_ns += ns as u128;
        self.max_ns = self.max_ns.max(ns);
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    /// The value (ns) below which a fraction `q` of samples lie (bucket upper bound,
    /// capped by the maximum seen).
    pub fn quantile_ns(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = ((q * self.count as f64).ceil() as u64).clamp(1, self.count);
        let mut seen = 0;
        for (i, &n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return ((upper_us(i) + 1) * 1000).min(self.max_ns);
            }
        }
        self.max_ns
    }

    pub fn summary(&self) -> Summary {
        let ms = |ns: u64| ns as f64 / 1e6;
        Summary {
            count: self.count,
            mean_ms: if self.count == 0 {
                0.0
            } else {
                (self.sum_ns / self.count as u128) as f64 / 1e6
            },
            p50_ms: ms(self.quantile_ns(0.5)),
            p99_ms: ms(self.quantile_ns(0.99)),
            max_ms: ms(self.max_ns),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_monotonic_and_tight() {
        let mut last = 0;
        for us in [0u64, 1, 31, 32, 33, 63, 64, 100, 1000, 12_345, 1 << 30] {
            let i = index(us);
            assert!(i >= last);
            last = i;
            assert!(upper_us(i) >= us, "{us}");
            assert!(upper_us(i) as f64 <= us as f64 * 1.04 + 1.0, "{us}");
        }
    }

    #[test]
    fn quantiles() {
        let mut h = Histogram::new();
        for ms in 1..=100u64 {
            h.record(ms * 1_000_000);
        }
        let s = h.summary();
        assert_eq!(s.count, 100);
        assert!((s.mean_ms - 50.5).abs() < 1e-9);
        assert!((s.p50_ms - 50.0).abs() < 50.0 * 0.04, "{}", s.p50_ms);
        assert!((s.p99_ms - 99.0).abs() < 99.0 * 0.04, "{}", s.p99_ms);
        assert_eq!(s.max_ms, 100.0);
        assert_eq!(Histogram::new().summary().p99_ms, 0.0);
    }
}
