//! When each HTTP/3 response's end first left origin.
//!
//! quinn buffers a whole response at once and has no call that says when its bytes went
//! out, but it writes a trace event for every STREAM frame it puts into a packet
//! (quinn-proto's streams/state.rs: `STREAM`, with the stream, offset, length and whether
//! the frame carries the FIN), in the span its connection driver runs in, the connection's
//! `quic` span. This layer reads those events and notes, in the connection's exchanges,
//! the first frame with FIN of each request stream: like HTTP/2's written_last, the order
//! origin sent its responses' ends in. When the client acknowledged them is a different
//! time: a packet the client discards, or one quinn declares lost though it arrived, is
//! sent again, and the acknowledgement of an earlier response then comes after later
//! ones (seen on the lan profile: 0 to 523 packets declared lost per 1 MB page while
//! every frame crossed the link and reached the client's socket).

use std::sync::Arc;

use tracing::field::{Field, Visit};
use tracing::level_filters::LevelFilter;
use tracing::{Event, Subscriber};
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Registry};

use crate::exchanges::now_unix_ms;
use crate::stats::Counters;

/// The module of quinn-proto whose trace events name each STREAM frame written.
pub const STREAM_FRAMES: &str = "quinn_proto::connection::streams::state";
/// The module whose `quic` span each connection's driver runs in (quic.rs).
const CONNECTION_SPANS: &str = "origin::quic";

/// Installs origin's logging (`ORIGIN_LOG`, else `default_filter`, to stderr) and this
/// layer as the process's subscriber; false if one was installed already.
pub fn init_tracing(default_filter: &str) -> bool {
    let log = EnvFilter::try_from_env("ORIGIN_LOG").unwrap_or_else(|_| default_filter.into());
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_filter(log),
        )
        .with(FinLayer.with_filter(fin_filter()))
        .try_init()
        .is_ok()
}

/// What the layer needs: the STREAM frame events and the connections' spans.
fn fin_filter() -> Targets {
    Targets::new()
        .with_target(STREAM_FRAMES, LevelFilter::TRACE)
        .with_target(CONNECTION_SPANS, LevelFilter::INFO)
}

/// A connection's records, kept on its `quic` span.
struct ConnRecords(Arc<Counters>);

/// Gives the current span (a connection's `quic` span, from inside quic.rs's `serve`) the
/// connection's records, where the frames its driver writes are noted.
pub fn attach(counters: Arc<Counters>) {
    tracing::Span::current().with_subscriber(|(id, dispatch)| {
        if let Some(registry) = dispatch.downcast_ref::<Registry>() {
            if let Some(span) = registry.span(id) {
                span.extensions_mut().replace(ConnRecords(counters));
            }
        }
    });
}

/// Notes the first STREAM frame with FIN of each client-initiated bidirectional stream.
pub struct FinLayer;

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for FinLayer {
    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        if event.metadata().target() != STREAM_FRAMES {
            return;
        }
        let mut frame = StreamFrame::default();
        event.record(&mut frame);
        let (Some(stream), true) = (frame.request_stream, frame.fin) else {
            return;
        };
        let Some(scope) = ctx.event_scope(event) else {
            return;
        };
        for span in scope {
            if let Some(records) = span.extensions().get::<ConnRecords>() {
                records.0.exchanges.h3_fin_sent(stream, now_unix_ms());
                return;
            }
        }
    }
}

/// The fields of a STREAM frame event that matter here.
#[derive(Default)]
struct StreamFrame {
    /// The stream's ID, if a client-initiated bidirectional (request) stream.
    request_stream: Option<u64>,
    fin: bool,
}

impl Visit for StreamFrame {
    fn record_bool(&mut self, field: &Field, value: bool) {
        if field.name() == "fin" {
            self.fin = value;
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "id" {
            self.request_stream = request_stream(&format!("{value:?}"));
        }
    }
}

/// The ID of a stream as quinn displays it ("client bidirectional stream 7"), if a
/// client-initiated bidirectional one: index × 4 (RFC 9000 2.1).
fn request_stream(shown: &str) -> Option<u64> {
    let index: u64 = shown.strip_prefix("client bidirectional stream ")?.parse().ok()?;
    index.checked_mul(4)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_streams_are_read_from_quinns_display() {
        assert_eq!(request_stream("client bidirectional stream 0"), Some(0));
        assert_eq!(request_stream("client bidirectional stream 7"), Some(28));
        assert_eq!(request_stream("server unidirectional stream 3"), None);
        assert_eq!(request_stream("client unidirectional stream 2"), None);
        assert_eq!(request_stream("client bidirectional stream x"), None);
    }

    #[test]
    fn the_first_fin_of_a_connections_stream_is_noted_on_its_exchange() {
        let counters = Arc::new(Counters::default());
        counters.exchanges.begin(Some(28), "/o7.jpg", None);
        counters.exchanges.begin(Some(32), "/o8.jpg", None);
        let subscriber = tracing_subscriber::registry().with(FinLayer.with_filter(fin_filter()));
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!(target: "origin::quic", "quic");
            let _in = span.enter();
            attach(counters.clone());
            let frame = |id: &str, fin: bool| {
                tracing::trace!(target: "quinn_proto::connection::streams::state", id = %id, off = 0, len = 10, fin, "STREAM");
            };
            frame("client bidirectional stream 7", false);
            frame("client bidirectional stream 8", true);
            std::thread::sleep(std::time::Duration::from_millis(2));
            frame("client bidirectional stream 7", true);
            frame("client bidirectional stream 8", true); // sent again: not its first
        });
        let v = counters.exchanges.view();
        let fin = |i: usize| v.exchanges[i].fin_sent_unix_ms.expect("noted");
        assert!(fin(1) < fin(0), "{:?}", v.exchanges);
        // Outside a connection's span nothing is noted, and nothing fails.
        let other = Arc::new(Counters::default());
        other.exchanges.begin(Some(0), "/", None);
        tracing::subscriber::with_default(
            tracing_subscriber::registry().with(FinLayer.with_filter(fin_filter())),
            || {
                tracing::trace!(target: "quinn_proto::connection::streams::state", id = %"client bidirectional stream 0", fin = true, "STREAM");
            },
        );
        assert_eq!(other.exchanges.view().exchanges[0].fin_sent_unix_ms, None);
    }
}
