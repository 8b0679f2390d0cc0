//! Congestion control: names, availability checks and how each stack applies them.
//!
//! TCP algorithms are the kernel's, set per socket with `TCP_CONGESTION` and read back
//! from the kernel. QUIC algorithms are quinn's controllers, set per connection through
//! the transport configuration.

use std::fmt;
use std::io;
use std::os::fd::AsFd;
use std::str::FromStr;
use std::sync::Arc;

use quinn::congestion::{BbrConfig, ControllerFactory, CubicConfig, NewRenoConfig};
use serde::Serialize;
use socket2::SockRef;

/// Where the kernel lists the TCP congestion controls it can use.
pub const TCP_AVAILABLE: &str = "/proc/sys/net/ipv4/tcp_available_congestion_control";
/// quinn's initial congestion window where none is set: ten 1472-byte datagrams
/// (RFC 9002, section 7.2: 14720 bytes).
pub const QUINN_INITIAL_WINDOW: u64 = 14_720;

/// Errors in choosing or applying a congestion control.
#[derive(Debug, thiserror::Error)]
pub enum CcError {
    /// The name is not one origin knows for this protocol.
    #[error("unknown {protocol} congestion control {name:?} (expected one of: {expected})")]
    Unknown {
        protocol: &'static str,
        name: String,
        expected: String,
    },
    /// The kernel does not offer the algorithm (module not loaded or not built).
    #[error(
        "TCP congestion control {name:?} is not available in this network namespace \
         (available: {available}); load its module, e.g. `modprobe tcp_{name}`"
    )]
    Unavailable { name: String, available: String },
    /// The kernel refused `TCP_CONGESTION` on a socket.
    #[error("the kernel refused TCP congestion control {name:?}: {source}")]
    Refused { name: String, source: io::Error },
    /// The list of available algorithms could not be read.
    #[error("cannot read {TCP_AVAILABLE}: {0}")]
    ReadAvailable(io::Error),
}

/// An algorithm's name (as the kernel or quinn, and a campaign, spell it), its Display,
/// and its parsing from that name, refused naming the protocol and the names it knows.
macro_rules! named_algorithms {
    ($algorithm:ident, $protocol:literal, $($variant:ident => $name:literal),+) => {
        impl $algorithm {
            pub fn name(self) -> &'static str {
                match self {
                    $(Self::$variant => $name,)+
                }
            }
        }

        impl fmt::Display for $algorithm {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }

        impl FromStr for $algorithm {
            type Err = CcError;
            fn from_str(s: &str) -> Result<Self, CcError> {
                match s {
                    $($name => Ok(Self::$variant),)+
                    _ => Err(CcError::Unknown {
                        protocol: $protocol,
                        name: s.into(),
                        expected: [$($name),+].join(", "),
                    }),
                }
            }
        }
    };
}

/// A TCP congestion control algorithm of the Linux kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TcpCc {
    Cubic,
    Bbr,
    Reno,
}

named_algorithms!(TcpCc, "TCP", Cubic => "cubic", Bbr => "bbr", Reno => "reno");

impl TcpCc {
    /// Checks that the kernel offers this algorithm and lets this process use it, by
    /// setting it on a fresh socket.
    pub fn check_available(self) -> Result<(), CcError> {
        let available = tcp_available()?;
        if !available.iter().any(|a| a == self.name()) {
            return Err(CcError::Unavailable {
                name: self.name().into(),
                available: available.join(" "),
            });
        }
        let probe =
            socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).map_err(|source| {
                CcError::Refused {
                    name: self.name().into(),
                    source,
                }
            })?;
        set_tcp_cc(&probe, self)
    }
}

/// A QUIC congestion controller of quinn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum QuicCc {
    Cubic,
    Bbr,
    NewReno,
}

named_algorithms!(QuicCc, "QUIC", Cubic => "cubic", Bbr => "bbr", NewReno => "newreno");

impl QuicCc {
    /// The quinn controller factory, with the initial window if one is given (bytes).
    pub fn factory(self, initial_window: Option<u64>) -> Arc<dyn ControllerFactory + Send + Sync> {
        match self {
            Self::Cubic => {
                let mut c = CubicConfig::default();
                if let Some(w) = initial_window {
                    c.initial_window(w);
                }
                Arc::new(c)
            }
            Self::Bbr => {
                let mut c = BbrConfig::default();
                if let Some(w) = initial_window {
                    c.initial_window(w);
                }
                Arc::new(c)
            }
            Self::NewReno => {
                let mut c = NewRenoConfig::default();
                if let Some(w) = initial_window {
                    c.initial_window(w);
                }
                Arc::new(c)
            }
        }
    }
}

/// The TCP congestion controls the kernel offers in this network namespace.
pub fn tcp_available() -> Result<Vec<String>, CcError> {
    let text = std::fs::read_to_string(TCP_AVAILABLE).map_err(CcError::ReadAvailable)?;
    Ok(text.split_whitespace().map(str::to_owned).collect())
}

/// Sets `TCP_CONGESTION` on a socket.
pub fn set_tcp_cc(sock: &impl AsFd, cc: TcpCc) -> Result<(), CcError> {
    SockRef::from(sock)
        .set_tcp_congestion(cc.name().as_bytes())
        .map_err(|source| CcError::Refused {
            name: cc.name().into(),
            source,
        })
}

/// Reads `TCP_CONGESTION` back from the kernel.
pub fn get_tcp_cc(sock: &impl AsFd) -> io::Result<String> {
    let raw = SockRef::from(sock).tcp_congestion()?;
    let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
    Ok(String::from_utf8_lossy(&raw[..end]).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_known_names_and_refuses_others() {
        assert_eq!("bbr".parse::<TcpCc>().unwrap(), TcpCc::Bbr);
        assert_eq!("newreno".parse::<QuicCc>().unwrap(), QuicCc::NewReno);
        let err = "vegas".parse::<TcpCc>().unwrap_err().to_string();
        assert!(err.contains("unknown TCP congestion control \"vegas\""), "{err}");
        assert!("reno".parse::<QuicCc>().is_err());
    }

    #[test]
    fn reads_back_what_the_kernel_applied() {
        let avail = tcp_available().unwrap();
        let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        if avail.iter().any(|a| a == "reno") && TcpCc::Reno.check_available().is_ok() {
            set_tcp_cc(&sock, TcpCc::Reno).unwrap();
            assert_eq!(get_tcp_cc(&sock).unwrap(), "reno");
        }
    }
}
