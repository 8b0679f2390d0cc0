//! The HTTP/2 side of a scheduler that orders (sched.rs): the connection's [`Queue`]
//! behind a lock, the response bodies waiting for their turn, and the timer that takes
//! the turn from a response whose end is never written (sched::RELEASE_AFTER).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use crate::sched::{Priority, Queue, Scheduler};
use crate::stats::Counters;

#[derive(Debug)]
struct Inner {
    queue: Queue,
    waiting: HashMap<u64, Waker>,
    /// A task waits for the next finishing response's time to run out.
    timer: bool,
}

/// One HTTP/2 connection's queue of sending responses.
#[derive(Debug)]
pub struct Gate {
    inner: Mutex<Inner>,
    /// Where a response that lost its turn to the timer is noted (its exchange).
    counters: Option<Arc<Counters>>,
}

impl Gate {
    /// `counters`: the connection's, to note in its exchanges a turn the timer took.
    pub fn new(scheduler: Scheduler, counters: Option<Arc<Counters>>) -> Self {
        Self::with_queue(Queue::new(scheduler), counters)
    }

    /// A gate over `queue` (a test's, with a shorter release time).
    pub fn with_queue(queue: Queue, counters: Option<Arc<Counters>>) -> Self {
        Self {
            inner: Mutex::new(Inner {
                queue,
                waiting: HashMap::new(),
                timer: false,
            }),
            counters,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn with<T>(&self, f: impl FnOnce(&mut Queue) -> T) -> T {
        let mut g = self.lock();
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
        self.lock().waiting.remove(&stream);
        self.with(|q| q.close(stream));
    }

    pub fn served(&self, stream: u64) {
        self.with(|q| q.served(stream));
    }

    /// `stream` has handed its last bytes to h2: it keeps its turn until its END_STREAM
    /// frame or a reset is written (then [`Gate::close`]), or until the queue's release
    /// time has passed with none of its frames written; a task on the current tokio
    /// runtime watches that time (none outside a runtime: then only a close releases).
    pub fn finishing(self: &Arc<Self>, stream: u64) {
        let start = {
            let mut g = self.lock();
            g.queue.finishing(stream, Instant::now());
            !std::mem::replace(&mut g.timer, true)
        };
        if start {
            match tokio::runtime::Handle::try_current() {
                Ok(rt) => drop(rt.spawn(release_overdue(Arc::downgrade(self)))),
                Err(_) => self.lock().timer = false,
            }
        }
    }

    /// A frame of `stream` was written.
    pub fn progressed(&self, stream: u64) {
        self.lock().queue.progressed(stream, Instant::now());
    }

    /// Ready when `stream` is the head (or not in the queue); else it waits to be woken.
    pub fn poll_turn(&self, stream: u64, cx: &mut Context<'_>) -> Poll<()> {
        let mut g = self.lock();
        match g.queue.head() {
            Some(head) if head != stream && g.queue.contains(stream) => {
                g.waiting.insert(stream, cx.waker().clone());
                Poll::Pending
            }
            _ => Poll::Ready(()),
        }
    }
}

/// Until no response is finishing: sleeps to the earliest release time, then takes the
/// turn from the responses whose time is up (and wakes the next). Ends with its gate.
async fn release_overdue(gate: Weak<Gate>) {
    loop {
        let next = {
            let Some(g) = gate.upgrade() else { return };
            let mut inner = g.lock();
            match inner.queue.next_release() {
                Some(t) => t,
                None => {
                    inner.timer = false;
                    return;
                }
            }
        };
        let wait = next.saturating_duration_since(Instant::now());
        tokio::time::sleep(wait.max(Duration::from_millis(1))).await;
        let Some(g) = gate.upgrade() else { return };
        let released = g.with(|q| q.release_overdue(Instant::now()));
        for stream in released {
            tracing::warn!("HTTP/2 stream {stream}: its end was not written in time, the next response goes");
            g.lock().waiting.remove(&stream);
            if let Some(c) = &g.counters {
                c.exchanges.turn_released_unwritten(stream);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Wake;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_waiting_body_is_woken_when_its_turn_comes() {
        let gate = Gate::new(Scheduler::Sequential, None);
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

    /// Sequential, stream 1 finishing and its end never written: stream 3 waits, and
    /// goes once the release time has passed with nothing of 1 written; the exchange of
    /// stream 1 says so.
    #[tokio::test]
    async fn a_response_whose_end_is_never_written_does_not_stall_the_connection() {
        let after = Duration::from_millis(200);
        let counters = Arc::new(Counters::default());
        counters.exchanges.h2_headers(1, None);
        counters.exchanges.h2_headers(3, None);
        let queue = Queue::new(Scheduler::Sequential).release_after(after);
        let gate = Arc::new(Gate::with_queue(queue, Some(counters.clone())));
        gate.open(1, Priority::default());
        gate.open(3, Priority::default());
        let started = Instant::now();
        gate.finishing(1);
        // A frame of 1 written half-way pushes its time back.
        tokio::time::sleep(after / 2).await;
        gate.progressed(1);
        let waiter = tokio::spawn({
            let gate = gate.clone();
            async move { std::future::poll_fn(|cx| gate.poll_turn(3, cx)).await }
        });
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("stream 3 got its turn")
            .unwrap();
        let waited = started.elapsed();
        assert!(waited >= after / 2 + after, "released after {waited:?}");
        let v = counters.exchanges.view();
        assert!(v.exchanges[0].turn_released_unwritten);
        assert!(!v.exchanges[1].turn_released_unwritten);
        // The timer has nothing left to watch and ends; a next finishing starts one again.
        gate.open(5, Priority::default());
        gate.finishing(3);
        tokio::time::timeout(Duration::from_secs(5), async {
            std::future::poll_fn(|cx| gate.poll_turn(5, cx)).await
        })
        .await
        .expect("stream 5 got its turn");
    }

    #[tokio::test]
    async fn a_written_end_releases_at_once_and_the_timer_takes_nothing_more() {
        let gate = Arc::new(Gate::with_queue(
            Queue::new(Scheduler::Sequential).release_after(Duration::from_millis(50)),
            None,
        ));
        gate.open(1, Priority::default());
        gate.open(3, Priority::default());
        gate.finishing(1);
        gate.close(1); // its END_STREAM frame was written
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        assert!(gate.poll_turn(3, &mut cx).is_ready());
        gate.open(5, Priority::default());
        tokio::time::sleep(Duration::from_millis(150)).await;
        // 3 is sending, not finishing: the timer does not take its turn.
        assert!(gate.poll_turn(5, &mut cx).is_pending());
        assert!(!gate.lock().timer);
    }
}
