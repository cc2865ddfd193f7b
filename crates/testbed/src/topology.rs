//! Ready-made topologies.

use std::time::Duration;

use crate::{HostId, Impairment, LanId, LinkId, LinkSpec, Result, Testbed};

/// carepo's evaluation network (seed 001, Fig. 3): a server behind a slow
/// Internet link — 2.5 Mbit/s down (server → gateway), 0.5 Mbit/s up,
/// 20 ms each way — and a gateway on a fast LAN with the clients.
pub struct CarepoFig3 {
    /// The producer's host.
    pub server: HostId,
    /// The LAN's gateway (one end of the slow link).
    pub gateway: HostId,
    /// Clients on the LAN.
    pub clients: Vec<HostId>,
    /// server (a) — gateway (b).
    pub wan: LinkId,
    /// gateway and clients.
    pub lan: LanId,
}

impl CarepoFig3 {
    /// The slow link as the paper gives it.
    pub fn wan_spec() -> LinkSpec {
        let one_way = |rate| Impairment {
            delay: Duration::from_millis(20),
            loss: 0.0,
            rate_bps: Some(rate),
            queue_bytes: None,
        };
        LinkSpec {
            ab: one_way(2_500_000),
            ba: one_way(500_000),
            mtu: None,
        }
    }

    /// Builds it in `tb` with `clients` clients (`client1`, `client2`, …).
    pub fn build(tb: &mut Testbed, clients: usize) -> Result<CarepoFig3> {
        let server = tb.add_host("server")?;
        let gateway = tb.add_host("gateway")?;
        let clients = (1..=clients)
            .map(|i| tb.add_host(&format!("client{i}")))
            .collect::<Result<Vec<_>>>()?;
        let wan = tb.link(server, gateway, Self::wan_spec())?;
        let mut members = vec![gateway];
        members.extend(&clients);
        let lan = tb.lan(&members, LinkSpec::clean())?;
        Ok(CarepoFig3 {
            server,
            gateway,
            clients,
            wan,
            lan,
        })
    }
}
