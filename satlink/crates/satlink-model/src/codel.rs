//! CoDel, RFC 8289: drop at dequeue when the sojourn time of packets has stayed above
//! `target` for at least `interval`; while it stays above, drop again after
//! `interval / sqrt(count)` (the control law), and re-entering the dropping state soon
//! after leaving it starts from the previous drop rate (the count-reuse rule, §5.6).
//!
//! The state machine follows the RFC's pseudocode (§5) line by line: `do_dequeue` is
//! its `dodequeue`, [`CodelState::dequeue`] its `dequeue`. The sojourn time is measured
//! per packet, from its arrival to the time of its dequeue.

use crate::dir_config::CodelConfig;
use crate::drop_cause::DropCause;
use crate::queue::{one_fifo_views, Bound, Dropped, Fifo, Packet, Queue};
use crate::Nanos;

/// The fixed parameters of one CoDel instance, in ns and bytes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CodelParams {
    pub target: Nanos,
    pub interval: Nanos,
    /// A queue holding at most this many bytes is never dropped from (RFC 8289 §4.4:
    /// one MTU-sized packet, so a link that only ever holds a packet keeps it).
    pub max_packet: usize,
}

impl CodelParams {
    pub fn of(c: &CodelConfig) -> Self {
        CodelParams {
            target: ms_to_ns(c.target_ms),
            interval: ms_to_ns(c.interval_ms),
            max_packet: 1500,
        }
    }
}

pub(crate) fn ms_to_ns(ms: f64) -> Nanos {
    (ms * 1e6).round() as Nanos
}

/// Where CoDel takes packets from: one FIFO (CoDel) or one flow's queue (FQ-CoDel).
pub trait Source<T> {
    fn pop(&mut self) -> Option<Packet<T>>;
    /// The bytes the whole queue still holds after the pop (the `bytes()` of RFC 8289
    /// §5.5; for FQ-CoDel the whole qdisc's backlog, as in Linux).
    fn backlog_bytes(&self) -> usize;
}

/// The per-queue state of RFC 8289 §5.
#[derive(Debug, Clone, Default)]
pub struct CodelState {
    /// Packets dropped since entering the dropping state.
    pub count: u32,
    lastcount: u32,
    pub dropping: bool,
    /// When the sojourn time will have been above target for an interval (0: not above).
    first_above_time: Nanos,
    /// When the next drop is due while dropping.
    pub drop_next: Nanos,
}

impl CodelState {
    /// `t + interval / sqrt(count)` (RFC 8289 §5.7).
    pub fn control_law(t: Nanos, interval: Nanos, count: u32) -> Nanos {
        t + (interval as f64 / (count.max(1) as f64).sqrt()) as Nanos
    }

    /// The RFC's `dodequeue`: the head packet and whether it may be dropped.
    fn do_dequeue<T>(
        &mut self,
        now: Nanos,
        p: &CodelParams,
        src: &mut impl Source<T>,
    ) -> (Option<Packet<T>>, bool) {
        let Some(packet) = src.pop() else {
            self.first_above_time = 0;
            return (None, false);
        };
        let sojourn = now.saturating_sub(packet.arrival);
        let mut ok_to_drop = false;
        if sojourn < p.target || src.backlog_bytes() <= p.max_packet {
            self.first_above_time = 0;
        } else if self.first_above_time == 0 {
            self.first_above_time = now + p.interval;
        } else if now >= self.first_above_time {
            ok_to_drop = true;
        }
        (Some(packet), ok_to_drop)
    }

    /// The RFC's `dequeue`: the packet to send at `now`; dropped ones go to `drops`
    /// with cause `codel`.
    pub fn dequeue<T>(
        &mut self,
        now: Nanos,
        p: &CodelParams,
        src: &mut impl Source<T>,
        drops: &mut Vec<Dropped<T>>,
    ) -> Option<Packet<T>> {
        let drop = |packet: Packet<T>, drops: &mut Vec<Dropped<T>>| {
            drops.push(Dropped {
                packet,
                cause: DropCause::Codel,
            })
        };
        let (mut packet, ok_to_drop) = self.do_dequeue(now, p, src);
        let Some(head) = packet.take() else {
            self.dropping = false;
            return None;
        };
        let mut head = Some(head);
        if self.dropping {
            if !ok_to_drop {
                // Sojourn time below target: leave the dropping state.
                self.dropping = false;
            }
            while self.dropping && now >= self.drop_next {
                drop(head.take().expect("a packet while dropping"), drops);
                self.count += 1;
                let (next, ok) = self.do_dequeue(now, p, src);
                head = next;
                if !ok || head.is_none() {
                    self.dropping = false;
                } else {
                    self.drop_next = Self::control_law(self.drop_next, p.interval, self.count);
                }
            }
        } else if ok_to_drop {
            drop(head.take().expect("ok_to_drop has a packet"), drops);
            let (next, _) = self.do_dequeue(now, p, src);
            head = next;
            self.dropping = true;
            // Count reuse (§5.6): re-entering soon after the last dropping state starts
            // near the drop rate that controlled the queue then.
            let delta = self.count.wrapping_sub(self.lastcount);
            self.count = 1;
            if delta > 1 && now.saturating_sub(self.drop_next) < 16 * p.interval {
                self.count = delta;
            }
            self.drop_next = Self::control_law(now, p.interval, self.count);
            self.lastcount = self.count;
        }
        head
    }
}

impl<T> Source<T> for Fifo<T> {
    fn pop(&mut self) -> Option<Packet<T>> {
        Fifo::pop(self)
    }
    fn backlog_bytes(&self) -> usize {
        self.bytes()
    }
}

/// CoDel on one FIFO, tail drop when the bound is reached (RFC 8289 §4.4 leaves the
/// bound to the implementation).
#[derive(Debug)]
pub struct Codel<T> {
    q: Fifo<T>,
    bound: Bound,
    params: CodelParams,
    state: CodelState,
}

impl<T> Codel<T> {
    pub fn new(bound: Bound, params: CodelParams) -> Self {
        Codel {
            q: Fifo::default(),
            bound,
            params,
            state: CodelState::default(),
        }
    }

    pub fn state(&self) -> &CodelState {
        &self.state
    }
}

impl<T: Send> Queue<T> for Codel<T> {
    fn enqueue(&mut self, _now: Nanos, p: Packet<T>, drops: &mut Vec<Dropped<T>>) {
        self.q.push_within(self.bound, p, drops);
    }

    fn dequeue(&mut self, now: Nanos, drops: &mut Vec<Dropped<T>>) -> Option<Packet<T>> {
        self.state.dequeue(now, &self.params, &mut self.q, drops)
    }

    one_fifo_views!();

    fn take_all(&mut self) -> Vec<Packet<T>> {
        self.state = CodelState::default();
        self.q.take_all()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::tests::pkt;
    use crate::MS;

    const RFC: CodelParams = CodelParams {
        target: 5 * MS,
        interval: 100 * MS,
        max_packet: 1500,
    };

    fn codel() -> Codel<u32> {
        Codel::new(Bound::NONE, RFC)
    }

    /// A standing queue: before each dequeue ten 1500-byte packets wait (more than
    /// max_packet stays behind the head even after drops), each dequeued `sojourn`
    /// after its arrival (a drop brings the ones behind forward by `gap`); one dequeue
    /// every `gap` from `from` to `to`. Returns the drop times.
    fn standing_queue(
        q: &mut Codel<u32>,
        from: Nanos,
        to: Nanos,
        gap: Nanos,
        sojourn: Nanos,
    ) -> Vec<Nanos> {
        let mut drop_times = vec![];
        let mut t = from;
        while t < to {
            while q.len() < 10 {
                let arrival = t + q.len() as Nanos * gap - sojourn;
                q.enqueue(arrival, pkt(1500, arrival, 0), &mut vec![]);
            }
            let mut drops = vec![];
            assert!(q.dequeue(t, &mut drops).is_some());
            drop_times.extend(drops.iter().map(|_| t));
            t += gap;
        }
        drop_times
    }

    #[test]
    fn codel_does_not_drop_when_sojourn_below_target() {
        let mut q = codel();
        let drops = standing_queue(&mut q, 1_000 * MS, 10_000 * MS, MS, 4 * MS);
        assert!(drops.is_empty(), "{drops:?}");
        assert!(!q.state().dropping);
    }

    #[test]
    fn codel_first_drop_comes_one_interval_after_sojourn_exceeds_target() {
        let mut q = codel();
        let drops = standing_queue(&mut q, 1_000 * MS, 1_300 * MS, MS, 6 * MS);
        // Above target from the first dequeue at 1000 ms: first drop one interval
        // later, not before.
        assert_eq!(drops.first(), Some(&(1_100 * MS)));
    }

    #[test]
    fn codel_does_not_drop_a_queue_of_one_mtu() {
        // A single packet waiting, however long: bytes() <= max_packet.
        let mut q = codel();
        let mut drops = vec![];
        for i in 0..1000u64 {
            let t = i * 10 * MS;
            q.enqueue(t, pkt(1500, t, i as u32), &mut drops);
            assert!(q.dequeue(t + 50 * MS, &mut drops).is_some());
        }
        assert!(drops.is_empty());
    }

    #[test]
    fn codel_drop_interval_shrinks_as_inverse_sqrt_of_count() {
        let mut q = codel();
        let drops = standing_queue(&mut q, 1_000 * MS, 3_000 * MS, 100_000, 50 * MS);
        assert!(drops.len() > 10, "{}", drops.len());
        // Gaps between drops: interval / sqrt(count), count = 1, 2, 3, ... (to the
        // 0.1 ms the dequeues are spaced).
        for (k, w) in drops.windows(2).take(10).enumerate() {
            let want = 100.0 / ((k + 1) as f64).sqrt();
            let got = (w[1] - w[0]) as f64 / 1e6;
            assert!(
                (got - want).abs() <= 0.11,
                "gap {k}: {got} ms, want {want} ms"
            );
        }
    }

    /// Leave the dropping state at `t`: drain, then one packet that waited 1 ms
    /// (below target) with two behind it.
    fn calm_down(q: &mut Codel<u32>, t: Nanos) {
        while q.dequeue(t, &mut vec![]).is_some() {}
        for i in 0..3 {
            q.enqueue(t, pkt(1500, t, i), &mut vec![]);
        }
        let mut drops = vec![];
        assert!(q.dequeue(t + MS, &mut drops).is_some());
        assert!(drops.is_empty());
        assert!(!q.state().dropping);
    }

    #[test]
    fn codel_leaves_dropping_state_when_sojourn_falls_below_target() {
        let mut q = codel();
        standing_queue(&mut q, 1_000 * MS, 1_500 * MS, MS, 50 * MS);
        assert!(q.state().dropping);
        calm_down(&mut q, 1_500 * MS);
    }

    #[test]
    fn codel_reuses_count_when_re_entering_dropping_state_soon() {
        let mut q = codel();
        standing_queue(&mut q, 1_000 * MS, 2_000 * MS, MS, 50 * MS);
        calm_down(&mut q, 2_000 * MS);
        let count_before = q.state().count;
        assert!(count_before > 3, "{count_before}");
        // Standing queue again, well within 16 intervals of the last drop: the new
        // dropping state starts from count - lastcount, not from 1.
        let drops = standing_queue(&mut q, 2_100 * MS, 2_205 * MS, MS, 50 * MS);
        assert_eq!(drops, vec![2_200 * MS]);
        assert_eq!(q.state().count, count_before - 1);

        // More than 16 intervals after the last drop, count starts again at 1.
        let mut fresh = codel();
        standing_queue(&mut fresh, 1_000 * MS, 2_000 * MS, MS, 50 * MS);
        calm_down(&mut fresh, 2_000 * MS);
        let drops = standing_queue(&mut fresh, 6_000 * MS, 6_105 * MS, MS, 50 * MS);
        assert_eq!(drops, vec![6_100 * MS]);
        assert_eq!(fresh.state().count, 1);
    }

    #[test]
    fn codel_drops_at_dequeue_and_loses_nothing_else() {
        let mut q = codel();
        let mut drops = vec![];
        let mut sent = 0;
        for i in 0..2000u32 {
            let t = i as Nanos * MS;
            // Arrivals at twice the dequeue rate: the queue grows.
            q.enqueue(t, pkt(1500, t, 2 * i), &mut drops);
            q.enqueue(t, pkt(1500, t, 2 * i + 1), &mut drops);
            assert!(drops.iter().all(|d| d.cause == DropCause::Codel));
            if q.dequeue(t, &mut drops).is_some() {
                sent += 1;
            }
        }
        assert!(!drops.is_empty());
        assert_eq!(sent + drops.len() + q.len(), 4000);
    }
}
