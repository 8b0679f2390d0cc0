//! Queues behind a small trait (enqueue, dequeue, size in bytes and packets), chosen by
//! the typed configuration. Drop-tail is the one discipline today; its bound comes from
//! [`crate::QueueLimit`] (bytes, or milliseconds at the direction's rate).

use std::collections::VecDeque;

use crate::Nanos;

/// A frame waiting in a queue.
#[derive(Debug)]
pub struct Packet<T> {
    /// IP packet length in bytes (what the rate and the byte bound count).
    pub len: usize,
    /// When it arrived at the queue.
    pub arrival: Nanos,
    pub payload: T,
}

/// A queue discipline.
pub trait Queue<T>: Send {
    /// Accept the packet, or hand it back when the discipline drops it.
    fn enqueue(&mut self, p: Packet<T>) -> Result<(), Packet<T>>;
    fn dequeue(&mut self) -> Option<Packet<T>>;
    fn peek(&self) -> Option<&Packet<T>>;
    fn bytes(&self) -> usize;
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Change the bound (run-time reconfiguration); packets already queued stay.
    fn set_limit_bytes(&mut self, limit: usize);
}

/// Drop-tail: refuse a packet that would take the queue above `limit` bytes.
#[derive(Debug)]
pub struct DropTail<T> {
    q: VecDeque<Packet<T>>,
    bytes: usize,
    limit: usize,
}

impl<T> DropTail<T> {
    pub fn new(limit_bytes: usize) -> Self {
        DropTail {
            q: VecDeque::new(),
            bytes: 0,
            limit: limit_bytes,
        }
    }
}

impl<T: Send> Queue<T> for DropTail<T> {
    fn enqueue(&mut self, p: Packet<T>) -> Result<(), Packet<T>> {
        if self.bytes.saturating_add(p.len) > self.limit {
            return Err(p);
        }
        self.bytes += p.len;
        self.q.push_back(p);
        Ok(())
    }

    fn dequeue(&mut self) -> Option<Packet<T>> {
        let p = self.q.pop_front()?;
        self.bytes -= p.len;
        Some(p)
    }

    fn peek(&self) -> Option<&Packet<T>> {
        self.q.front()
    }

    fn bytes(&self) -> usize {
        self.bytes
    }

    fn len(&self) -> usize {
        self.q.len()
    }

    fn set_limit_bytes(&mut self, limit: usize) {
        self.limit = limit;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkt(len: usize) -> Packet<()> {
        Packet {
            len,
            arrival: 0,
            payload: (),
        }
    }

    #[test]
    fn drop_tail_bounds_bytes() {
        let mut q: DropTail<()> = DropTail::new(3000);
        assert!(q.enqueue(pkt(1500)).is_ok());
        assert!(q.enqueue(pkt(1500)).is_ok());
        assert!(q.enqueue(pkt(1)).is_err());
        assert_eq!((q.len(), q.bytes()), (2, 3000));
        assert_eq!(q.dequeue().unwrap().len, 1500);
        assert!(q.enqueue(pkt(100)).is_ok());
        assert_eq!((q.len(), q.bytes()), (2, 1600));
        q.set_limit_bytes(1000);
        assert!(q.enqueue(pkt(100)).is_err());
    }
}
