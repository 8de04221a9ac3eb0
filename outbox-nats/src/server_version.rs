//! What the connected nats-server's version changes: for the publisher,
//! and the reading of a version (the subscriber's failover checks it too).

use async_nats::ServerInfo;

/// The first nats-server release on which a refused chained publish can
/// stop a replicated stream (see [`refused_chain_stops_replicated_streams`]).
const FIRST_AFFECTED: (u64, u64) = (2, 14);

/// Whether a publish refused for its `Nats-Expected-Last-Msg-Id` may stop a
/// replicated stream of this server. From nats-server 2.14.0 on (checked up
/// to 2.14.5 and the development head of 26 Nov 2026), a replicated stream
/// checks that header only when its replicas apply the message, and since
/// 2.14 ("Filestore error handling") any error there that is not a limit
/// is a "critical write error": every replica steps down into observer
/// mode and the stream stores nothing more (each later publish times out)
/// until its servers restart. 2.9 to 2.12 logged the same refusal and went
/// on. A standalone server checks before storing and answers the refusal.
///
/// Chained runs count on the stream refusing the message when other
/// messages interleave, so they are not sent to a server of a cluster
/// (where streams may be replicated) from 2.14 on.
pub(crate) fn refused_chain_stops_replicated_streams(info: &ServerInfo) -> bool {
    let clustered = info.cluster.as_deref().is_some_and(|name| !name.is_empty());
    clustered && major_minor(&info.version).is_some_and(|version| version >= FIRST_AFFECTED)
}

/// `(major, minor)` of a server version such as `2.14.0`, `v2.10.22` or
/// `2.15.0-dev`.
pub(crate) fn major_minor(text: &str) -> Option<(u64, u64)> {
    let mut parts = text.trim_start_matches('v').split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts
        .next()?
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()?;
    Some((major, minor))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(version: &str, cluster: Option<&str>) -> ServerInfo {
        ServerInfo {
            version: version.to_owned(),
            cluster: cluster.map(str::to_owned),
            ..Default::default()
        }
    }

    #[test]
    fn clustered_servers_from_2_14_on() {
        assert!(refused_chain_stops_replicated_streams(&server(
            "2.14.0",
            Some("c")
        )));
        assert!(refused_chain_stops_replicated_streams(&server(
            "2.15.0-dev",
            Some("c")
        )));
        assert!(refused_chain_stops_replicated_streams(&server(
            "3.0.1",
            Some("c")
        )));
        assert!(!refused_chain_stops_replicated_streams(&server(
            "2.12.15",
            Some("c")
        )));
        assert!(!refused_chain_stops_replicated_streams(&server(
            "2.9.10",
            Some("c")
        )));
        assert!(!refused_chain_stops_replicated_streams(&server(
            "2.14.0", None
        )));
        assert!(!refused_chain_stops_replicated_streams(&server(
            "2.14.0",
            Some("")
        )));
        assert!(!refused_chain_stops_replicated_streams(&server(
            "garbage",
            Some("c")
        )));
    }
}
