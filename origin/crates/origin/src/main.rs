//! The `origin` binary: parse the command line, start the server, run until SIGINT or
//! SIGTERM.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;
use origin::cc::{QuicCc, TcpCc};
use origin::replay::files::{self, Limits};
use origin::replay::{Site, Ttfb};
use origin::sched::Scheduler;
use origin::{Options, Server, SiteOptions};

/// Clarke's built-in web server: serves a directory of generated pages over HTTP/1.1,
/// HTTP/2 (TLS, ALPN) and HTTP/3 (QUIC on the same port number), with the congestion
/// control chosen per protocol, and reports per-connection wire statistics as JSON on a
/// separate control endpoint (GET /health, GET /stats, POST /stats/reset, POST /config).
#[derive(Parser, Debug)]
#[command(version, max_term_width = 100)]
struct Args {
    /// Directory of pages to serve ("/" and directories map to index.html)
    #[arg(long, value_name = "DIR", required_unless_present = "check_site")]
    root: Option<PathBuf>,
    /// TLS listener: h2 and http/1.1 over TCP (ALPN), and h3 over QUIC on the same UDP port
    #[arg(long, value_name = "ADDR:PORT", default_value = "0.0.0.0:443")]
    listen: SocketAddr,
    /// Optional cleartext HTTP/1.1 listener
    #[arg(long, value_name = "ADDR:PORT")]
    plain_listen: Option<SocketAddr>,
    /// Server certificate chain, PEM (server certificate first)
    #[arg(long, value_name = "PEM", required_unless_present = "check_site")]
    cert: Option<PathBuf>,
    /// Server private key, PEM (PKCS#8, PKCS#1 or SEC1)
    #[arg(long, value_name = "PEM", required_unless_present = "check_site")]
    key: Option<PathBuf>,
    /// Control endpoint (plain HTTP, JSON); bind it to the management network only
    #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:8443")]
    control: SocketAddr,
    /// TCP congestion control set on every accepted socket (cubic, bbr, reno)
    #[arg(long, value_name = "ALGO", default_value = "cubic")]
    tcp_cc: TcpCc,
    /// QUIC congestion controller of quinn (cubic, bbr, newreno)
    #[arg(long, value_name = "ALGO", default_value = "cubic")]
    quic_cc: QuicCc,
    /// QUIC initial congestion window in bytes [default: quinn's, 14720 bytes]
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1..))]
    quic_initial_window: Option<u64>,
    /// Which response sends next on an HTTP/2 or HTTP/3 connection: round-robin (the
    /// stacks' own), sequential (request order) or rfc9218 (urgency, incremental)
    #[arg(long, value_name = "NAME", default_value = "round-robin")]
    scheduler: Scheduler,
    /// Append a connection log here (# header lines, then one JSON object per line)
    #[arg(long, value_name = "FILE")]
    log: Option<PathBuf>,
    /// Alt-Svc max-age in seconds, advertising h3 on TLS responses
    #[arg(long, value_name = "SECONDS", default_value_t = 86400)]
    alt_svc_max_age: u64,
    /// Keep up to this many MiB of file contents in memory (0: read files on every request)
    #[arg(long, value_name = "MIB", default_value_t = 512)]
    cache_mb: u64,
    /// Send no Alt-Svc header
    #[arg(long)]
    no_alt_svc: bool,
    /// Also replay a recorded site: a site archive directory (site.json, bodies/), served
    /// on the --site-listen addresses, every origin by SNI and :authority
    #[arg(long, value_name = "DIR", requires_all = ["site_listen", "site_certs"])]
    site: Option<PathBuf>,
    /// A listener for the site: TLS over TCP (h2, http/1.1) and QUIC (h3) on the same
    /// port; repeat it for each address the site's origins have
    #[arg(long, value_name = "ADDR:PORT")]
    site_listen: Vec<SocketAddr>,
    /// Directory of each site host's certificate chain and key: <host>.pem, <host>.key
    #[arg(long, value_name = "DIR")]
    site_certs: Option<PathBuf>,
    /// Server time to first byte: as recorded in the archive, or zero [default: recorded]
    #[arg(long, value_name = "WHEN")]
    site_ttfb: Option<Ttfb>,
    /// Seed of the deterministic Date and Math.random script put into the site's HTML
    /// [default: 1]
    #[arg(long, value_name = "SEED")]
    site_seed: Option<u64>,
    /// Put no deterministic script into the site's HTML
    #[arg(long, conflicts_with = "site_seed")]
    no_site_script: bool,
    /// Unix ms the script's clock starts at [default: the archive's source.recorded_at,
    /// else 2025-01-01T00:00:00Z]
    #[arg(long, value_name = "MS")]
    site_clock_ms: Option<i64>,
    /// The most one body of the site may hold, in MiB
    #[arg(long, value_name = "MIB", default_value_t = files::DEFAULT_BODY_MB,
          value_parser = clap::value_parser!(u64).range(1..=1 << 20))]
    site_max_body_mb: u64,
    /// The most the site's distinct bodies may hold together, in MiB
    #[arg(long, value_name = "MIB", default_value_t = files::DEFAULT_SITE_MB,
          value_parser = clap::value_parser!(u64).range(1..=1 << 20))]
    site_max_mb: u64,
    /// Check the site archive DIR as a replay would (the archive's rules, its files, the
    /// limits, every response sendable), print the verdict and exit: 0 servable, 2 not
    #[arg(long, value_name = "DIR", conflicts_with_all = ["root", "site"])]
    check_site: Option<PathBuf>,
}

impl Args {
    fn limits(&self) -> Limits {
        Limits {
            body_bytes: self.site_max_body_mb * files::MIB,
            site_bytes: self.site_max_mb * files::MIB,
        }
    }

    /// The site to replay, if any; an error for a --site-* option without --site.
    fn site(&mut self) -> anyhow::Result<Option<SiteOptions>> {
        let Some(archive) = self.site.take() else {
            let given = [
                ("--site-listen", !self.site_listen.is_empty()),
                ("--site-certs", self.site_certs.is_some()),
                ("--site-ttfb", self.site_ttfb.is_some()),
                ("--site-seed", self.site_seed.is_some()),
                ("--no-site-script", self.no_site_script),
                ("--site-clock-ms", self.site_clock_ms.is_some()),
            ];
            if let Some((name, _)) = given.iter().find(|(_, set)| *set) {
                anyhow::bail!("{name} applies to a site: give --site DIR too");
            }
            return Ok(None);
        };
        Ok(Some(SiteOptions {
            archive,
            listen: std::mem::take(&mut self.site_listen),
            certs: self.site_certs.take().unwrap_or_default(),
            ttfb: self.site_ttfb.unwrap_or(Ttfb::Recorded),
            script_seed: (!self.no_site_script).then_some(self.site_seed.unwrap_or(1)),
            clock_ms: self.site_clock_ms,
            limits: self.limits(),
        }))
    }
}

async fn run(mut args: Args) -> anyhow::Result<()> {
    let site = args.site()?;
    let opts = Options {
        root: args.root.context("--root is required")?,
        listen: args.listen,
        plain_listen: args.plain_listen,
        cert: args.cert.context("--cert is required")?,
        key: args.key.context("--key is required")?,
        control: args.control,
        tcp_cc: args.tcp_cc,
        quic_cc: args.quic_cc,
        quic_initial_window: args.quic_initial_window,
        scheduler: args.scheduler,
        log: args.log,
        alt_svc_max_age: (!args.no_alt_svc).then_some(args.alt_svc_max_age),
        cache_bytes: args.cache_mb * 1024 * 1024,
        command: std::env::args().collect::<Vec<_>>().join(" "),
        site,
    };
    let server = Server::start(opts).await?;
    let addrs = server.addrs();
    // One line on stdout that scripts can wait for.
    println!("{}", serde_json::json!({"listening": addrs}));
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("cannot install the SIGTERM handler")?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r.context("cannot wait for SIGINT")?,
        _ = term.recv() => {}
    }
    tracing::info!("shutting down");
    server.shutdown();
    Ok(())
}

/// `--check-site DIR`: the verdict a replay would give, as `clarke site check` gives
/// its own; the exit code (0: servable, 2: refused).
fn check_site(dir: &std::path::Path, limits: Limits) -> i32 {
    let options = SiteOptions {
        archive: dir.to_path_buf(),
        listen: Vec::new(),
        certs: PathBuf::new(),
        ttfb: Ttfb::Recorded,
        script_seed: Some(1),
        clock_ms: None,
        limits,
    };
    match Site::load(options) {
        Ok(site) => {
            println!(
                "{}: site {}: {} exchanges, servable",
                dir.display(),
                site.name,
                site.exchanges
            );
            0
        }
        Err(e) => {
            eprintln!("ERROR: {e}");
            2
        }
    }
}

fn main() {
    origin::quic_fin::init_tracing("origin=info");
    let args = match Args::try_parse() {
        Ok(a) => a,
        Err(e) if !e.use_stderr() => e.exit(), // --help, --version
        Err(e) => {
            let text = e.render().to_string();
            eprintln!("ERROR: {}", text.trim_start_matches("error: ").trim_end());
            std::process::exit(1);
        }
    };
    if let Some(dir) = &args.check_site {
        std::process::exit(check_site(dir, args.limits()));
    }
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("ERROR: cannot start the async runtime: {e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = rt.block_on(run(args)) {
        eprintln!("ERROR: {e:#}");
        std::process::exit(1);
    }
}
