//! A TCP link emulator for kernels without `sch_netem`: a proxy that
//! terminates each client connection, opens one to the upstream, and moves
//! the bytes of each direction through a rate-limited delay line.
//!
//! Used for the HTTP and FTP baselines of the testbed experiments (nginx,
//! vsftpd): the same delay and rate as the UDP relay gives NDN. What it
//! models and what not:
//!
//! - **Delay:** every chunk is delivered `delay` after the bottleneck
//!   serialises it; a new connection's first upstream bytes wait one extra
//!   round trip (the client's SYN/SYN-ACK the proxy answered at once).
//! - **Rate:** a virtual-time bottleneck per direction and connection
//!   (connections do not share it; the experiments run one at a time).
//! - **Queue:** at most `effective_queue()` plus one bandwidth-delay product
//!   in the proxy; beyond that it stops reading, so TCP's own flow control
//!   pushes back on the sender.
//! - **Not modelled:** loss, and the sender's slow start over the long path
//!   (each side's TCP sees a fast local hop); this favours TCP and is said so
//!   in the reports.
//!
//! Timers are tokio's (1 ms granularity), fine for delays of several ms.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::Impairment;

const CHUNK: usize = 16 << 10;

/// Starts proxies for each `(listen, upstream)` pair on the current tokio
/// runtime; returns the bound listen addresses.
pub async fn start(
    pairs: &[(SocketAddr, SocketAddr)],
    up: Impairment,
    down: Impairment,
) -> std::io::Result<Vec<SocketAddr>> {
    let mut bound = Vec::new();
    for &(listen, to) in pairs {
        let l = TcpListener::bind(listen).await?;
        bound.push(l.local_addr()?);
        let (up, down) = (up.clone(), down.clone());
        tokio::spawn(async move {
            while let Ok((client, _)) = l.accept().await {
                let (up, down) = (up.clone(), down.clone());
                // A failed upstream connect just closes the client's.
                tokio::spawn(async move {
                    let _ = proxy(client, to, up, down).await;
                });
            }
        });
    }
    Ok(bound)
}

async fn proxy(
    client: TcpStream,
    to: SocketAddr,
    up: Impairment,
    down: Impairment,
) -> std::io::Result<()> {
    let server = TcpStream::connect(to).await?;
    client.set_nodelay(true)?;
    server.set_nodelay(true)?;
    let handshake = up.delay + down.delay;
    let (cr, cw) = client.into_split();
    let (sr, sw) = server.into_split();
    let a = tokio::spawn(pump(cr, sw, up, handshake));
    let b = tokio::spawn(pump(sr, cw, down, Duration::ZERO));
    let _ = a.await;
    let _ = b.await;
    Ok(())
}

/// Moves bytes from `r` to `w` through the impairment; shuts `w` down at EOF.
async fn pump(
    mut r: tokio::net::tcp::OwnedReadHalf,
    mut w: tokio::net::tcp::OwnedWriteHalf,
    imp: Impairment,
    first_extra: Duration,
) {
    let bdp = imp
        .rate_bps
        .map_or(0, |r| (r as f64 / 8.0 * imp.delay.as_secs_f64()) as u64);
    let limit = imp.effective_queue().min(64 << 20) + bdp;
    let slots = ((limit as usize) / CHUNK).clamp(4, 4096);
    let (tx, mut rx) = mpsc::channel::<(Instant, Vec<u8>)>(slots);
    let reader = tokio::spawn(async move {
        let mut free = Instant::now();
        let mut extra = first_extra;
        loop {
            let mut buf = vec![0u8; CHUNK];
            let n = match r.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            buf.truncate(n);
            let now = Instant::now();
            free = free.max(now);
            if let Some(rate) = imp.rate_bps.filter(|r| *r > 0) {
                free += Duration::from_secs_f64(n as f64 * 8.0 / rate as f64);
            }
            let at = free + imp.delay + extra;
            extra = Duration::ZERO;
            if tx.send((at, buf)).await.is_err() {
                break;
            }
        }
    });
    while let Some((at, buf)) = rx.recv().await {
        tokio::time::sleep_until(at).await;
        if w.write_all(&buf).await.is_err() {
            break;
        }
    }
    let _ = w.shutdown().await;
    reader.abort();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn delays_and_rates_a_transfer() {
        let server = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let to = server.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut s, _) = server.accept().await.unwrap();
            let mut req = [0u8; 4];
            s.read_exact(&mut req).await.unwrap();
            s.write_all(&vec![7u8; 250_000]).await.unwrap();
        });
        let imp = Impairment {
            delay: Duration::from_millis(20),
            loss: 0.0,
            rate_bps: Some(20_000_000),
            queue_bytes: None,
        };
        let bound = start(&[("127.0.0.1:0".parse().unwrap(), to)], imp.clone(), imp)
            .await
            .unwrap();
        let t = std::time::Instant::now();
        let mut c = TcpStream::connect(bound[0]).await.unwrap();
        c.write_all(b"get!").await.unwrap();
        let mut got = Vec::new();
        c.read_to_end(&mut got).await.unwrap();
        let secs = t.elapsed().as_secs_f64();
        assert_eq!(got.len(), 250_000);
        assert!(got.iter().all(|&b| b == 7), "the bytes as sent");
        // handshake 40 ms + request 20 ms + 100 ms at 20 Mbit/s + 20 ms: the
        // relay delays and rates, so the transfer cannot take less (a lower
        // bound only: a loaded machine makes it longer, never shorter; the
        // figure itself is bench/netns-testbed.sh's to measure).
        assert!(secs > 0.17, "too fast: {secs}");
    }
}
