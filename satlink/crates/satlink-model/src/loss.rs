//! Loss models: a packet loss rate, or a bit error rate turned into a frame loss
//! probability from the frame's length.

use crate::config::LossConfig;
use crate::rng::Rng;

/// Probability that a frame of `len` bytes is lost.
pub fn loss_probability(model: Option<LossConfig>, len: usize) -> f64 {
    match model {
        None => 0.0,
        Some(LossConfig::PacketRate(p)) => p,
        // 1 - (1 - ber)^(8 len), computed without cancellation for tiny ber.
        Some(LossConfig::BitErrorRate(ber)) => -f64::exp_m1((8 * len) as f64 * f64::ln_1p(-ber)),
    }
}

/// Draw whether a frame of `len` bytes is lost.
pub fn is_lost(model: Option<LossConfig>, len: usize, rng: &mut Rng) -> bool {
    let p = loss_probability(model, len);
    p > 0.0 && rng.next_f64() < p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ber_probability_matches_the_formula() {
        let p = loss_probability(Some(LossConfig::BitErrorRate(1e-5)), 1500);
        assert!((p - (1.0 - (1.0f64 - 1e-5).powi(12000))).abs() < 1e-12);
        assert!((p - 0.1131).abs() < 1e-3);
        // Short frames are lost less often.
        assert!(loss_probability(Some(LossConfig::BitErrorRate(1e-5)), 40) < 0.004);
        assert_eq!(loss_probability(None, 1500), 0.0);
    }

    fn rate(model: LossConfig, len: usize, n: usize, seed: u64) -> f64 {
        let mut rng = Rng::new(seed);
        (0..n)
            .filter(|_| is_lost(Some(model), len, &mut rng))
            .count() as f64
            / n as f64
    }

    #[test]
    fn packet_loss_rate_statistics() {
        // 100k draws: 3 sigma of a binomial with p=0.01 is ~0.0009.
        let r = rate(LossConfig::PacketRate(0.01), 1500, 100_000, 7);
        assert!((r - 0.01).abs() < 0.001, "{r}");
        // Fixed seed, fixed outcome.
        assert_eq!(r, rate(LossConfig::PacketRate(0.01), 1500, 100_000, 7));
        assert_eq!(rate(LossConfig::PacketRate(0.0), 1500, 10_000, 7), 0.0);
    }

    #[test]
    fn bit_error_rate_statistics() {
        let expect = loss_probability(Some(LossConfig::BitErrorRate(1e-5)), 1500);
        let r = rate(LossConfig::BitErrorRate(1e-5), 1500, 100_000, 3);
        assert!((r - expect).abs() < 0.003, "{r} vs {expect}");
        let r = rate(LossConfig::BitErrorRate(1e-5), 60, 100_000, 3);
        assert!((r - 0.0048).abs() < 0.001, "{r}");
    }
}
