//! The drain on a replicated stream (`drain-cluster`): one processor
//! draining a backlog into a file stream on a private single nats-server
//! (1 replica), then into a file stream with 3 replicas on a private 3-node
//! cluster on loopback (an ack means a quorum of the nodes stored the
//! message), each beside the raw JetStream ceiling of the same broker
//! measured in the same run.

use std::time::Duration;

use txoutbox_fixtures::nats::{NatsCluster, NatsServer};

use crate::children::drain::Settings;
use crate::harness::error::BoxError;
use crate::harness::fixture::{BenchStream, Broker};
use crate::harness::report::thousands;
use crate::parts::drain;
use crate::parts::jetstream;

/// Rows each drain publishes.
const ROWS: u64 = 100_000;
/// Raw publishes per ceiling measurement (after as many for warm-up).
const RAW: usize = 50_000;

/// What one broker measured.
struct Figures {
    broker: &'static str,
    raw: f64,
    drain: f64,
}

pub(crate) async fn run() -> Result<(), BoxError> {
    println!(
        "== drain-cluster: {} rows drained by one processor into a file stream, single server vs. \
         3-node cluster (3 replicas), each beside its raw ceiling ==",
        thousands(ROWS as f64)
    );
    let mut figures = Vec::new();
    {
        let server = NatsServer::start().await?;
        let broker = Broker {
            urls: server.url(),
            replicas: 1,
        };
        figures.push(measure("single server, 1 replica", &broker).await?);
    }
    {
        let cluster = NatsCluster::start(3).await?;
        let broker = Broker {
            urls: cluster.urls(),
            replicas: 3,
        };
        figures.push(measure("3-node cluster, 3 replicas", &broker).await?);
    }
    println!("| broker | raw ceiling | drain | drain / ceiling |");
    println!("|---|---|---|---|");
    for f in &figures {
        println!(
            "| {} | {} msgs/s | {} events/s | {:.0} % |",
            f.broker,
            thousands(f.raw),
            thousands(f.drain),
            100.0 * f.drain / f.raw
        );
    }
    if let [single, cluster] = figures.as_slice() {
        println!(
            "the cluster drains at {:.0} % of the single server's rate (raw ceiling: {:.0} %)",
            100.0 * cluster.drain / single.drain,
            100.0 * cluster.raw / single.raw
        );
    }
    Ok(())
}

async fn measure(name: &'static str, broker: &Broker) -> Result<Figures, BoxError> {
    let stream = BenchStream::create_on(broker).await?;
    jetstream::raw(&stream, RAW).await?;
    let raw = jetstream::raw(&stream, RAW).await?;
    stream.delete().await?;
    println!("{name}: raw ceiling {} msgs/s", thousands(raw));
    let drained = drain::drain_on(
        broker,
        Settings::default(),
        ROWS,
        ROWS,
        Duration::from_millis(100),
    )
    .await?;
    drained.print();
    Ok(Figures {
        broker: name,
        raw,
        drain: drained.rate(),
    })
}
