//! What a listener accepts (issue 37, item 2): a connection from an allowed source, for
//! an allowed destination that is not the proxy's own host, while the proxy has fewer
//! connections than it may. Anything else is closed before a byte is relayed.

use std::fmt;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::str::FromStr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::stats::Refusal;

/// An IPv4 prefix, "a.b.c.d/n" (a bare address is a /32).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Prefix {
    net: u32,
    len: u8,
}

impl Prefix {
    fn mask(&self) -> u32 {
        if self.len == 0 {
            0
        } else {
            u32::MAX << (32 - self.len)
        }
    }

    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        u32::from(ip) & self.mask() == self.net
    }
}

impl FromStr for Prefix {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (ip, len) = s.split_once('/').unwrap_or((s, "32"));
        let ip: Ipv4Addr = ip
            .parse()
            .map_err(|_| format!("{s:?}: not an IPv4 prefix"))?;
        let len: u8 = len
            .parse()
            .ok()
            .filter(|&n| n <= 32)
            .ok_or_else(|| format!("{s:?}: a prefix length is 0..32"))?;
        let p = Prefix { net: 0, len };
        Ok(Prefix {
            net: u32::from(ip) & p.mask(),
            len,
        })
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", Ipv4Addr::from(self.net), self.len)
    }
}

/// Which connections a listener takes. Empty lists allow every address.
#[derive(Clone, Debug, Default)]
pub struct Guard {
    pub sources: Vec<Prefix>,
    pub destinations: Vec<Prefix>,
    /// Refuse destinations that are this host's own addresses (always, but in tests on
    /// loopback).
    pub refuse_own: bool,
}

fn allowed(list: &[Prefix], ip: Ipv4Addr) -> bool {
    list.is_empty() || list.iter().any(|p| p.contains(ip))
}

impl Guard {
    /// Why a connection from `peer` to `destination` must be refused, if it must;
    /// `is_local` tells whether an address is this host's (sys::is_local).
    pub fn check(
        &self,
        peer: SocketAddrV4,
        destination: SocketAddrV4,
        is_local: impl Fn(Ipv4Addr) -> bool,
    ) -> Result<(), Refusal> {
        if !allowed(&self.sources, *peer.ip()) {
            return Err(Refusal::Source);
        }
        if !allowed(&self.destinations, *destination.ip()) {
            return Err(Refusal::Destination);
        }
        if self.refuse_own && is_local(*destination.ip()) {
            return Err(Refusal::OwnAddress);
        }
        Ok(())
    }
}

/// A bound on connections at once: each holds a `Permit` while it lives.
#[derive(Debug)]
pub struct Limit {
    max: usize,
    now: AtomicUsize,
}

/// One connection's place under the limit, given back when dropped.
#[derive(Debug)]
pub struct Permit(Arc<Limit>);

impl Limit {
    pub fn new(max: usize) -> Arc<Self> {
        Arc::new(Self {
            max,
            now: AtomicUsize::new(0),
        })
    }

    pub fn try_acquire(self: &Arc<Self>) -> Option<Permit> {
        self.now
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max).then_some(n + 1)
            })
            .ok()
            .map(|_| Permit(Arc::clone(self)))
    }

    pub fn in_use(&self) -> usize {
        self.now.load(Ordering::Acquire)
    }

    pub fn max(&self) -> usize {
        self.max
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.0.now.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(s: &str) -> SocketAddrV4 {
        s.parse().unwrap()
    }

    #[test]
    fn prefixes() {
        let p: Prefix = "198.18.2.77/24".parse().unwrap();
        assert_eq!(p.to_string(), "198.18.2.0/24");
        assert!(p.contains("198.18.2.1".parse().unwrap()));
        assert!(!p.contains("198.18.3.1".parse().unwrap()));
        let host: Prefix = "198.18.3.1".parse().unwrap();
        assert!(host.contains("198.18.3.1".parse().unwrap()));
        assert!(!host.contains("198.18.3.2".parse().unwrap()));
        assert!("0.0.0.0/0"
            .parse::<Prefix>()
            .unwrap()
            .contains("8.8.8.8".parse().unwrap()));
        for bad in ["198.18.0.0/33", "nope/8", "198.18.0.0/x", ""] {
            assert!(bad.parse::<Prefix>().is_err(), "{bad}");
        }
    }

    #[test]
    fn sources_destinations_and_the_proxy_itself() {
        let guard = Guard {
            sources: vec!["198.18.0.0/24".parse().unwrap()],
            destinations: vec!["198.18.2.0/24".parse().unwrap()],
            refuse_own: true,
        };
        let own = |ip: Ipv4Addr| ip == Ipv4Addr::new(198, 18, 2, 1) || ip.is_loopback();
        let client = a("198.18.0.2:40000");
        assert_eq!(guard.check(client, a("198.18.2.2:443"), own), Ok(()));
        assert_eq!(
            guard.check(a("198.19.0.1:40000"), a("198.18.2.2:443"), own),
            Err(Refusal::Source)
        );
        assert_eq!(
            guard.check(client, a("127.0.0.1:7010"), own),
            Err(Refusal::Destination)
        );
        assert_eq!(
            guard.check(client, a("198.18.2.1:7010"), own),
            Err(Refusal::OwnAddress),
            "in the allowed LAN, but the proxy's own address"
        );
    }

    #[test]
    fn the_limit_counts_live_permits() {
        let limit = Limit::new(2);
        let a = limit.try_acquire().unwrap();
        let b = limit.try_acquire().unwrap();
        assert!(limit.try_acquire().is_none());
        assert_eq!(limit.in_use(), 2);
        drop(a);
        let c = limit.try_acquire();
        assert!(c.is_some());
        drop((b, c));
        assert_eq!(limit.in_use(), 0);
    }
}
