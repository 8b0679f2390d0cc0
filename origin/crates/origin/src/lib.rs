//! origin: Clarke's built-in web server for the testbed's server role.
//!
//! Serves a directory over HTTP/1.1 (cleartext and TLS), HTTP/2 (TLS, ALPN) and
//! HTTP/3 (QUIC, same port number on UDP), with a chosen congestion control per
//! protocol and per-connection statistics on a separate control endpoint.

pub mod acks;
pub mod body;
pub mod cc;
pub mod control;
pub mod delay;
pub mod exchanges;
pub mod files;
pub mod frames;
pub mod gate;
pub mod h3conn;
pub mod hello;
pub mod observe;
pub mod priorities;
pub mod quic;
pub mod quic_fin;
pub mod replay;
pub mod sched;
#[cfg(test)]
mod scratch;
pub mod server;
pub mod settings;
pub mod shared;
pub mod stats;
pub mod tap;
pub mod tcp;
pub mod tcpinfo;
pub mod tls;

pub use replay::SiteOptions;
pub use server::{Options, Server};
pub use shared::{Addrs, Service};
