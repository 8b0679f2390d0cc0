//! `h3get`: fetch a URL over HTTP/3 and print one JSON object.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;

/// Fetch a URL over HTTP/3 (QUIC) and print, as one JSON object, the negotiated
/// protocol, status, bytes and SHA-256 of the body; with --repeat/--parallel also
/// requests per second and Gbit/s over one connection. Exits 1 on any failure, and 2
/// on an HTTP status other than 2xx unless --any-status.
#[derive(Parser, Debug)]
#[command(version, max_term_width = 100)]
struct Args {
    /// https:// URL to fetch
    url: http::Uri,
    /// Connect to this address instead of resolving the URL's host (SNI stays the host)
    #[arg(long, value_name = "ADDR:PORT")]
    connect: Option<SocketAddr>,
    /// CA certificates to trust (PEM)
    #[arg(long, value_name = "PEM")]
    cacert: PathBuf,
    /// Number of requests over the one connection
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    repeat: u32,
    /// Requests in flight at once
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    parallel: u32,
    /// Give up after this many seconds
    #[arg(long, default_value_t = 30)]
    timeout: u64,
    /// Exit 0 whatever the HTTP status
    #[arg(long)]
    any_status: bool,
}

fn main() {
    let args = match Args::try_parse() {
        Ok(a) => a,
        Err(e) if !e.use_stderr() => e.exit(), // --help, --version
        Err(e) => {
            let text = e.render().to_string();
            eprintln!("ERROR: {}", text.trim_start_matches("error: ").trim_end());
            std::process::exit(1);
        }
    };
    let opts = h3get::Options {
        url: args.url,
        connect: args.connect,
        cacert: args.cacert,
        repeat: args.repeat,
        parallel: args.parallel,
        timeout: Duration::from_secs(args.timeout),
    };
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("ERROR: cannot start the async runtime: {e}");
            std::process::exit(1);
        }
    };
    match rt.block_on(h3get::fetch(&opts)) {
        Ok(report) => {
            println!("{}", serde_json::to_string(&report).unwrap_or_default());
            if !args.any_status && !(200..300).contains(&report.first.status) {
                std::process::exit(2);
            }
        }
        Err(e) => {
            eprintln!("ERROR: {e:#}");
            std::process::exit(1);
        }
    }
}
