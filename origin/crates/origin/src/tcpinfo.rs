//! `TCP_INFO` as the Linux kernel fills it (include/uapi/linux/tcp.h), up to the
//! RFC 4898 byte counters that libc's older struct lacks.

use std::io;
use std::os::fd::{AsFd, AsRawFd};

use serde::Serialize;

/// The kernel's `struct tcp_info`, up to `tcpi_reord_seen` (kernel 4.19 and later).
#[repr(C)]
#[derive(Default, Clone, Copy)]
struct RawTcpInfo {
    state: u8,
    ca_state: u8,
    retransmits: u8,
    probes: u8,
    backoff: u8,
    options: u8,
    wscale: u8,
    app_limited: u8,
    rto: u32,
    ato: u32,
    snd_mss: u32,
    rcv_mss: u32,
    unacked: u32,
    sacked: u32,
    lost: u32,
    retrans: u32,
    fackets: u32,
    last_data_sent: u32,
    last_ack_sent: u32,
    last_data_recv: u32,
    last_ack_recv: u32,
    pmtu: u32,
    rcv_ssthresh: u32,
    rtt: u32,
    rttvar: u32,
    snd_ssthresh: u32,
    snd_cwnd: u32,
    advmss: u32,
    reordering: u32,
    rcv_rtt: u32,
    rcv_space: u32,
    total_retrans: u32,
    pacing_rate: u64,
    max_pacing_rate: u64,
    bytes_acked: u64,
    bytes_received: u64,
    segs_out: u32,
    segs_in: u32,
    notsent_bytes: u32,
    min_rtt: u32,
    data_segs_in: u32,
    data_segs_out: u32,
    delivery_rate: u64,
    busy_time: u64,
    rwnd_limited: u64,
    sndbuf_limited: u64,
    delivered: u32,
    delivered_ce: u32,
    bytes_sent: u64,
    bytes_retrans: u64,
    dsack_dups: u32,
    reord_seen: u32,
}

/// What the kernel reports as the slow-start threshold before slow start first ends
/// (TCP_INFINITE_SSTHRESH).
const INFINITE_SSTHRESH: u32 = 0x7fff_ffff;

/// The counters origin reports for a TCP connection.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct TcpInfo {
    /// TCP payload bytes sent, retransmissions included (tcpi_bytes_sent).
    pub bytes_sent: u64,
    /// TCP payload bytes retransmitted (tcpi_bytes_retrans).
    pub bytes_retrans: u64,
    /// Bytes the peer acknowledged (tcpi_bytes_acked).
    pub bytes_acked: u64,
    /// Bytes received from the peer (tcpi_bytes_received).
    pub bytes_received: u64,
    /// Segments sent, pure ACKs and retransmissions included (tcpi_segs_out).
    pub segs_out: u32,
    /// Segments sent that carried data (tcpi_data_segs_out).
    pub data_segs_out: u32,
    /// Segments retransmitted over the connection's life (tcpi_total_retrans).
    pub total_retrans: u32,
    /// Congestion window in segments (tcpi_snd_cwnd).
    pub snd_cwnd: u32,
    /// Slow-start threshold in segments (tcpi_snd_ssthresh); absent while slow start
    /// has never ended (the kernel reports "infinite"). Set without a retransmission,
    /// it shows that Cubic's HyStart ended slow start on a rise in delay.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snd_ssthresh: Option<u32>,
    /// Sender MSS in bytes (tcpi_snd_mss).
    pub snd_mss: u32,
    /// Smoothed RTT in microseconds (tcpi_rtt).
    pub rtt_us: u32,
    /// Minimum RTT in microseconds (tcpi_min_rtt).
    pub min_rtt_us: u32,
}

/// Reads `TCP_INFO` from a socket.
pub fn read(sock: &impl AsFd) -> io::Result<TcpInfo> {
    let fd = sock.as_fd().as_raw_fd();
    let mut raw = RawTcpInfo::default();
    let mut len = std::mem::size_of::<RawTcpInfo>() as libc::socklen_t;
    // SAFETY: `raw` is a plain repr(C) struct of integers, `len` is its size, and the
    // kernel writes at most `len` bytes into it.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut raw as *mut RawTcpInfo).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    if (len as usize) < std::mem::offset_of!(RawTcpInfo, dsack_dups) {
        return Err(io::Error::other(
            "the kernel's TCP_INFO lacks tcpi_bytes_sent (needs Linux 4.19 or later)",
        ));
    }
    Ok(TcpInfo {
        bytes_sent: raw.bytes_sent,
        bytes_retrans: raw.bytes_retrans,
        bytes_acked: raw.bytes_acked,
        bytes_received: raw.bytes_received,
        segs_out: raw.segs_out,
        data_segs_out: raw.data_segs_out,
        total_retrans: raw.total_retrans,
        snd_cwnd: raw.snd_cwnd,
        snd_ssthresh: (raw.snd_ssthresh < INFINITE_SSTHRESH).then_some(raw.snd_ssthresh),
        snd_mss: raw.snd_mss,
        rtt_us: raw.rtt,
        min_rtt_us: raw.min_rtt,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn layout_matches_the_kernel() {
        assert_eq!(std::mem::offset_of!(RawTcpInfo, pacing_rate), 104);
        assert_eq!(std::mem::offset_of!(RawTcpInfo, bytes_sent), 200);
        assert_eq!(std::mem::size_of::<RawTcpInfo>(), 224);
    }

    #[test]
    fn counts_bytes_sent_on_loopback() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        server.write_all(&[7u8; 100_000]).unwrap();
        let mut buf = vec![0u8; 100_000];
        client.read_exact(&mut buf).unwrap();
        let info = read(&server).unwrap();
        assert_eq!(info.bytes_sent, 100_000);
        assert!(info.data_segs_out >= 1);
        // 100 kB on loopback without loss: slow start has not ended.
        assert_eq!(info.snd_ssthresh, None, "{info:?}");
    }
}
