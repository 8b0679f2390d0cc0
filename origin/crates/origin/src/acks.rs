//! When the client had acknowledged the whole of each HTTP/3 response, noted by one task
//! per connection.
//!
//! quinn wakes every stream one ACK frame completes at the same moment. Awaited in each
//! request's own task, those streams were noted as each task next ran: on a busy 2-core
//! machine milliseconds apart and in either order, so two responses one ACK completed
//! seemed to finish several milliseconds apart, the later first. Here one task polls
//! every stream of its connection, and all the streams it finds complete in one pass get
//! the same time.

use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::task::Poll;

use tokio::sync::mpsc;

use crate::exchanges::now_unix_ms;

/// Completes with true when the client acknowledged all of a stream, false when the
/// stream ended otherwise (stopped, reset, the connection lost).
pub type Acked = Pin<Box<dyn Future<Output = bool> + Send>>;

/// Where a connection's request handlers hand their streams once finished.
#[derive(Clone)]
pub struct AckWatch {
    streams: mpsc::UnboundedSender<(u64, Acked)>,
}

impl AckWatch {
    /// Starts a connection's watcher; `note(stream, unix_ms)` for each stream the client
    /// acknowledged whole. The watcher ends once every `AckWatch` of it is dropped and
    /// every stream handed to it has ended.
    pub fn spawn(note: impl FnMut(u64, f64) + Send + 'static) -> Self {
        let (streams, rx) = mpsc::unbounded_channel();
        tokio::spawn(watch(rx, note, now_unix_ms));
        Self { streams }
    }

    /// Notes `stream` when `acked` completes with true.
    pub fn watch(&self, stream: u64, acked: impl Future<Output = bool> + Send + 'static) {
        // The watcher outlives every sender: a send fails only if it panicked.
        let _ = self.streams.send((stream, Box::pin(acked)));
    }
}

/// Polls every stream handed in through `rx` until all have ended and `rx` is closed;
/// `clock` is read once per pass that found a stream acknowledged.
async fn watch(
    mut rx: mpsc::UnboundedReceiver<(u64, Acked)>,
    mut note: impl FnMut(u64, f64),
    clock: impl Fn() -> f64,
) {
    let mut pending: Vec<(u64, Acked)> = Vec::new();
    let mut open = true;
    loop {
        let acked: Vec<u64> = poll_fn(|cx| {
            while open {
                match rx.poll_recv(cx) {
                    Poll::Ready(Some(stream)) => pending.push(stream),
                    Poll::Ready(None) => open = false,
                    Poll::Pending => break,
                }
            }
            let before = pending.len();
            let mut acked = Vec::new();
            pending.retain_mut(|(stream, done)| match done.as_mut().poll(cx) {
                Poll::Ready(whole) => {
                    if whole {
                        acked.push(*stream);
                    }
                    false
                }
                Poll::Pending => true,
            });
            if pending.len() < before || (!open && pending.is_empty()) {
                Poll::Ready(acked)
            } else {
                Poll::Pending
            }
        })
        .await;
        if !acked.is_empty() {
            let now = clock();
            for stream in acked {
                note(stream, now);
            }
        }
        if !open && pending.is_empty() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::{Arc, Mutex};

    use tokio::sync::oneshot;

    use super::*;

    /// A watcher whose clock counts its readings; returns what it noted.
    async fn run_with(
        setup: impl FnOnce(mpsc::UnboundedSender<(u64, Acked)>) -> tokio::task::JoinHandle<()>,
    ) -> Vec<(u64, f64)> {
        let (tx, rx) = mpsc::unbounded_channel();
        let noted = Arc::new(Mutex::new(Vec::new()));
        let into = noted.clone();
        let readings = AtomicU32::new(0);
        let clock = move || f64::from(readings.fetch_add(1, Ordering::SeqCst));
        let feeder = setup(tx);
        watch(rx, move |s, t| into.lock().unwrap().push((s, t)), clock).await;
        feeder.await.unwrap();
        let v = noted.lock().unwrap().clone();
        v
    }

    fn acked_when(rx: oneshot::Receiver<bool>) -> Acked {
        Box::pin(async move { rx.await.unwrap_or(false) })
    }

    #[tokio::test]
    async fn streams_one_ack_completes_get_one_time() {
        let noted = run_with(|tx| {
            tokio::spawn(async move {
                let (a, ra) = oneshot::channel();
                let (b, rb) = oneshot::channel();
                tx.send((4, acked_when(ra))).unwrap();
                tx.send((8, acked_when(rb))).unwrap();
                tokio::task::yield_now().await;
                // One ACK: both complete before the watcher runs again.
                a.send(true).unwrap();
                b.send(true).unwrap();
            })
        })
        .await;
        assert_eq!(noted.len(), 2, "{noted:?}");
        assert_eq!(noted[0].1, noted[1].1, "{noted:?}");
    }

    #[tokio::test]
    async fn streams_acknowledged_apart_get_their_order_and_a_stopped_one_none() {
        let noted = run_with(|tx| {
            tokio::spawn(async move {
                let (a, ra) = oneshot::channel();
                let (b, rb) = oneshot::channel();
                let (c, rc) = oneshot::channel();
                tx.send((4, acked_when(ra))).unwrap();
                tx.send((8, acked_when(rb))).unwrap();
                tx.send((12, acked_when(rc))).unwrap();
                drop(tx);
                c.send(false).unwrap();
                for _ in 0..3 {
                    tokio::task::yield_now().await;
                }
                b.send(true).unwrap();
                for _ in 0..3 {
                    tokio::task::yield_now().await;
                }
                a.send(true).unwrap();
            })
        })
        .await;
        let streams: Vec<u64> = noted.iter().map(|(s, _)| *s).collect();
        assert_eq!(streams, [8, 4], "{noted:?}");
        assert!(noted[0].1 < noted[1].1, "{noted:?}");
    }
}
