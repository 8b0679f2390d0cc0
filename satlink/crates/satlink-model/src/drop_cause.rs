//! Why a frame was dropped: the causes every queue, the loss model and the outage
//! share, and the names satlink's event log and counters give them.

/// Why a frame was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropCause {
    /// The queue was full: the arriving frame was refused (drop-tail, and the tail
    /// drop of drop-head and CoDel when even one frame does not fit).
    QueueFull,
    /// Drop-head: dropped from the front to make room for a newer frame.
    QueueHead,
    /// CoDel (or FQ-CoDel's per-flow CoDel) dropped it at dequeue: its sojourn time
    /// had stayed above target.
    Codel,
    /// FQ-CoDel above its bound: the head of the flow with the most bytes.
    FqOverflow,
    /// The loss model (packet loss rate or bit error rate) lost it on the air.
    Loss,
    /// Longer than `max_frame_bytes`.
    Oversize,
    /// Its serialization would have started during a scheduled outage.
    Outage,
}

impl DropCause {
    pub fn as_str(self) -> &'static str {
        match self {
            DropCause::QueueFull => "queue_full",
            DropCause::QueueHead => "queue_head",
            DropCause::Codel => "codel",
            DropCause::FqOverflow => "fq_overflow",
            DropCause::Loss => "loss",
            DropCause::Oversize => "oversize",
            DropCause::Outage => "outage",
        }
    }
}
