//! `splittcp`: Clarke's transparent split-TCP PEP (see lib.rs). The role's agent starts
//! one per station (terminal, gateway) and installs the TPROXY rules that hand it the
//! TCP connections to intercept (docs/peps.md).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Parser;
use serde_json::json;

use splittcp::{control, sys, Destination, HopOptions, HopSide, Proxy, Stats};

#[derive(Parser, Debug)]
#[command(
    name = "splittcp",
    version,
    about = "Transparent split-TCP performance-enhancing proxy"
)]
struct Args {
    /// Where to listen (with --transparent, TPROXY's --on-port lands here).
    #[arg(long)]
    listen: SocketAddr,
    /// IP_TRANSPARENT on the listener: take connections to any destination (TPROXY)
    /// and relay each to the destination its client asked for.
    #[arg(long, conflicts_with = "to")]
    transparent: bool,
    /// Relay every connection to this address instead (no TPROXY; tests).
    #[arg(long)]
    to: Option<SocketAddr>,
    /// Which socket crosses the satellite hop: outbound (terminal) or inbound (gateway).
    #[arg(long, value_enum)]
    hop_side: HopSide,
    /// Congestion control of the satellite-hop connection (reno, cubic, bbr, ...).
    #[arg(long)]
    hop_cc: Option<String>,
    /// Send and receive buffers of the satellite-hop socket in bytes (0: autotuning).
    #[arg(long, default_value_t = 0)]
    hop_buffer_bytes: usize,
    /// The control socket (Unix stream, newline-delimited JSON).
    #[arg(long)]
    control: PathBuf,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let hop = HopOptions {
        cc: args.hop_cc.clone(),
        buffer_bytes: args.hop_buffer_bytes,
    };
    let destination = match args.to {
        Some(to) => Destination::Fixed(to),
        None if args.transparent => Destination::Original,
        None => anyhow::bail!("give --transparent (TPROXY) or --to ADDRESS"),
    };
    // The listener carries the inbound hop's options so that accepted connections have
    // them from their SYN on (buffers fix the window scale then).
    let listen_hop = (args.hop_side == HopSide::Inbound).then_some(&hop);
    let listener = sys::listen(args.listen, args.transparent, listen_hop)
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let stats = Arc::new(Stats::default());
    let health = json!({
        "version": env!("CARGO_PKG_VERSION"),
        "listen": listener.local_addr()?.to_string(),
        "transparent": args.transparent,
        "hop_side": args.hop_side,
        "hop_cc": args.hop_cc,
        "hop_buffer_bytes": args.hop_buffer_bytes,
    });
    control::serve(&args.control, Arc::clone(&stats), health)?;
    let proxy = Arc::new(Proxy {
        destination,
        hop_side: args.hop_side,
        hop,
    });
    proxy
        .serve(listener, stats)
        .context("accepting connections")
}
