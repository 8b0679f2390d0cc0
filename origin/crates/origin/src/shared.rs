//! The state the accept loops and the control endpoint share: where files come from,
//! the statistics, and the settings new connections get. Its own module, so that the
//! loops (tcp, quic, control) and the server that starts them all import it and none
//! imports another back.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use http::HeaderValue;
use quinn::crypto::rustls::QuicServerConfig;
use serde::Serialize;
use tokio::net::TcpListener;

use crate::cc;
use crate::files::FileCache;
use crate::settings::{self, ConfigError, Settings};
use crate::stats::Registry;

/// The addresses origin listens on.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Addrs {
    pub tls_tcp: SocketAddr,
    pub quic_udp: SocketAddr,
    pub plain_tcp: Option<SocketAddr>,
    pub control: SocketAddr,
}

/// State shared by the accept loops and the control endpoint.
pub struct Shared {
    pub root: PathBuf,
    pub cache: FileCache,
    pub alt_svc: Option<HeaderValue>,
    pub registry: Arc<Registry>,
    pub addrs: Addrs,
    pub(crate) settings: RwLock<Settings>,
    pub(crate) endpoint: quinn::Endpoint,
    pub(crate) quic_crypto: Arc<QuicServerConfig>,
    pub(crate) listeners: Vec<Arc<TcpListener>>,
}

impl Shared {
    /// The settings new connections get.
    pub fn settings(&self) -> Settings {
        *self.settings.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Applies a `POST /config` body to new connections.
    pub fn update(&self, body: &[u8]) -> Result<Settings, ConfigError> {
        let mut cur = self.settings.write().unwrap_or_else(|e| e.into_inner());
        let new = cur.with_update(body)?;
        for l in &self.listeners {
            cc::set_tcp_cc(l.as_ref(), new.tcp_cc)?;
        }
        self.endpoint
            .set_server_config(Some(settings::quic_server_config(self.quic_crypto.clone(), &new)));
        *cur = new;
        tracing::info!(tcp_cc = %new.tcp_cc, quic_cc = %new.quic_cc, quic_initial_window = ?new.quic_initial_window, scheduler = %new.scheduler, "configuration changed");
        self.registry.log_event(
            &serde_json::json!({"event": "config", "unix_ms": crate::stats::now_ms(), "settings": new}),
        );
        Ok(new)
    }
}
