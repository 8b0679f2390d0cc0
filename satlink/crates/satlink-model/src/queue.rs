//! Queues behind a small trait (enqueue, dequeue, size in bytes and packets), chosen by
//! the typed configuration ([`crate::Discipline`]): drop-tail, drop-head, CoDel
//! ([`crate::codel`]) and FQ-CoDel ([`crate::fq_codel`]). Their bound comes from
//! [`crate::QueueLimit`] (bytes, packets, or milliseconds at the direction's rate),
//! resolved into a [`Bound`] at the rate in force.
//!
//! Every call takes `now`: a discipline that decides by time (CoDel) is told the time
//! of the dequeue, which the direction computes (the start of serialization), so it
//! decides the same whenever the model is called. A discipline hands every packet it
//! drops back through `drops`, with the cause: none is lost or duplicated silently.

use std::collections::VecDeque;

use crate::drop_cause::DropCause;
use crate::Nanos;

/// A frame waiting in a queue.
#[derive(Debug)]
pub struct Packet<T> {
    /// IP packet length in bytes (what the rate and the byte bound count).
    pub len: usize,
    /// When it arrived at the queue.
    pub arrival: Nanos,
    /// The flow it belongs to ([`crate::flow::flow_hash`]); only FQ-CoDel looks at it.
    pub flow: u64,
    pub payload: T,
}

/// A packet the discipline dropped, and why.
#[derive(Debug)]
pub struct Dropped<T> {
    pub packet: Packet<T>,
    pub cause: DropCause,
}

/// The bound of a queue at the rate in force: at most `bytes` bytes and at most
/// `packets` packets waiting (`usize::MAX` = no bound).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bound {
    pub bytes: usize,
    pub packets: usize,
}

impl Bound {
    pub const NONE: Bound = Bound {
        bytes: usize::MAX,
        packets: usize::MAX,
    };

    pub fn bytes(bytes: usize) -> Self {
        Bound {
            bytes,
            packets: usize::MAX,
        }
    }

    pub const fn packets(packets: usize) -> Self {
        Bound {
            bytes: usize::MAX,
            packets,
        }
    }

    /// True when `bytes` in `packets` packets are above the bound.
    pub fn exceeded(&self, bytes: usize, packets: usize) -> bool {
        bytes > self.bytes || packets > self.packets
    }
}

/// A queue discipline.
pub trait Queue<T>: Send {
    /// Take the packet arriving at `now`; what the discipline drops (the packet itself
    /// or others) goes to `drops`.
    fn enqueue(&mut self, now: Nanos, p: Packet<T>, drops: &mut Vec<Dropped<T>>);
    /// The packet to send at `now` (the start of its serialization); what the
    /// discipline drops on the way goes to `drops`. None when nothing is left.
    fn dequeue(&mut self, now: Nanos, drops: &mut Vec<Dropped<T>>) -> Option<Packet<T>>;
    /// The earliest arrival among the waiting packets.
    fn oldest_arrival(&self) -> Option<Nanos>;
    /// The packet [`Queue::dequeue`] returns next if the discipline drops nothing, when
    /// the discipline can tell before the time of the dequeue (FIFO order); None for a
    /// scheduler (FQ-CoDel), whose choice the direction learns at the dequeue.
    fn peek(&self) -> Option<&Packet<T>>;
    fn bytes(&self) -> usize;
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Change the bound (run-time reconfiguration, or a bound in ms whose rate
    /// changed); packets already queued stay.
    fn set_bound(&mut self, bound: Bound);
    /// Every waiting packet, none dropped (to move them to another discipline).
    fn take_all(&mut self) -> Vec<Packet<T>>;
}

/// A FIFO of packets with its byte count: the storage every discipline builds on.
#[derive(Debug)]
pub struct Fifo<T> {
    q: VecDeque<Packet<T>>,
    bytes: usize,
}

impl<T> Default for Fifo<T> {
    fn default() -> Self {
        Fifo {
            q: VecDeque::new(),
            bytes: 0,
        }
    }
}

impl<T> Fifo<T> {
    pub fn push(&mut self, p: Packet<T>) {
        self.bytes += p.len;
        self.q.push_back(p);
    }

    pub fn pop(&mut self) -> Option<Packet<T>> {
        let p = self.q.pop_front()?;
        self.bytes -= p.len;
        Some(p)
    }

    pub fn front(&self) -> Option<&Packet<T>> {
        self.q.front()
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn len(&self) -> usize {
        self.q.len()
    }

    pub fn is_empty(&self) -> bool {
        self.q.is_empty()
    }

    pub fn take_all(&mut self) -> Vec<Packet<T>> {
        self.bytes = 0;
        self.q.drain(..).collect()
    }

    /// Tail drop: queue `p` unless that would take the FIFO above `bound`, in which case
    /// `p` goes to `drops` (queue full).
    pub fn push_within(&mut self, bound: Bound, p: Packet<T>, drops: &mut Vec<Dropped<T>>) {
        if bound.exceeded(self.bytes.saturating_add(p.len), self.q.len() + 1) {
            drops.push(Dropped {
                packet: p,
                cause: DropCause::QueueFull,
            });
        } else {
            self.push(p);
        }
    }
}

/// The [`Queue`] methods of a discipline that keeps its packets in one FIFO `q` in
/// arrival order under one `bound`: what waits, what comes next and the bound are read
/// from the FIFO alike in every such discipline.
macro_rules! one_fifo_views {
    () => {
        fn oldest_arrival(&self) -> Option<Nanos> {
            self.q.front().map(|p| p.arrival)
        }

        fn peek(&self) -> Option<&Packet<T>> {
            self.q.front()
        }

        fn bytes(&self) -> usize {
            self.q.bytes()
        }

        fn len(&self) -> usize {
            self.q.len()
        }

        fn set_bound(&mut self, bound: Bound) {
            self.bound = bound;
        }
    };
}
pub(crate) use one_fifo_views;

/// The way out of a discipline that keeps no state beyond its FIFO (DropTail, DropHead):
/// the oldest packet first, and its views of the FIFO.
macro_rules! stateless_fifo_out {
    () => {
        fn dequeue(&mut self, _now: Nanos, _drops: &mut Vec<Dropped<T>>) -> Option<Packet<T>> {
            self.q.pop()
        }

        one_fifo_views!();

        fn take_all(&mut self) -> Vec<Packet<T>> {
            self.q.take_all()
        }
    };
}

/// Drop-tail: refuse a packet that would take the queue above its bound.
#[derive(Debug)]
pub struct DropTail<T> {
    q: Fifo<T>,
    bound: Bound,
}

impl<T> DropTail<T> {
    pub fn new(bound: Bound) -> Self {
        DropTail {
            q: Fifo::default(),
            bound,
        }
    }
}

impl<T: Send> Queue<T> for DropTail<T> {
    fn enqueue(&mut self, _now: Nanos, p: Packet<T>, drops: &mut Vec<Dropped<T>>) {
        self.q.push_within(self.bound, p, drops);
    }

    stateless_fifo_out!();
}

/// Drop-head (drop-front): take every arriving packet and drop the oldest ones until
/// the queue is within its bound again, so what waits is the freshest data. A packet
/// larger than the whole bound is refused at the tail (it could never fit).
#[derive(Debug)]
pub struct DropHead<T> {
    q: Fifo<T>,
    bound: Bound,
}

impl<T> DropHead<T> {
    pub fn new(bound: Bound) -> Self {
        DropHead {
            q: Fifo::default(),
            bound,
        }
    }
}

impl<T: Send> Queue<T> for DropHead<T> {
    fn enqueue(&mut self, _now: Nanos, p: Packet<T>, drops: &mut Vec<Dropped<T>>) {
        if self.bound.exceeded(p.len, 1) {
            drops.push(Dropped {
                packet: p,
                cause: DropCause::QueueFull,
            });
            return;
        }
        self.q.push(p);
        while self.bound.exceeded(self.q.bytes(), self.q.len()) {
            let packet = self.q.pop().expect("over the bound, so not empty");
            drops.push(Dropped {
                packet,
                cause: DropCause::QueueHead,
            });
        }
    }

    stateless_fifo_out!();
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn pkt(len: usize, arrival: Nanos, id: u32) -> Packet<u32> {
        Packet {
            len,
            arrival,
            flow: 0,
            payload: id,
        }
    }

    fn ids(drops: &[Dropped<u32>]) -> Vec<(u32, DropCause)> {
        drops.iter().map(|d| (d.packet.payload, d.cause)).collect()
    }

    #[test]
    fn drop_tail_bounds_bytes() {
        let mut q: DropTail<u32> = DropTail::new(Bound::bytes(3000));
        let mut drops = vec![];
        q.enqueue(0, pkt(1500, 0, 0), &mut drops);
        q.enqueue(0, pkt(1500, 0, 1), &mut drops);
        q.enqueue(0, pkt(1, 0, 2), &mut drops);
        assert_eq!(ids(&drops), vec![(2, DropCause::QueueFull)]);
        assert_eq!((q.len(), q.bytes()), (2, 3000));
        assert_eq!(q.dequeue(0, &mut drops).unwrap().payload, 0);
        q.enqueue(0, pkt(100, 0, 3), &mut drops);
        assert_eq!((q.len(), q.bytes()), (2, 1600));
        q.set_bound(Bound::bytes(1000));
        q.enqueue(0, pkt(100, 0, 4), &mut drops);
        assert_eq!(drops.len(), 2);
    }

    #[test]
    fn drop_tail_bounds_packets() {
        let mut q: DropTail<u32> = DropTail::new(Bound::packets(2));
        let mut drops = vec![];
        for i in 0..3 {
            q.enqueue(0, pkt(100, 0, i), &mut drops);
        }
        assert_eq!(ids(&drops), vec![(2, DropCause::QueueFull)]);
        assert_eq!(q.len(), 2);
    }

    #[test]
    fn drop_head_drops_the_oldest_packet() {
        let mut q: DropHead<u32> = DropHead::new(Bound::packets(3));
        let mut drops = vec![];
        for i in 0..5 {
            q.enqueue(i as Nanos, pkt(100, i as Nanos, i), &mut drops);
        }
        // The two oldest made room for the two newest.
        assert_eq!(
            ids(&drops),
            vec![(0, DropCause::QueueHead), (1, DropCause::QueueHead)]
        );
        let left: Vec<u32> = std::iter::from_fn(|| q.dequeue(9, &mut drops))
            .map(|p| p.payload)
            .collect();
        assert_eq!(left, vec![2, 3, 4]);
    }

    #[test]
    fn drop_head_in_bytes_drops_as_many_as_the_new_packet_needs() {
        let mut q: DropHead<u32> = DropHead::new(Bound::bytes(3000));
        let mut drops = vec![];
        for i in 0..3 {
            q.enqueue(0, pkt(1000, 0, i), &mut drops);
        }
        q.enqueue(0, pkt(1500, 0, 3), &mut drops);
        assert_eq!(
            ids(&drops),
            vec![(0, DropCause::QueueHead), (1, DropCause::QueueHead)]
        );
        assert_eq!((q.len(), q.bytes()), (2, 2500));
        // Larger than the whole bound: refused at the tail, nothing else dropped.
        q.enqueue(0, pkt(3001, 0, 4), &mut drops);
        assert_eq!(
            drops.last().map(|d| (d.packet.payload, d.cause)),
            Some((4, DropCause::QueueFull))
        );
        assert_eq!(q.len(), 2);
    }
}
