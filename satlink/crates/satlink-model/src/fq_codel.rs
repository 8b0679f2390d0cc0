//! FQ-CoDel, RFC 8290: packets are hashed by flow ([`crate::flow::flow_hash`]) into
//! `flows` queues, each with its own CoDel state ([`crate::codel`]); a deficit round
//! robin with a `quantum` of bytes serves them, new flows (a queue that was empty)
//! before old ones, so a sparse flow's packet goes out ahead of a bulk flow's backlog.
//!
//! As RFC 8290 §4: on enqueue a flow that is on neither list joins the tail of the new
//! list with a full quantum; above the bound the head packet of the flow with the most
//! bytes is dropped (§4.1, one packet at a time: Linux drops a batch). On dequeue the
//! first flow of the new list (else of the old list) with no deficit left gets a quantum
//! more and moves to the tail of the old list; otherwise CoDel dequeues from it; a flow
//! found empty moves from the new list to the old list (so it cannot come back as new
//! at once and starve the old ones), and leaves the old list.

use std::collections::VecDeque;

use crate::codel::{CodelParams, CodelState, Source};
use crate::dir_config::FqCodelConfig;
use crate::drop_cause::DropCause;
use crate::queue::{Bound, Dropped, Fifo, Packet, Queue};
use crate::Nanos;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum List {
    None,
    New,
    Old,
}

#[derive(Debug)]
struct FlowQueue<T> {
    q: Fifo<T>,
    codel: CodelState,
    deficit: i64,
    list: List,
}

/// One flow's queue as CoDel's source: pops keep the totals of the whole queue right.
struct FlowSource<'a, T> {
    q: &'a mut Fifo<T>,
    bytes: &'a mut usize,
    packets: &'a mut usize,
}

impl<T> Source<T> for FlowSource<'_, T> {
    fn pop(&mut self) -> Option<Packet<T>> {
        let p = self.q.pop()?;
        *self.bytes -= p.len;
        *self.packets -= 1;
        Some(p)
    }
    fn backlog_bytes(&self) -> usize {
        *self.bytes
    }
}

#[derive(Debug)]
pub struct FqCodel<T> {
    flows: Vec<FlowQueue<T>>,
    new_flows: VecDeque<usize>,
    old_flows: VecDeque<usize>,
    bytes: usize,
    packets: usize,
    bound: Bound,
    params: CodelParams,
    quantum: i64,
}

impl<T> FqCodel<T> {
    pub fn new(bound: Bound, cfg: &FqCodelConfig) -> Self {
        FqCodel {
            flows: (0..cfg.flows)
                .map(|_| FlowQueue {
                    q: Fifo::default(),
                    codel: CodelState::default(),
                    deficit: 0,
                    list: List::None,
                })
                .collect(),
            new_flows: VecDeque::new(),
            old_flows: VecDeque::new(),
            bytes: 0,
            packets: 0,
            bound,
            params: CodelParams {
                target: crate::codel::ms_to_ns(cfg.target_ms),
                interval: crate::codel::ms_to_ns(cfg.interval_ms),
                max_packet: 1500,
            },
            quantum: cfg.quantum as i64,
        }
    }

    /// The flow queue a flow hash goes to.
    pub fn queue_of(&self, flow: u64) -> usize {
        (flow % self.flows.len() as u64) as usize
    }

    /// Drop the head packet of the flow queue holding the most bytes.
    fn drop_from_fattest(&mut self, drops: &mut Vec<Dropped<T>>) {
        let fattest = (0..self.flows.len())
            .max_by_key(|&i| self.flows[i].q.bytes())
            .expect("at least one flow queue");
        let packet = self.flows[fattest]
            .q
            .pop()
            .expect("over the bound: not empty");
        self.bytes -= packet.len;
        self.packets -= 1;
        drops.push(Dropped {
            packet,
            cause: DropCause::FqOverflow,
        });
    }
}

impl<T: Send> Queue<T> for FqCodel<T> {
    fn enqueue(&mut self, _now: Nanos, p: Packet<T>, drops: &mut Vec<Dropped<T>>) {
        let i = self.queue_of(p.flow);
        self.bytes += p.len;
        self.packets += 1;
        let f = &mut self.flows[i];
        f.q.push(p);
        if f.list == List::None {
            f.list = List::New;
            f.deficit = self.quantum;
            self.new_flows.push_back(i);
        }
        while self.bound.exceeded(self.bytes, self.packets) {
            self.drop_from_fattest(drops);
        }
    }

    fn dequeue(&mut self, now: Nanos, drops: &mut Vec<Dropped<T>>) -> Option<Packet<T>> {
        loop {
            let (from_new, i) = match (self.new_flows.front(), self.old_flows.front()) {
                (Some(&i), _) => (true, i),
                (None, Some(&i)) => (false, i),
                (None, None) => return None,
            };
            let list = if from_new {
                &mut self.new_flows
            } else {
                &mut self.old_flows
            };
            let f = &mut self.flows[i];
            if f.deficit <= 0 {
                f.deficit += self.quantum;
                list.pop_front();
                self.old_flows.push_back(i);
                f.list = List::Old;
                continue;
            }
            let mut src = FlowSource {
                q: &mut f.q,
                bytes: &mut self.bytes,
                packets: &mut self.packets,
            };
            match f.codel.dequeue(now, &self.params, &mut src, drops) {
                Some(p) => {
                    f.deficit -= p.len as i64;
                    return Some(p);
                }
                None => {
                    list.pop_front();
                    if from_new {
                        self.old_flows.push_back(i);
                        f.list = List::Old;
                    } else {
                        f.list = List::None;
                    }
                }
            }
        }
    }

    fn oldest_arrival(&self) -> Option<Nanos> {
        // Only flows on a list hold packets.
        self.new_flows
            .iter()
            .chain(self.old_flows.iter())
            .filter_map(|&i| self.flows[i].q.front().map(|p| p.arrival))
            .min()
    }

    fn peek(&self) -> Option<&Packet<T>> {
        None
    }

    fn bytes(&self) -> usize {
        self.bytes
    }

    fn len(&self) -> usize {
        self.packets
    }

    fn set_bound(&mut self, bound: Bound) {
        self.bound = bound;
    }

    fn take_all(&mut self) -> Vec<Packet<T>> {
        self.new_flows.clear();
        self.old_flows.clear();
        (self.bytes, self.packets) = (0, 0);
        self.flows
            .iter_mut()
            .flat_map(|f| {
                (f.codel, f.deficit, f.list) = (CodelState::default(), 0, List::None);
                f.q.take_all()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MS;

    fn fq(bound: Bound) -> FqCodel<(u64, u32)> {
        FqCodel::new(bound, &FqCodelConfig::default())
    }

    fn pkt(flow: u64, seq: u32, len: usize, t: Nanos) -> Packet<(u64, u32)> {
        Packet {
            len,
            arrival: t,
            flow,
            payload: (flow, seq),
        }
    }

    #[test]
    fn fq_codel_rfc_defaults() {
        let c = FqCodelConfig::default();
        assert_eq!(
            (c.flows, c.quantum, c.target_ms, c.interval_ms),
            (1024, 1514, 5.0, 100.0)
        );
    }

    #[test]
    fn fq_codel_sparse_flow_is_served_before_bulk_flow() {
        let mut q = fq(Bound::NONE);
        let mut drops = vec![];
        for s in 0..100 {
            q.enqueue(0, pkt(1, s, 1500, 0), &mut drops);
        }
        for _ in 0..5 {
            assert_eq!(q.dequeue(MS, &mut drops).unwrap().payload.0, 1);
        }
        // A sparse flow's packet arrives behind 95 bulk packets: it goes next.
        q.enqueue(2 * MS, pkt(2, 0, 100, 2 * MS), &mut drops);
        assert_eq!(q.dequeue(2 * MS, &mut drops).unwrap().payload, (2, 0));
        assert_eq!(q.dequeue(2 * MS, &mut drops).unwrap().payload.0, 1);
        assert!(drops.is_empty());
    }

    #[test]
    fn fq_codel_drr_shares_bytes_equally_between_bulk_flows() {
        let mut q = fq(Bound::NONE);
        let mut drops = vec![];
        for s in 0..1000 {
            q.enqueue(0, pkt(1, s, 1500, 0), &mut drops);
            q.enqueue(0, pkt(2, s, 300, 0), &mut drops);
            q.enqueue(0, pkt(2, 1000 + s, 300, 0), &mut drops);
        }
        let mut bytes = [0usize; 3];
        // Dequeue 300 KB (both flows stay backlogged); the time stays below target.
        let mut served = 0;
        while served < 300_000 {
            let p = q.dequeue(MS, &mut drops).unwrap();
            bytes[p.payload.0 as usize] += p.len;
            served += p.len;
        }
        let (a, b) = (bytes[1] as f64, bytes[2] as f64);
        assert!((a - b).abs() <= 1514.0 + 1500.0, "{a} vs {b}");
        assert!(drops.is_empty());
    }

    #[test]
    fn fq_codel_overlimit_drops_from_the_fattest_flow() {
        let mut q = fq(Bound::packets(10));
        let mut drops = vec![];
        for s in 0..7 {
            q.enqueue(0, pkt(1, s, 1500, 0), &mut drops);
        }
        for s in 0..3 {
            q.enqueue(0, pkt(2, s, 100, 0), &mut drops);
        }
        assert!(drops.is_empty());
        // The 11th packet is the small flow's, yet the fat flow loses its head.
        q.enqueue(0, pkt(2, 3, 100, 0), &mut drops);
        assert_eq!(drops.len(), 1);
        assert_eq!(drops[0].packet.payload, (1, 0));
        assert_eq!(drops[0].cause, DropCause::FqOverflow);
        assert_eq!((q.len(), q.bytes()), (10, 6 * 1500 + 4 * 100));
    }

    #[test]
    fn fq_codel_runs_codel_per_flow() {
        // A bulk flow's standing queue is dropped by its CoDel; a sparse flow's
        // packets, dequeued before they wait, never are.
        let mut q = fq(Bound::NONE);
        let mut drops = vec![];
        let mut seq = 0;
        let mut sparse_sent = 0;
        for step in 0..3000u64 {
            let t = step * MS;
            // Bulk: two arrivals per dequeue. Sparse: one packet every 50 ms.
            for _ in 0..2 {
                q.enqueue(t, pkt(1, seq, 1500, t), &mut drops);
                seq += 1;
            }
            if step % 50 == 0 {
                q.enqueue(t, pkt(2, step as u32, 100, t), &mut drops);
            }
            if let Some(p) = q.dequeue(t, &mut drops) {
                if p.payload.0 == 2 {
                    // Behind at most the bulk packet its quantum still allowed.
                    assert!(
                        t - p.arrival <= 2 * MS,
                        "sparse packet waited {}",
                        t - p.arrival
                    );
                    sparse_sent += 1;
                }
            }
        }
        assert_eq!(sparse_sent, 60);
        assert!(!drops.is_empty());
        assert!(drops
            .iter()
            .all(|d| d.cause == DropCause::Codel && d.packet.payload.0 == 1));
    }

    #[test]
    fn fq_codel_loses_nothing_it_does_not_drop() {
        let mut q = fq(Bound {
            bytes: 200_000,
            packets: 100,
        });
        let mut drops = vec![];
        let mut out = vec![];
        let mut n = 0;
        for step in 0..5000u64 {
            let t = step * 100_000;
            for f in 0..(step % 7) {
                q.enqueue(
                    t,
                    pkt(f * 977 + step % 3, n, 200 + (n as usize % 1300), t),
                    &mut drops,
                );
                n += 1;
            }
            if let Some(p) = q.dequeue(t, &mut drops) {
                out.push(p.payload.1);
            }
        }
        while let Some(p) = q.dequeue(600 * MS, &mut drops) {
            out.push(p.payload.1);
        }
        assert!(q.is_empty() && q.bytes() == 0);
        let mut seen: Vec<u32> = drops.iter().map(|d| d.packet.payload.1).collect();
        seen.extend(out);
        // Every packet was sent or dropped, exactly once.
        seen.sort();
        assert_eq!(seen, (0..n).collect::<Vec<_>>());
    }
}
