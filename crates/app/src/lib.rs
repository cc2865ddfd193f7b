//! # granary-app
//!
//! A small client for a forwarder's Unix socket: express an Interest and
//! wait for its Data or Nack, send NFD management commands, fetch datasets.
#![forbid(unsafe_code)]

use std::path::Path;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use granary_face::framing::next_frame;
use granary_face::link::{decode_incoming, Reassembler};
use granary_face::NetPacket;
use granary_mgmt::{make_command, ControlParameters, ControlResponse, TlvElement};
use granary_packet::{Component, Data, InterestFields, Name};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

/// Client errors.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Could not connect.
    #[error("cannot connect to {path}: {source} (is `granary daemon` running? set --socket or GRANARY_SOCKET)")]
    Connect {
        /// Socket path.
        path: String,
        /// Cause.
        source: std::io::Error,
    },
    /// Socket I/O failed.
    #[error("connection: {0}")]
    Io(#[from] std::io::Error),
    /// No answer in time.
    #[error("no answer for {0} within the Interest lifetime")]
    Timeout(String),
    /// A Nack came back.
    #[error("Nack ({reason}) for {name}")]
    Nack {
        /// Interest name.
        name: String,
        /// Reason text.
        reason: String,
    },
    /// Malformed reply.
    #[error("bad reply: {0}")]
    Bad(String),
    /// The node refused a command.
    #[error("{code} {text}")]
    Refused {
        /// StatusCode.
        code: u32,
        /// StatusText.
        text: String,
    },
}

/// What came back for an Interest.
#[allow(clippy::large_enum_variant)] // returned once per Interest; no need to box
#[derive(Debug, Clone)]
pub enum Reply {
    /// Data.
    Data(Data),
    /// Nack with reason.
    Nack(u64),
}

/// A connection to a forwarder.
pub struct Client {
    sock: UnixStream,
    buf: BytesMut,
    reasm: Reassembler,
    /// Nonces for Interests sent without one (decision 0081: `fastrand`).
    nonces: fastrand::Rng,
}

impl Client {
    /// Connects to a Unix socket.
    pub async fn connect(path: &Path) -> Result<Client, Error> {
        let sock = UnixStream::connect(path)
            .await
            .map_err(|source| Error::Connect {
                path: path.display().to_string(),
                source,
            })?;
        Ok(Client {
            sock,
            buf: BytesMut::with_capacity(64 * 1024),
            reasm: Reassembler::new(16, Duration::from_secs(2), 8800 * 8),
            nonces: fastrand::Rng::new(),
        })
    }

    /// Sends raw packet bytes.
    pub async fn send_raw(&mut self, wire: &[u8]) -> Result<(), Error> {
        self.sock.write_all(wire).await?;
        Ok(())
    }

    /// Expresses an Interest (a Nonce is added if missing) and waits up to
    /// its lifetime (+ 200 ms) for a Data or Nack that answers it.
    pub async fn express(&mut self, mut f: InterestFields) -> Result<Reply, Error> {
        if f.nonce.is_none() {
            f.nonce = Some(self.nonces.u32(..));
        }
        let lifetime =
            Duration::from_millis(f.lifetime.unwrap_or(4000)) + Duration::from_millis(200);
        let i = f.encode();
        self.sock.write_all(i.wire()).await?;
        let name = i.name.clone();
        let deadline = tokio::time::Instant::now() + lifetime;
        loop {
            let got = tokio::time::timeout_at(deadline, self.next_packet())
                .await
                .map_err(|_| Error::Timeout(name.to_string()))??;
            match got {
                NetPacket::Data(d) if d.matches_name(&name, i.can_be_prefix) => {
                    return Ok(Reply::Data(d))
                }
                NetPacket::Nack(n, r) if n.name == name => return Ok(Reply::Nack(r)),
                _ => continue,
            }
        }
    }

    /// Receives the next packet from the node, whatever it answers (for
    /// pipelined consumers and producers that send with [`Client::send_raw`]).
    /// Cancel-safe: a packet is never lost when the future is dropped.
    pub async fn recv(&mut self) -> Result<NetPacket, Error> {
        self.next_packet().await
    }

    async fn next_packet(&mut self) -> Result<NetPacket, Error> {
        loop {
            while let Some(frame) =
                next_frame(&mut self.buf, 8800 * 8).map_err(|e| Error::Bad(e.to_string()))?
            {
                if let Some((p, _)) =
                    decode_incoming(frame, &mut self.reasm, std::time::Instant::now())
                        .map_err(|e| Error::Bad(e.to_string()))?
                {
                    return Ok(p);
                }
            }
            if self.sock.read_buf(&mut self.buf).await? == 0 {
                return Err(Error::Bad("connection closed by the node".into()));
            }
        }
    }

    /// Sends a management command (unsigned v0.3 form, accepted on local
    /// faces) and returns the ControlParameters of a successful response.
    pub async fn command(
        &mut self,
        prefix: &Name,
        module: &str,
        verb: &str,
        p: &ControlParameters,
    ) -> Result<ControlParameters, Error> {
        let mut f = make_command(prefix, module, verb, p);
        f.lifetime = Some(4000);
        let d = match self.express(f).await? {
            Reply::Data(d) => d,
            Reply::Nack(r) => {
                return Err(Error::Nack {
                    name: format!("{module}/{verb}"),
                    reason: granary_packet::types::nack_reason::name(r).into(),
                })
            }
        };
        let r = ControlResponse::decode(&Bytes::copy_from_slice(d.content()))
            .map_err(|e| Error::Bad(e.to_string()))?;
        if !r.is_success() {
            return Err(Error::Refused {
                code: r.status_code,
                text: r.status_text,
            });
        }
        match r.params() {
            Some(Ok(p)) => Ok(p),
            Some(Err(e)) => Err(Error::Bad(e.to_string())),
            None => Ok(ControlParameters::new()),
        }
    }

    /// Fetches a segmented dataset (e.g. `/localhost/nfd/faces/list`).
    pub async fn dataset(&mut self, name: &Name) -> Result<Bytes, Error> {
        let mut f = InterestFields::new(name.clone());
        f.can_be_prefix = true;
        f.must_be_fresh = true;
        f.lifetime = Some(2000);
        let first = match self.express(f).await? {
            Reply::Data(d) => d,
            Reply::Nack(r) => {
                return Err(Error::Nack {
                    name: name.to_string(),
                    reason: granary_packet::types::nack_reason::name(r).into(),
                })
            }
        };
        let mut segs = vec![first.clone()];
        let last = first
            .final_block_id()
            .and_then(|c| c.as_ref().as_segment())
            .unwrap_or(0);
        let versioned = first.name().prefix(-1);
        for s in 1..=last {
            let mut f = InterestFields::new(versioned.append(&Component::segment(s)));
            f.lifetime = Some(2000);
            match self.express(f).await? {
                Reply::Data(d) => segs.push(d),
                Reply::Nack(r) => {
                    return Err(Error::Nack {
                        name: versioned.to_string(),
                        reason: granary_packet::types::nack_reason::name(r).into(),
                    })
                }
            }
        }
        granary_mgmt::reassemble_dataset(&segs).map_err(|e| Error::Bad(e.to_string()))
    }
}

impl Client {
    /// Registers `prefix` for this connection (rib/register with FaceId 0).
    pub async fn register(&mut self, prefix: &Name) -> Result<(), Error> {
        let mut p = ControlParameters::new();
        p.name = Some(prefix.clone());
        self.command(
            &Name::from_uri(granary_mgmt::LOCALHOST_NFD).unwrap_or_default(),
            "rib",
            "register",
            &p,
        )
        .await?;
        Ok(())
    }

    /// Serves Interests forever: `answer` turns each Interest into a Data
    /// (already encoded), or `None` to stay silent.
    pub async fn serve(
        &mut self,
        mut answer: impl FnMut(&granary_packet::Interest) -> Option<Data>,
    ) -> Result<(), Error> {
        loop {
            if let NetPacket::Interest(i) = self.next_packet().await? {
                if let Some(d) = answer(&i) {
                    self.sock.write_all(d.wire()).await?;
                }
            }
        }
    }
}
