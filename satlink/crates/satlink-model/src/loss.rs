//! Loss models: a packet loss rate, a bit error rate turned into a frame loss
//! probability from the frame's length, or a Gilbert-Elliott two-state Markov chain
//! stepped once per frame (bursty loss).

use crate::dir_config::{GilbertElliott, LossConfig};
use crate::rng::Rng;

/// Probability that a frame of `len` bytes is lost; for Gilbert-Elliott, the long-run
/// (stationary) loss rate.
pub fn loss_probability(model: Option<LossConfig>, len: usize) -> f64 {
    match model {
        None => 0.0,
        Some(LossConfig::PacketRate(p)) => p,
        // 1 - (1 - ber)^(8 len), computed without cancellation for tiny ber.
        Some(LossConfig::BitErrorRate(ber)) => -f64::exp_m1((8 * len) as f64 * f64::ln_1p(-ber)),
        Some(LossConfig::GilbertElliott(g)) => {
            let leave = g.p_good_bad + g.p_bad_good;
            // A chain that never moves stays in the good state it starts in.
            let bad = if leave == 0.0 {
                0.0
            } else {
                g.p_good_bad / leave
            };
            (1.0 - bad) * g.loss_good + bad * g.loss_bad
        }
    }
}

/// Draw whether a frame of `len` bytes is lost (memoryless models only; the
/// Gilbert-Elliott chain needs a [`LossState`]).
pub fn is_lost(model: Option<LossConfig>, len: usize, rng: &mut Rng) -> bool {
    let p = match model {
        Some(LossConfig::GilbertElliott(g)) => g.loss_good,
        m => loss_probability(m, len),
    };
    p > 0.0 && rng.next_f64() < p
}

/// A direction's loss draws: the seeded generator and the Gilbert-Elliott state.
#[derive(Debug, Clone)]
pub struct LossState {
    rng: Rng,
    bad: bool,
}

impl LossState {
    pub fn new(seed: u64) -> Self {
        LossState {
            rng: Rng::new(seed),
            bad: false,
        }
    }

    /// True while the Gilbert-Elliott chain is in its bad state.
    pub fn is_bad(&self) -> bool {
        self.bad
    }

    /// Draw the fate of one frame of `len` bytes under `model`. With Gilbert-Elliott,
    /// the frame is lost with the current state's probability, then the chain moves
    /// once; the chain starts (and restarts whenever another model was in force) in
    /// the good state.
    pub fn is_lost(&mut self, model: Option<LossConfig>, len: usize) -> bool {
        match model {
            Some(LossConfig::GilbertElliott(g)) => self.gilbert_elliott(&g),
            m => {
                self.bad = false;
                is_lost(m, len, &mut self.rng)
            }
        }
    }

    fn gilbert_elliott(&mut self, g: &GilbertElliott) -> bool {
        let (p, leave) = if self.bad {
            (g.loss_bad, g.p_bad_good)
        } else {
            (g.loss_good, g.p_good_bad)
        };
        let lost = p > 0.0 && self.rng.next_f64() < p;
        if leave > 0.0 && self.rng.next_f64() < leave {
            self.bad = !self.bad;
        }
        lost
    }
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

    /// (loss rate, P(lost | previous lost), mean length of runs of losses).
    fn ge_run(g: GilbertElliott, n: usize, seed: u64) -> (f64, f64, f64, Vec<bool>) {
        let mut s = LossState::new(seed);
        let fates: Vec<bool> = (0..n)
            .map(|_| s.is_lost(Some(LossConfig::GilbertElliott(g)), 1500))
            .collect();
        let lost = fates.iter().filter(|&&l| l).count();
        let pairs = fates.windows(2).filter(|w| w[0]).count();
        let both = fates.windows(2).filter(|w| w[0] && w[1]).count();
        let runs = fates.windows(2).filter(|w| w[0] && !w[1]).count().max(1);
        (
            lost as f64 / n as f64,
            both as f64 / pairs as f64,
            lost as f64 / runs as f64,
            fates,
        )
    }

    #[test]
    fn gilbert_elliott_long_run_rate_and_bursts() {
        let g = GilbertElliott {
            p_good_bad: 0.01,
            p_bad_good: 0.3,
            loss_good: 0.0,
            loss_bad: 0.5,
        };
        // Stationary P(bad) = 0.01 / 0.31; loss = 0.5 P(bad) = 0.01613.
        let expect = loss_probability(Some(LossConfig::GilbertElliott(g)), 1500);
        assert!((expect - 0.5 * 0.01 / 0.31).abs() < 1e-12);
        let (rate, after_loss, run, fates) = ge_run(g, 1_000_000, 11);
        assert!((rate - expect).abs() < 0.1 * expect, "{rate} vs {expect}");
        // Bursty: after a loss the chain is still bad with 1 - p_bad_good = 0.7, so the
        // next frame is lost with 0.7 * 0.5 = 0.35, not with the mean 0.016.
        assert!((after_loss - 0.35).abs() < 0.02, "{after_loss}");
        // Runs of losses: geometric with continuation 0.35, mean 1 / 0.65 = 1.54.
        assert!((run - 1.0 / 0.65).abs() < 0.06, "{run}");
        // Seeded: the same seed gives the same frames, another seed others.
        assert_eq!(ge_run(g, 1_000_000, 11).3, fates);
        assert_ne!(ge_run(g, 1_000_000, 12).3, fates);
        // A packet-rate model with the same mean is not bursty.
        let mut rng = Rng::new(11);
        let bern: Vec<bool> = (0..1_000_000)
            .map(|_| is_lost(Some(LossConfig::PacketRate(expect)), 1500, &mut rng))
            .collect();
        let pairs = bern.windows(2).filter(|w| w[0]).count();
        let both = bern.windows(2).filter(|w| w[0] && w[1]).count();
        assert!((both as f64 / pairs as f64) < 0.03);
    }

    #[test]
    fn gilbert_elliott_loss_in_the_good_state_and_restart() {
        // Never leaves the good state: a plain packet loss rate of loss_good.
        let g = GilbertElliott {
            p_good_bad: 0.0,
            p_bad_good: 0.5,
            loss_good: 0.05,
            loss_bad: 0.9,
        };
        let (rate, ..) = ge_run(g, 200_000, 3);
        assert!((rate - 0.05).abs() < 0.003, "{rate}");
        assert_eq!(
            loss_probability(Some(LossConfig::GilbertElliott(g)), 1),
            0.05
        );
        // Another model in force puts the chain back into the good state.
        let sticky = LossConfig::GilbertElliott(GilbertElliott {
            p_good_bad: 0.999,
            p_bad_good: 0.0,
            loss_good: 0.0,
            loss_bad: 0.0,
        });
        let mut s = LossState::new(1);
        while !s.is_bad() {
            s.is_lost(Some(sticky), 100);
        }
        s.is_lost(None, 100);
        assert!(!s.is_bad());
    }
}
