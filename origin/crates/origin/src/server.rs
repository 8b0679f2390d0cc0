//! Starting origin: binding every listener, then running the accept loops.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use anyhow::{bail, Context};
use http::HeaderValue;
use socket2::SockRef;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::cc::{self, QuicCc, TcpCc};
use crate::files::FileCache;
use crate::sched::Scheduler;
use crate::settings::{self, Settings};
use crate::shared::{Addrs, Shared};
use crate::stats::Registry;
use crate::tls::Identity;
use crate::{control, quic, tcp};

/// Everything origin needs to start.
#[derive(Debug, Clone)]
pub struct Options {
    pub root: PathBuf,
    /// TLS over TCP (h2, http/1.1) and QUIC (h3) on UDP, same port.
    pub listen: SocketAddr,
    /// Cleartext HTTP/1.1.
    pub plain_listen: Option<SocketAddr>,
    pub cert: PathBuf,
    pub key: PathBuf,
    /// The control endpoint (management network).
    pub control: SocketAddr,
    pub tcp_cc: TcpCc,
    pub quic_cc: QuicCc,
    pub quic_initial_window: Option<u64>,
    /// Which response sends next on an HTTP/2 or HTTP/3 connection.
    pub scheduler: Scheduler,
    pub log: Option<PathBuf>,
    /// `ma` of the Alt-Svc header; `None` sends no Alt-Svc.
    pub alt_svc_max_age: Option<u64>,
    /// Bytes of file contents kept in memory (0: read every file on every request).
    pub cache_bytes: u64,
    /// The command line, for the log header.
    pub command: String,
}

/// A running origin.
pub struct Server {
    pub shared: Arc<Shared>,
    tasks: Vec<JoinHandle<()>>,
}

async fn bind_tcp(addr: SocketAddr, what: &str, cc: Option<TcpCc>) -> anyhow::Result<Arc<TcpListener>> {
    let l = TcpListener::bind(addr)
        .await
        .with_context(|| format!("failed to bind the {what} listener on TCP {addr}"))?;
    if let Some(cc) = cc {
        cc::set_tcp_cc(&l, cc).with_context(|| format!("the {what} listener on TCP {addr}"))?;
    }
    Ok(Arc::new(l))
}

impl Server {
    /// Validates the options, binds every listener and starts serving.
    pub async fn start(opts: Options) -> anyhow::Result<Self> {
        let meta = std::fs::metadata(&opts.root)
            .with_context(|| format!("cannot use root directory {}", opts.root.display()))?;
        if !meta.is_dir() {
            bail!("root {} is not a directory", opts.root.display());
        }
        opts.tcp_cc.check_available().context("--tcp-cc")?;
        let identity = Identity::load(&opts.cert, &opts.key)?;
        let tcp_tls = identity.tcp_config()?;
        let quic_crypto = identity.quic_config()?;
        let settings = Settings {
            tcp_cc: opts.tcp_cc,
            quic_cc: opts.quic_cc,
            quic_initial_window: opts.quic_initial_window,
            scheduler: opts.scheduler,
        };

        let tls_listener = bind_tcp(opts.listen, "TLS", Some(opts.tcp_cc)).await?;
        let tls_addr = tls_listener.local_addr()?;
        let quic_addr = SocketAddr::new(opts.listen.ip(), tls_addr.port());
        let endpoint = quinn::Endpoint::server(
            settings::quic_server_config(quic_crypto.clone(), &settings),
            quic_addr,
        )
        .with_context(|| format!("failed to bind the QUIC endpoint on UDP {quic_addr}"))?;
        let plain_listener = match opts.plain_listen {
            Some(a) => Some(bind_tcp(a, "cleartext", Some(opts.tcp_cc)).await?),
            None => None,
        };
        let control_listener = bind_tcp(opts.control, "control", None).await?;
        // Keep the SO_REUSEADDR-free control socket out of the measured congestion control.
        let _ = SockRef::from(control_listener.as_ref()).set_nodelay(true);

        let addrs = Addrs {
            tls_tcp: tls_addr,
            quic_udp: endpoint.local_addr()?,
            plain_tcp: plain_listener.as_ref().map(|l| l.local_addr()).transpose()?,
            control: control_listener.local_addr()?,
        };
        let header = vec![
            format!("origin {} connection log", env!("CARGO_PKG_VERSION")),
            format!("command: {}", opts.command),
            format!("started_unix_ms: {}", crate::stats::now_ms()),
            format!("listen: {}", serde_json::to_string(&addrs).unwrap_or_default()),
            "format: one JSON object per line; event=conn_closed is a /stats record, event=config a settings change".into(),
        ];
        let registry = Arc::new(Registry::new(opts.log.as_deref(), &header)?);
        let alt_svc = opts
            .alt_svc_max_age
            .map(|ma| HeaderValue::from_str(&format!("h3=\":{}\"; ma={ma}", tls_addr.port())))
            .transpose()
            .context("Alt-Svc header")?;
        let mut listeners = vec![tls_listener.clone()];
        listeners.extend(plain_listener.clone());
        let shared = Arc::new(Shared {
            root: opts.root.clone(),
            cache: FileCache::new(opts.cache_bytes),
            alt_svc,
            registry,
            addrs,
            settings: RwLock::new(settings),
            endpoint: endpoint.clone(),
            quic_crypto,
            listeners,
        });

        let acceptor = tokio_rustls::TlsAcceptor::from(tcp_tls);
        let mut tasks = vec![
            tokio::spawn(tcp::accept_loop(tls_listener, Some(acceptor), shared.clone())),
            tokio::spawn(quic::accept_loop(endpoint, shared.clone())),
            tokio::spawn(control::serve(control_listener, shared.clone())),
        ];
        if let Some(l) = plain_listener {
            tasks.push(tokio::spawn(tcp::accept_loop(l, None, shared.clone())));
        }
        tracing::info!(?addrs, tcp_cc = %settings.tcp_cc, quic_cc = %settings.quic_cc, scheduler = %settings.scheduler, root = %opts.root.display(), "origin listening");
        Ok(Self { shared, tasks })
    }

    pub fn addrs(&self) -> Addrs {
        self.shared.addrs
    }

    /// Stops accepting and closes the QUIC endpoint.
    pub fn shutdown(self) {
        self.shared.endpoint.close(0u32.into(), b"shutdown");
        for t in &self.tasks {
            t.abort();
        }
    }
}
