//! The pure split (`--mode split`): every accepted connection is relayed over a new
//! connection of the proxy's own to the destination the client asked for. Run at the
//! terminal and at the gateway, the satellite hop carries the terminal's own
//! connection; nothing else changes (its handshake and slow start still cross the hop).

use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::thread;

use crate::guard::{Guard, Permit};
use crate::relay;
use crate::stats::{ConnInfo, Stats};
use crate::sys::{self, HopOptions};
use crate::{Destination, HopSide, Serve};

/// The pure split's settings.
#[derive(Clone, Debug)]
pub struct Proxy {
    pub destination: Destination,
    pub hop_side: HopSide,
    pub hop: HopOptions,
    pub guard: Guard,
}

impl Serve for Proxy {
    const THREAD: &'static str = "conn";

    fn handle(&self, inbound: TcpStream, peer: SocketAddr, stats: &Stats, _permit: Permit) {
        let Some(to) = self.destination.of(&inbound, peer, &self.guard, stats) else {
            return;
        };
        stats.accepted();
        let mut info = ConnInfo {
            accepted_from: peer.to_string(),
            destination: to.to_string(),
            open: true,
            ..ConnInfo::default()
        };
        let _ = inbound.set_nodelay(true);
        if self.hop_side == HopSide::Inbound {
            // Inherited from the listener already where the kernel does; set again so
            // that the hop's algorithm is certain before any data is sent.
            let _ = sys::apply_hop(
                inbound.as_raw_fd(),
                &HopOptions {
                    buffer_bytes: 0,
                    ..self.hop.clone()
                },
            );
        }
        let hop = (self.hop_side == HopSide::Outbound).then_some(&self.hop);
        let outbound = match sys::connect(SocketAddr::V4(to), hop) {
            Ok(s) => s,
            Err(e) => {
                stats.failed_before_relay(info, e.to_string());
                let _ = inbound.shutdown(Shutdown::Both);
                return;
            }
        };
        let _ = outbound.set_nodelay(true);
        stats.relayed();
        let hop_fd = match self.hop_side {
            HopSide::Outbound => outbound.as_raw_fd(),
            HopSide::Inbound => inbound.as_raw_fd(),
        };
        relay::note_relay(&mut info, &outbound, hop_fd);
        let slot = stats.open(info);
        let outbound_is_hop = self.hop_side == HopSide::Outbound;
        thread::scope(|s| {
            s.spawn(|| relay::plain(&inbound, &outbound, stats, slot, true, outbound_is_hop));
            relay::plain(&outbound, &inbound, stats, slot, false, !outbound_is_hop);
        });
        stats.update(slot, |c| c.open = false);
    }
}
