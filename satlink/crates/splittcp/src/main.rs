//! `splittcp`: Clarke's split-TCP PEP (see lib.rs). The station's agent starts one per
//! station (terminal, gateway), installs the TPROXY rules that hand it the TCP
//! connections to intercept and, in the accelerated mode, the hop's route (docs/peps.md).

use std::fs::File;
use std::io::Read;
use std::net::{SocketAddr, TcpListener};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use clap::{Parser, ValueEnum};
use serde::Serialize;
use serde_json::{json, Value};

use splittcp::gateway::Gateway;
use splittcp::pool::PoolSettings;
use splittcp::terminal::{Dialer, SharedPool, Terminal};
use splittcp::{control, frame, sys};
use splittcp::{
    Destination, Guard, HopOptions, HopSide, Limit, Prefix, Proxy, Reporter, Serve, Stats,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, ValueEnum)]
#[serde(rename_all = "lowercase")]
enum Mode {
    /// Relay each connection over a new one of the proxy's own (the hop's handshake
    /// and slow start cross the satellite).
    Split,
    /// Pre-opened hop connections between terminal and gateway, tuned for the link.
    Accelerated,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, ValueEnum)]
#[serde(rename_all = "lowercase")]
enum Station {
    Terminal,
    Gateway,
}

#[derive(Parser, Debug)]
#[command(
    name = "splittcp",
    version,
    about = "Split-TCP performance-enhancing proxy"
)]
struct Args {
    #[arg(long, value_enum, default_value_t = Mode::Split)]
    mode: Mode,
    /// The station this proxy runs at.
    #[arg(long, value_enum)]
    station: Station,
    /// Where to listen: the clients' listener (TPROXY's --on-ip/--on-port land here;
    /// loopback), or the gateway's hop listener in the accelerated mode.
    #[arg(long)]
    listen: SocketAddr,
    /// IP_TRANSPARENT on the listener: take connections TPROXY hands it for any
    /// destination and relay each where its client was going.
    #[arg(long, conflicts_with = "to")]
    transparent: bool,
    /// Relay every connection to this address instead (no TPROXY; tests).
    #[arg(long)]
    to: Option<std::net::SocketAddrV4>,
    /// Accept connections only from these prefixes (repeat; none: any).
    #[arg(long = "allow-source", value_name = "PREFIX")]
    allow_sources: Vec<Prefix>,
    /// Relay only to these prefixes (repeat; none: any). The proxy's own addresses are
    /// refused whatever this says.
    #[arg(long = "allow-destination", value_name = "PREFIX")]
    allow_destinations: Vec<Prefix>,
    /// Connections at once, at most (each takes two threads and two descriptors).
    #[arg(long, default_value_t = 256)]
    max_connections: usize,
    /// Accelerated terminal: the gateway's hop listener.
    #[arg(long)]
    gateway: Option<SocketAddr>,
    /// Accelerated gateway: the only source of hop connections (the terminal's link
    /// address).
    #[arg(long)]
    hop_peer: Option<Prefix>,
    /// Accelerated: the testbed's hop key (a file only its owner may read).
    #[arg(long)]
    hop_key_file: Option<PathBuf>,
    /// Congestion control of the satellite-hop connection (reno, cubic, bbr, ...).
    #[arg(long)]
    hop_cc: Option<String>,
    /// Send and receive buffers of the satellite-hop socket in bytes (0: autotuning).
    #[arg(long, default_value_t = 0)]
    hop_buffer_bytes: usize,
    /// SO_MAX_PACING_RATE of the satellite-hop socket in bytes per second (0: none).
    #[arg(long, default_value_t = 0)]
    hop_max_pacing_rate: u64,
    /// Accelerated terminal: hop connections kept ready.
    #[arg(long, default_value_t = PoolSettings::default().size)]
    pool_size: usize,
    /// Accelerated terminal: hop connections opened at once, at most.
    #[arg(long, default_value_t = PoolSettings::default().max_opening)]
    pool_max_opening: usize,
    /// Accelerated terminal: ready connections kept beyond the pool's size when clients
    /// give theirs back.
    #[arg(long, default_value_t = PoolSettings::default().spare)]
    pool_spare: usize,
    /// The control socket (Unix stream, newline-delimited JSON).
    #[arg(long)]
    control: PathBuf,
}

/// The key in `path`: a regular file of this user's that nobody else may read, of
/// 16 bytes or more (surrounding whitespace is not part of it).
fn read_key(path: &Path) -> Result<Vec<u8>> {
    let mut file = File::options()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .with_context(|| format!("hop key file {}", path.display()))?;
    let meta = file.metadata()?;
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    if !meta.is_file() || meta.uid() != me || meta.mode() & 0o077 != 0 {
        bail!(
            "hop key file {}: must be a regular file of uid {me}, mode 0600 or stricter",
            path.display()
        );
    }
    let mut raw = Vec::new();
    file.read_to_end(&mut raw)?;
    let key = raw.trim_ascii().to_vec();
    if key.len() < frame::MIN_KEY_LEN {
        bail!(
            "hop key file {}: {} bytes; a key has {} at least",
            path.display(),
            key.len(),
            frame::MIN_KEY_LEN
        );
    }
    Ok(key)
}

/// The listener at --listen, its address noted in `health`.
fn listening(
    args: &Args,
    transparent: bool,
    hop: Option<&HopOptions>,
    health: &mut Value,
) -> Result<TcpListener> {
    let listener = sys::listen(args.listen, transparent, hop)
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    health["listen"] = json!(listener.local_addr()?.to_string());
    Ok(listener)
}

/// The control socket, reporting `stats`, `limit` and the terminal's pool if any.
fn serve_control(
    args: &Args,
    stats: &Arc<Stats>,
    limit: &Arc<Limit>,
    pool: Option<Arc<SharedPool>>,
    health: Value,
) -> Result<()> {
    let reporter = Reporter {
        stats: Arc::clone(stats),
        limit: Arc::clone(limit),
        pool,
    };
    control::serve(&args.control, Arc::new(reporter), health)
}

fn main() -> Result<()> {
    let args = Args::parse();
    let open_files = sys::raise_open_files();
    let hop = HopOptions {
        cc: args.hop_cc.clone(),
        buffer_bytes: args.hop_buffer_bytes,
        max_pacing_rate: args.hop_max_pacing_rate,
    };
    let destination = match args.to {
        Some(to) => Destination::Fixed(to),
        None => Destination::Original,
    };
    let guard = Guard {
        sources: args.allow_sources.clone(),
        destinations: args.allow_destinations.clone(),
        refuse_own: true,
    };
    let accelerated_gateway = args.mode == Mode::Accelerated && args.station == Station::Gateway;
    if !accelerated_gateway && !args.transparent && args.to.is_none() {
        bail!("give --transparent (TPROXY) or --to ADDRESS");
    }
    let stats = Arc::new(Stats::default());
    let limit = Limit::new(args.max_connections.max(1));
    let pool_settings = PoolSettings {
        size: args.pool_size,
        max_opening: args.pool_max_opening.max(1),
        spare: args.pool_spare,
        ..PoolSettings::default()
    };
    let mut health = json!({
        "version": env!("CARGO_PKG_VERSION"),
        "mode": args.mode,
        "station": args.station,
        "transparent": args.transparent,
        "hop_cc": args.hop_cc,
        "hop_buffer_bytes": args.hop_buffer_bytes,
        "hop_max_pacing_rate": args.hop_max_pacing_rate,
        "allow_sources": args.allow_sources.iter().map(|p| p.to_string()).collect::<Vec<_>>(),
        "allow_destinations": args.allow_destinations.iter().map(|p| p.to_string()).collect::<Vec<_>>(),
        "max_connections": limit.max(),
        "open_files": open_files,
    });
    match (args.mode, args.station) {
        (Mode::Split, station) => {
            let hop_side = match station {
                Station::Terminal => HopSide::Outbound,
                Station::Gateway => HopSide::Inbound,
            };
            // The listener carries the inbound hop's options so that accepted
            // connections have them from their SYN on (buffers fix the window scale).
            let listen_hop = (hop_side == HopSide::Inbound).then_some(&hop);
            let listener = listening(&args, args.transparent, listen_hop, &mut health)?;
            serve_control(&args, &stats, &limit, None, health)?;
            let proxy = Arc::new(Proxy {
                destination,
                hop_side,
                hop,
                guard,
            });
            proxy
                .serve(listener, stats, limit)
                .context("accepting connections")
        }
        (Mode::Accelerated, Station::Terminal) => {
            let Some(gateway) = args.gateway else {
                bail!("the accelerated terminal needs --gateway (the gateway's hop listener)");
            };
            let key = read_key(
                args.hop_key_file
                    .as_deref()
                    .context("give --hop-key-file")?,
            )?;
            let listener = listening(&args, args.transparent, None, &mut health)?;
            health["gateway"] = json!(gateway.to_string());
            health["pool"] = json!(pool_settings);
            let pool = SharedPool::new(pool_settings);
            serve_control(&args, &stats, &limit, Some(Arc::clone(&pool)), health)?;
            let dialer = Arc::new(Dialer::new(gateway, key, hop));
            Arc::new(Terminal::new(destination, guard, dialer, pool))
                .serve(listener, stats, limit)
                .context("accepting connections")
        }
        (Mode::Accelerated, Station::Gateway) => {
            let Some(peer) = args.hop_peer else {
                bail!("the accelerated gateway needs --hop-peer (the terminal's link address)");
            };
            let key = read_key(
                args.hop_key_file
                    .as_deref()
                    .context("give --hop-key-file")?,
            )?;
            let listener = listening(&args, false, Some(&hop), &mut health)?;
            health["hop_peer"] = json!(peer.to_string());
            serve_control(&args, &stats, &limit, None, health)?;
            Arc::new(Gateway {
                peer,
                key,
                guard,
                hop,
            })
            .serve(listener, stats, limit)
            .context("accepting hop connections")
        }
    }
}
