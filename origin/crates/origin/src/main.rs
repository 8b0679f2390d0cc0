//! The `origin` binary: parse the command line, start the server, run until SIGINT or
//! SIGTERM.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;
use origin::cc::{QuicCc, TcpCc};
use origin::sched::Scheduler;
use origin::{Options, Server};

/// Clarke's built-in web server: serves a directory of generated pages over HTTP/1.1,
/// HTTP/2 (TLS, ALPN) and HTTP/3 (QUIC on the same port number), with the congestion
/// control chosen per protocol, and reports per-connection wire statistics as JSON on a
/// separate control endpoint (GET /health, GET /stats, POST /stats/reset, POST /config).
#[derive(Parser, Debug)]
#[command(version, max_term_width = 100)]
struct Args {
    /// Directory of pages to serve ("/" and directories map to index.html)
    #[arg(long, value_name = "DIR")]
    root: PathBuf,
    /// TLS listener: h2 and http/1.1 over TCP (ALPN), and h3 over QUIC on the same UDP port
    #[arg(long, value_name = "ADDR:PORT", default_value = "0.0.0.0:443")]
    listen: SocketAddr,
    /// Optional cleartext HTTP/1.1 listener
    #[arg(long, value_name = "ADDR:PORT")]
    plain_listen: Option<SocketAddr>,
    /// Server certificate chain, PEM (server certificate first)
    #[arg(long, value_name = "PEM")]
    cert: PathBuf,
    /// Server private key, PEM (PKCS#8, PKCS#1 or SEC1)
    #[arg(long, value_name = "PEM")]
    key: PathBuf,
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
}

async fn run(args: Args) -> anyhow::Result<()> {
    let opts = Options {
        root: args.root,
        listen: args.listen,
        plain_listen: args.plain_listen,
        cert: args.cert,
        key: args.key,
        control: args.control,
        tcp_cc: args.tcp_cc,
        quic_cc: args.quic_cc,
        quic_initial_window: args.quic_initial_window,
        scheduler: args.scheduler,
        log: args.log,
        alt_svc_max_age: (!args.no_alt_svc).then_some(args.alt_svc_max_age),
        cache_bytes: args.cache_mb * 1024 * 1024,
        command: std::env::args().collect::<Vec<_>>().join(" "),
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

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("ORIGIN_LOG")
                .unwrap_or_else(|_| "origin=info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = match Args::try_parse() {
        Ok(a) => a,
        Err(e) if !e.use_stderr() => e.exit(), // --help, --version
        Err(e) => {
            let text = e.render().to_string();
            eprintln!("ERROR: {}", text.trim_start_matches("error: ").trim_end());
            std::process::exit(1);
        }
    };
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
