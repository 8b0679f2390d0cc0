//! The HTTP/2 side of a scheduler that orders (sched.rs): the connection's [`Queue`]
//! behind a lock, and the response bodies waiting for their turn.

use std::collections::HashMap;
use std::sync::Mutex;
use std::task::{Context, Poll, Waker};

use crate::sched::{Priority, Queue, Scheduler};

#[derive(Debug)]
struct Inner {
    queue: Queue,
    waiting: HashMap<u64, Waker>,
}

/// One HTTP/2 connection's queue of sending responses.
#[derive(Debug)]
pub struct Gate {
    inner: Mutex<Inner>,
}

impl Gate {
    pub fn new(scheduler: Scheduler) -> Self {
        Self {
            inner: Mutex::new(Inner {
                queue: Queue::new(scheduler),
                waiting: HashMap::new(),
            }),
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut Queue) -> T) -> T {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let out = f(&mut g.queue);
        // Only the head may go on: wake it if it waits.
        if let Some(head) = g.queue.head() {
            if let Some(w) = g.waiting.remove(&head) {
                w.wake();
            }
        }
        out
    }

    pub fn open(&self, stream: u64, priority: Priority) {
        self.with(|q| q.open(stream, priority));
    }

    pub fn reprioritize(&self, stream: u64, priority: Priority) {
        self.with(|q| q.reprioritize(stream, priority));
    }

    pub fn close(&self, stream: u64) {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        g.waiting.remove(&stream);
        drop(g);
        self.with(|q| q.close(stream));
    }

    pub fn served(&self, stream: u64) {
        self.with(|q| q.served(stream));
    }

    /// Ready when `stream` is the head (or not in the queue); else it waits to be woken.
    pub fn poll_turn(&self, stream: u64, cx: &mut Context<'_>) -> Poll<()> {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        match g.queue.head() {
            Some(head) if head != stream && g.queue.contains(stream) => {
                g.waiting.insert(stream, cx.waker().clone());
                Poll::Pending
            }
            _ => Poll::Ready(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::Wake;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_waiting_body_is_woken_when_its_turn_comes() {
        let gate = Gate::new(Scheduler::Sequential);
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        gate.open(1, Priority::default());
        gate.open(3, Priority::default());
        assert!(gate.poll_turn(3, &mut cx).is_pending());
        assert!(gate.poll_turn(1, &mut cx).is_ready());
        gate.served(1);
        assert_eq!(count.0.load(Ordering::SeqCst), 0);
        gate.close(1);
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        assert!(gate.poll_turn(3, &mut cx).is_ready());
        assert!(gate.poll_turn(99, &mut cx).is_ready());
    }
}
