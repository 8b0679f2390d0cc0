//! The part of Linux's `struct tcp_info` (linux/tcp.h) the proxy records: what the hop's
//! sender had at its first data. Parsed by offset from the bytes getsockopt returned, so
//! a kernel that reports a shorter struct yields None for the newer fields.

use serde::Serialize;

/// A TCP socket's state as the stats list it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TcpInfo {
    /// Congestion window, in segments.
    pub cwnd: u32,
    /// Sender's maximum segment size, in bytes.
    pub mss: u32,
    /// Slow-start threshold, in segments (2^31 - 1 while in the first slow start).
    pub ssthresh: u32,
    /// The receive window the peer last advertised, in bytes (kernel 5.4 and later).
    pub snd_wnd: Option<u32>,
    /// What the sender may have in flight: min(cwnd x mss, snd_wnd), in bytes.
    pub window_bytes: u64,
    /// The pacing rate TCP computed, in bytes per second.
    pub pacing_rate: u64,
    /// SO_MAX_PACING_RATE, in bytes per second; None when unlimited.
    pub max_pacing_rate: Option<u64>,
    /// Smoothed round-trip time, in microseconds.
    pub rtt_us: u32,
    /// Retransmissions over the connection's life.
    pub total_retrans: u32,
}

const SND_MSS: usize = 16;
const RTT: usize = 68;
const SND_SSTHRESH: usize = 76;
const SND_CWND: usize = 80;
const TOTAL_RETRANS: usize = 100;
const PACING_RATE: usize = 104;
const MAX_PACING_RATE: usize = 112;
const SND_WND: usize = 228;

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

impl TcpInfo {
    /// Parse what TCP_INFO returned; None when it lacks the pacing fields (kernel < 3.15).
    pub fn parse(b: &[u8]) -> Option<Self> {
        let (cwnd, mss) = (u32_at(b, SND_CWND)?, u32_at(b, SND_MSS)?);
        let snd_wnd = u32_at(b, SND_WND);
        let cwnd_bytes = u64::from(cwnd) * u64::from(mss);
        Some(Self {
            cwnd,
            mss,
            ssthresh: u32_at(b, SND_SSTHRESH)?,
            snd_wnd,
            window_bytes: snd_wnd.map_or(cwnd_bytes, |w| cwnd_bytes.min(u64::from(w))),
            pacing_rate: u64_at(b, PACING_RATE)?,
            max_pacing_rate: Some(u64_at(b, MAX_PACING_RATE)?).filter(|&r| r != u64::MAX),
            rtt_us: u32_at(b, RTT)?,
            total_retrans: u32_at(b, TOTAL_RETRANS)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put32(b: &mut [u8], at: usize, v: u32) {
        b[at..at + 4].copy_from_slice(&v.to_ne_bytes());
    }

    #[test]
    fn fields_at_the_kernel_offsets() {
        let mut b = vec![0u8; 240];
        put32(&mut b, SND_MSS, 1448);
        put32(&mut b, RTT, 530_344);
        put32(&mut b, SND_SSTHRESH, i32::MAX as u32);
        put32(&mut b, SND_CWND, 450);
        put32(&mut b, TOTAL_RETRANS, 2);
        b[PACING_RATE..PACING_RATE + 8].copy_from_slice(&1_250_000u64.to_ne_bytes());
        b[MAX_PACING_RATE..MAX_PACING_RATE + 8].copy_from_slice(&u64::MAX.to_ne_bytes());
        put32(&mut b, SND_WND, 1_998_752);
        let i = TcpInfo::parse(&b).unwrap();
        assert_eq!(
            (i.cwnd, i.mss, i.rtt_us, i.total_retrans),
            (450, 1448, 530_344, 2)
        );
        assert_eq!(
            i.window_bytes,
            450 * 1448,
            "the congestion window is the smaller"
        );
        assert_eq!(i.max_pacing_rate, None, "unlimited");
        put32(&mut b, SND_WND, 64_512);
        assert_eq!(
            TcpInfo::parse(&b).unwrap().window_bytes,
            64_512,
            "the peer's window"
        );
    }

    #[test]
    fn an_older_kernel_without_snd_wnd() {
        let mut b = vec![0u8; 200];
        put32(&mut b, SND_MSS, 1448);
        put32(&mut b, SND_CWND, 10);
        let i = TcpInfo::parse(&b).unwrap();
        assert_eq!((i.snd_wnd, i.window_bytes), (None, 14_480));
        assert!(TcpInfo::parse(&b[..100]).is_none());
    }
}
