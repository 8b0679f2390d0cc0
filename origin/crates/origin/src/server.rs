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
use crate::replay::{Site, SiteOptions};
use crate::sched::Scheduler;
use crate::settings::{self, Settings};
use crate::shared::{Addrs, Service, Shared};
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
    /// A recorded site to replay on listeners of its own, besides the pages.
    pub site: Option<SiteOptions>,
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
        let site = match &opts.site {
            Some(o) => Some(bind_site(o.clone(), &settings).await?),
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
            site: site.as_ref().map(|s| s.addrs.clone()).unwrap_or_default(),
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
        let mut endpoints = vec![(endpoint.clone(), quic_crypto)];
        if let Some(s) = &site {
            listeners.extend(s.tcp.iter().cloned());
            endpoints.extend(s.quic.iter().map(|e| (e.clone(), s.quic_crypto.clone())));
        }
        let shared = Arc::new(Shared {
            root: opts.root.clone(),
            cache: FileCache::new(opts.cache_bytes),
            alt_svc,
            registry,
            addrs: addrs.clone(),
            site: site.as_ref().map(|s| s.site.clone()),
            alt_svc_max_age: opts.alt_svc_max_age,
            settings: RwLock::new(settings),
            endpoints,
            listeners,
        });

        let acceptor = tokio_rustls::TlsAcceptor::from(tcp_tls);
        let mut tasks = vec![
            tokio::spawn(tcp::accept_loop(
                tls_listener,
                Some(acceptor),
                shared.clone(),
                Service::Pages,
            )),
            tokio::spawn(quic::accept_loop(endpoint, shared.clone(), Service::Pages)),
            tokio::spawn(control::serve(control_listener, shared.clone())),
        ];
        if let Some(l) = plain_listener {
            tasks.push(tokio::spawn(tcp::accept_loop(
                l,
                None,
                shared.clone(),
                Service::Pages,
            )));
        }
        if let Some(s) = site {
            let acceptor = tokio_rustls::TlsAcceptor::from(s.tcp_tls);
            for l in s.tcp {
                tasks.push(tokio::spawn(tcp::accept_loop(
                    l,
                    Some(acceptor.clone()),
                    shared.clone(),
                    Service::Site,
                )));
            }
            for e in s.quic {
                tasks.push(tokio::spawn(quic::accept_loop(e, shared.clone(), Service::Site)));
            }
            tracing::info!(site = %s.site.name, exchanges = s.site.exchanges, origins = s.site.origins.len(), listeners = ?s.addrs, "replaying a site");
        }
        tracing::info!(?addrs, tcp_cc = %settings.tcp_cc, quic_cc = %settings.quic_cc, scheduler = %settings.scheduler, root = %opts.root.display(), "origin listening");
        Ok(Self { shared, tasks })
    }

    pub fn addrs(&self) -> Addrs {
        self.shared.addrs.clone()
    }

    /// Stops accepting and closes the QUIC endpoints.
    pub fn shutdown(self) {
        for (endpoint, _) in &self.shared.endpoints {
            endpoint.close(0u32.into(), b"shutdown");
        }
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// A replayed site's listeners, bound.
struct SiteListeners {
    site: Arc<Site>,
    tcp_tls: Arc<rustls::ServerConfig>,
    quic_crypto: Arc<quinn::crypto::rustls::QuicServerConfig>,
    tcp: Vec<Arc<TcpListener>>,
    quic: Vec<quinn::Endpoint>,
    addrs: Vec<SocketAddr>,
}

/// Loads and checks the site, loads each origin host's certificate, and binds TLS over
/// TCP and QUIC (the same port) on every site address: any of them serves every origin,
/// by SNI and `:authority` (the runner puts each recorded origin's address among them
/// and lets DNS decide which one a browser reaches).
async fn bind_site(opts: SiteOptions, settings: &Settings) -> anyhow::Result<SiteListeners> {
    if opts.listen.is_empty() {
        bail!("a site needs at least one --site-listen address");
    }
    let dir = opts.archive.clone();
    let site = tokio::task::spawn_blocking(move || Site::load(opts))
        .await
        .context("loading the site")?
        .with_context(|| format!("the site archive {}", dir.display()))?;
    let mut hosts: Vec<String> = site.origins.iter().map(|o| o.host.to_ascii_lowercase()).collect();
    hosts.sort();
    hosts.dedup();
    let (tcp_tls, quic_crypto) = crate::tls::by_host(&site.options.certs, &hosts)?;
    let (mut tcp, mut quic, mut addrs) = (Vec::new(), Vec::new(), Vec::new());
    for want in &site.options.listen {
        let l = bind_tcp(*want, "site", Some(settings.tcp_cc)).await?;
        let at = l.local_addr()?;
        let e = quinn::Endpoint::server(settings::quic_server_config(quic_crypto.clone(), settings), at)
            .with_context(|| format!("failed to bind the site's QUIC endpoint on UDP {at}"))?;
        tcp.push(l);
        quic.push(e);
        addrs.push(at);
    }
    Ok(SiteListeners {
        site: Arc::new(site),
        tcp_tls,
        quic_crypto,
        tcp,
        quic,
        addrs,
    })
}
