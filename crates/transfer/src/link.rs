//! How the engine reaches a forwarder: a [`Link`] sends batches of Interests
//! and receives batches of Data/Nacks. [`UnixLink`] is a node's Unix socket
//! (a reader task decodes frames and NDNLPv2 headers, so receiving is
//! cancel-safe); [`ChannelLink`] is a pair of channels, for an in-process
//! face ([`granary_face::internal::AppFace`]) or a component that already
//! multiplexes one.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use granary_face::framing::next_frame;
use granary_face::link::{decode_incoming, Reassembler};
use granary_face::{LinkFields, NetPacket};
use granary_packet::Interest;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::OwnedWriteHalf;
use tokio::net::UnixStream;
use tokio::sync::mpsc;

use crate::Error;

/// A received packet with its link fields (congestion mark).
pub type Incoming = (NetPacket, LinkFields);

/// A packet path to a forwarder.
#[allow(async_fn_in_trait)] // used generically, never as a trait object
pub trait Link {
    /// Sends Interests, in order.
    async fn send(&mut self, batch: &[Interest]) -> Result<(), Error>;
    /// Waits for packets and appends at least one to `out`. Must be
    /// cancel-safe (the engine races it against its timers).
    async fn recv(&mut self, out: &mut Vec<Incoming>) -> Result<(), Error>;
}

const MAX_PACKET: usize = 8800 * 8;

/// A node's Unix stream socket.
pub struct UnixLink {
    write: OwnedWriteHalf,
    rx: mpsc::Receiver<Result<Vec<Incoming>, Error>>,
    buf: BytesMut,
    reader: tokio::task::JoinHandle<()>,
    prehash: Arc<AtomicBool>,
}

impl UnixLink {
    /// Connects to `path`.
    pub async fn connect(path: &Path) -> Result<UnixLink, Error> {
        let sock = UnixStream::connect(path).await.map_err(|e| {
            Error::Connect(format!(
                "{}: {e} (is `granary daemon` running? set --socket or GRANARY_SOCKET)",
                path.display()
            ))
        })?;
        let (mut read, write) = sock.into_split();
        let (tx, rx) = mpsc::channel(256);
        let prehash = Arc::new(AtomicBool::new(false));
        let hashing = prehash.clone();
        let reader = tokio::spawn(async move {
            let mut buf = BytesMut::with_capacity(1 << 20);
            let mut reasm = Reassembler::new(64, Duration::from_secs(2), MAX_PACKET);
            loop {
                let mut batch = Vec::new();
                let res = loop {
                    match next_frame(&mut buf, MAX_PACKET) {
                        Ok(Some(frame)) => {
                            // Undecodable packets are dropped, as a face would.
                            if let Ok(Some(p)) =
                                decode_incoming(frame, &mut reasm, std::time::Instant::now())
                            {
                                if let (NetPacket::Data(d), true) =
                                    (&p.0, hashing.load(Ordering::Relaxed))
                                {
                                    d.content_sha256();
                                }
                                batch.push(p);
                            }
                        }
                        Ok(None) => break Ok(()),
                        Err(e) => break Err(Error::Link(e.to_string())),
                    }
                };
                if !batch.is_empty() && tx.send(Ok(batch)).await.is_err() {
                    return;
                }
                if let Err(e) = res {
                    let _ = tx.send(Err(e)).await;
                    return;
                }
                if buf.capacity() - buf.len() < 256 * 1024 {
                    buf.reserve(1 << 20);
                }
                match read.read_buf(&mut buf).await {
                    Ok(0) => {
                        let _ = tx
                            .send(Err(Error::Link("connection closed by the node".into())))
                            .await;
                        return;
                    }
                    Ok(_) => {}
                    Err(e) => {
                        let _ = tx.send(Err(Error::Link(e.to_string()))).await;
                        return;
                    }
                }
            }
        });
        Ok(UnixLink {
            write,
            rx,
            buf: BytesMut::with_capacity(64 * 1024),
            reader,
            prehash,
        })
    }

    /// Compute each received Data's content SHA-256 on the reader task
    /// ([`granary_packet::Data::content_sha256`]), so checking segments
    /// against a manifest costs the engine's thread a comparison instead
    /// of a hash: the two threads then share the per-byte work. Turn it on
    /// once the object turns out to have a manifest (otherwise the hash
    /// would go unused).
    pub fn prehash(&self, on: bool) {
        self.prehash.store(on, Ordering::Relaxed);
    }
}

impl Drop for UnixLink {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl Link for UnixLink {
    async fn send(&mut self, batch: &[Interest]) -> Result<(), Error> {
        self.buf.clear();
        for i in batch {
            self.buf.extend_from_slice(i.wire());
        }
        self.write
            .write_all(&self.buf)
            .await
            .map_err(|e| Error::Link(e.to_string()))
    }

    async fn recv(&mut self, out: &mut Vec<Incoming>) -> Result<(), Error> {
        match self.rx.recv().await {
            Some(Ok(mut b)) => {
                out.append(&mut b);
                while let Ok(Ok(mut more)) = self.rx.try_recv() {
                    out.append(&mut more);
                }
                Ok(())
            }
            Some(Err(e)) => Err(e),
            None => Err(Error::Link("connection closed".into())),
        }
    }
}

/// A link over channels: Interests go out on `tx` as network packets, Data
/// and Nacks come in on `rx`.
pub struct ChannelLink {
    /// Outgoing packets.
    pub tx: mpsc::Sender<Incoming>,
    /// Incoming packets.
    pub rx: mpsc::Receiver<Incoming>,
}

impl Link for ChannelLink {
    async fn send(&mut self, batch: &[Interest]) -> Result<(), Error> {
        for i in batch {
            self.tx
                .send((NetPacket::Interest(i.clone()), LinkFields::default()))
                .await
                .map_err(|_| Error::Link("the face is gone".into()))?;
        }
        Ok(())
    }

    async fn recv(&mut self, out: &mut Vec<Incoming>) -> Result<(), Error> {
        let p = self
            .rx
            .recv()
            .await
            .ok_or_else(|| Error::Link("the face is gone".into()))?;
        out.push(p);
        while let Ok(p) = self.rx.try_recv() {
            out.push(p);
        }
        Ok(())
    }
}

/// An in-process face used directly.
pub struct AppLink(pub granary_face::internal::AppFace);

impl Link for AppLink {
    async fn send(&mut self, batch: &[Interest]) -> Result<(), Error> {
        for i in batch {
            if !self
                .0
                .send(NetPacket::Interest(i.clone()), LinkFields::default())
                .await
            {
                return Err(Error::Link("the forwarder is gone".into()));
            }
        }
        Ok(())
    }

    async fn recv(&mut self, out: &mut Vec<Incoming>) -> Result<(), Error> {
        let p = self
            .0
            .recv()
            .await
            .ok_or_else(|| Error::Link("the forwarder is gone".into()))?;
        out.push(p);
        Ok(())
    }
}
