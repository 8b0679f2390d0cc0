//! satlink: Clarke's user-space satellite link emulator. See satlink/README.md for the
//! contract (command line, configuration, control socket, event log).

mod control;
mod events;
mod log;
mod sat;
mod station;
mod sys;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};

use satlink_model::LinkConfig;

use crate::control::Controlled;
use crate::events::EventLog;
use crate::station::{Kind, Station};

/// User-space satellite link emulator: terminal (st), satellite (sat) and gateway (gw)
/// roles. ST and GW each own a TUN device and exchange IP packets over UDP through SAT.
#[derive(Parser)]
#[command(name = "satlink", version)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Gateway: shapes the forward direction (gateway -> terminal).
    Gw(StationArgs),
    /// Satellite terminal: shapes the return direction (terminal -> gateway).
    St(StationArgs),
    /// Satellite: relays carrier datagrams between the gateway and the terminal.
    Sat(SatArgs),
    /// Send one JSON request to a control socket and print the reply.
    Ctl {
        /// Path of the role's control socket.
        socket: PathBuf,
        /// The request, e.g. '{"cmd":"stats"}'.
        request: String,
    },
}

#[derive(Args)]
struct Common {
    /// The link configuration (JSON, the whole link; this role applies its part).
    #[arg(long, value_name = "FILE.json")]
    config: PathBuf,
    /// Where to create the control socket (Unix stream, newline-delimited JSON).
    #[arg(long, value_name = "SOCKET_PATH")]
    control: PathBuf,
    /// Write a per-frame event log to this file.
    #[arg(long, value_name = "FILE")]
    events: Option<PathBuf>,
    /// SCHED_FIFO priority of the packet threads (0: normal scheduling). Keeps other
    /// work on the host from delaying frames; falls back to normal when refused.
    #[arg(long, value_name = "PRIO", default_value_t = 10,
          value_parser = clap::value_parser!(i32).range(0..=99))]
    rt_priority: i32,
}

#[derive(Args)]
struct StationArgs {
    /// The TUN device to create (or attach to) and bring up.
    #[arg(long, value_name = "NAME")]
    dev: String,
    /// This station's UDP address on the emulation network.
    #[arg(long, value_name = "ADDR:PORT")]
    emu_bind: SocketAddr,
    /// The satellite's UDP address on the emulation network.
    #[arg(long, value_name = "ADDR:PORT")]
    sat: SocketAddr,
    #[command(flatten)]
    common: Common,
    /// Busy-wait this long before each deadline instead of sleeping (timer accuracy
    /// against CPU).
    #[arg(long, value_name = "US", default_value_t = 50)]
    spin_us: u64,
}

#[derive(Args)]
struct SatArgs {
    /// The satellite's UDP address on the emulation network.
    #[arg(long, value_name = "ADDR:PORT")]
    emu_bind: SocketAddr,
    /// The gateway's UDP address.
    #[arg(long, value_name = "ADDR:PORT")]
    gw: SocketAddr,
    /// The terminal's UDP address.
    #[arg(long, value_name = "ADDR:PORT")]
    st: SocketAddr,
    #[command(flatten)]
    common: Common,
}

fn main() {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) if !e.use_stderr() => e.exit(), // --help, --version
        Err(e) => {
            let msg = e.to_string();
            eprint!("ERROR: {}", msg.strip_prefix("error: ").unwrap_or(&msg));
            std::process::exit(1);
        }
    };
    if let Err(e) = run(cli) {
        eprintln!("ERROR: {e:#}");
        std::process::exit(1);
    }
}

fn load_config(path: &Path) -> Result<LinkConfig> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read config {}", path.display()))?;
    LinkConfig::from_json(&text).with_context(|| format!("bad config {}", path.display()))
}

fn ipv4(addrs: &[(&str, SocketAddr)]) -> Result<()> {
    for (flag, a) in addrs {
        if !a.is_ipv4() {
            bail!("{flag} {a}: the emulation network is IPv4 only");
        }
    }
    Ok(())
}

fn events(common: &Common, role: &str, cfg: &LinkConfig) -> Result<Option<EventLog>> {
    common
        .events
        .as_deref()
        .map(|p| EventLog::create(p, role, cfg, sys::now()))
        .transpose()
}

fn run(cli: Cli) -> Result<()> {
    let (common, role): (&Common, Arc<dyn Controlled>);
    let flush: Arc<dyn Fn() + Send + Sync>;
    let signals;
    match &cli.cmd {
        Cmd::Ctl { socket, request } => {
            println!("{}", control::client(socket, request)?);
            return Ok(());
        }
        Cmd::Gw(a) | Cmd::St(a) => {
            let kind = if matches!(cli.cmd, Cmd::Gw(_)) {
                Kind::Gw
            } else {
                Kind::St
            };
            log::set_role(kind.name());
            ipv4(&[("--emu-bind", a.emu_bind), ("--sat", a.sat)])?;
            let config = load_config(&a.common.config)?;
            let ev = events(&a.common, kind.name(), &config)?;
            signals = sys::block_signals();
            let st = Station::new(station::Options {
                kind,
                dev: a.dev.clone(),
                emu_bind: a.emu_bind,
                sat: a.sat,
                spin_us: a.spin_us,
                rt_priority: a.common.rt_priority,
                config,
                events: ev,
            })?;
            st.spawn()?;
            info!(
                "serving dev={} emu_bind={} sat={} spin_us={}",
                a.dev, a.emu_bind, a.sat, a.spin_us
            );
            let s = st.clone();
            flush = Arc::new(move || s.flush_events());
            common = &a.common;
            role = st;
        }
        Cmd::Sat(a) => {
            log::set_role("sat");
            ipv4(&[("--emu-bind", a.emu_bind), ("--gw", a.gw), ("--st", a.st)])?;
            let config = load_config(&a.common.config)?;
            let ev = events(&a.common, "sat", &config)?;
            signals = sys::block_signals();
            let sat = sat::Sat::new(a.emu_bind, a.gw, a.st, config, ev, a.common.rt_priority)?;
            sat.spawn()?;
            info!("serving emu_bind={} gw={} st={}", a.emu_bind, a.gw, a.st);
            let s = sat.clone();
            flush = Arc::new(move || s.flush_events());
            common = &a.common;
            role = sat;
        }
    }
    let flush_every = flush.clone();
    control::serve(&common.control, role)?;
    if common.events.is_some() {
        // The event log is buffered: flush it every second.
        let f = flush_every.clone();
        std::thread::Builder::new()
            .name("flush".into())
            .spawn(move || loop {
                std::thread::sleep(std::time::Duration::from_secs(1));
                f();
            })?;
    }
    println!("ready");
    let sig = sys::wait_signal(&signals);
    info!("{sig} received, exiting");
    flush();
    let _ = std::fs::remove_file(&common.control);
    Ok(())
}
