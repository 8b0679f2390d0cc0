//! The accelerated mode at the gateway: a hop listener on the gateway's link-side
//! address, not transparent, that takes connections only from the terminal's link
//! address and only once they prove the testbed's key (frame.rs). Each hop connection
//! then carries streams one after another: OPEN names the destination, which must be
//! in the server's LAN and not the gateway itself; the gateway connects to it over its
//! LAN and relays.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, SocketAddrV4, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use crate::frame::{self, Frame, Open};
use crate::guard::{Guard, Permit, Prefix};
use crate::relay;
use crate::stats::{ConnInfo, HopUse, Refusal, Stats};
use crate::sys::{self, HopOptions};
use crate::Serve;

/// How long a new hop connection has to prove the key.
pub const AUTH_TIMEOUT: Duration = Duration::from_secs(10);

/// The accelerated gateway's settings.
#[derive(Debug)]
pub struct Gateway {
    /// The only source hop connections may come from (the terminal's link address).
    pub peer: Prefix,
    /// The testbed's key.
    pub key: Vec<u8>,
    /// What streams may be opened to (the server's LAN, never the gateway itself).
    pub guard: Guard,
    /// The hop's options (the listener carries them too, so accepted sockets have them
    /// from their SYN on).
    pub hop: HopOptions,
}

impl Serve for Gateway {
    const THREAD: &'static str = "hop";

    fn handle(&self, hop: TcpStream, peer: SocketAddr, stats: &Stats, permit: Permit) {
        self.hop(hop, peer, stats, permit)
    }
}

impl Gateway {
    fn authenticate(&self, hop: &TcpStream) -> io::Result<u64> {
        hop.set_read_timeout(Some(AUTH_TIMEOUT))?;
        let nonce = sys::random_bytes()?;
        (&*hop).write_all(&frame::challenge(&nonce))?;
        let mut hello = [0u8; frame::HELLO_LEN];
        (&*hop).read_exact(&mut hello)?;
        let id = frame::verify_hello(&self.key, &nonce, &hello)?;
        (&*hop).write_all(&frame::accepted())?;
        hop.set_read_timeout(None)?;
        Ok(id)
    }

    /// One hop connection: authenticate, then carry streams until it closes.
    fn hop(&self, hop: TcpStream, peer: SocketAddr, stats: &Stats, _permit: Permit) {
        let from_terminal = sys::v4(peer).is_ok_and(|p| self.peer.contains(*p.ip()));
        if !from_terminal {
            stats.refused(Refusal::Source);
            let _ = hop.shutdown(Shutdown::Both);
            return;
        }
        let id = match self.authenticate(&hop) {
            Ok(id) => id,
            Err(_) => {
                stats.refused(Refusal::Auth);
                let _ = hop.shutdown(Shutdown::Both);
                return;
            }
        };
        stats.hop_accepted();
        let _ = hop.set_nodelay(true);
        let _ = sys::apply_hop(
            hop.as_raw_fd(),
            &HopOptions {
                buffer_bytes: 0,
                ..self.hop.clone()
            },
        );
        let mut streams = 0;
        let mut idle_since = Instant::now();
        let mut buf = vec![0u8; frame::MAX_DATA];
        // Until it closes, or is out of step (anything but OPEN between streams).
        while let Ok(Frame::Open(open)) = frame::read_frame(&mut &hop, &mut buf) {
            streams += 1;
            let used = HopUse {
                id,
                pre_opened: open.pre_opened,
                streams,
                idle_ms: idle_since.elapsed().as_millis() as u64,
            };
            if self.stream(&hop, peer, open, used, stats).is_err() {
                break;
            }
            idle_since = Instant::now();
        }
        let _ = hop.shutdown(Shutdown::Both);
    }

    /// One stream; Err when the hop connection broke (it then ends).
    fn stream(
        &self,
        hop: &TcpStream,
        peer: SocketAddr,
        open: Open,
        used: HopUse,
        stats: &Stats,
    ) -> io::Result<()> {
        let mut info = ConnInfo {
            accepted_from: peer.to_string(),
            destination: open.destination.to_string(),
            open: true,
            stream: Some(open.stream),
            hop: Some(used),
            ..ConnInfo::default()
        };
        let client = SocketAddrV4::new(*open.client.ip(), open.client.port());
        // Sources were checked at the terminal and by the hop's key; here: where to.
        let unchecked = Guard {
            sources: Vec::new(),
            ..self.guard.clone()
        };
        if let Err(why) = unchecked.check(client, open.destination, sys::is_local) {
            stats.refused(why);
            frame::write_end(&mut &*hop, false)?;
            return relay::drain_hop(hop);
        }
        stats.accepted();
        let server = match sys::connect(SocketAddr::V4(open.destination), None) {
            Ok(s) => s,
            Err(e) => {
                stats.failed_before_relay(info, e.to_string());
                frame::write_end(&mut &*hop, false)?;
                return relay::drain_hop(hop);
            }
        };
        let _ = server.set_nodelay(true);
        stats.relayed();
        relay::note_relay(&mut info, &server, hop.as_raw_fd());
        let slot = stats.open(info);
        relay::with_hop(&server, hop, stats, slot, false)
    }
}
