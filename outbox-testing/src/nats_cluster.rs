//! [`NatsCluster`]: a private JetStream cluster on loopback, whose nodes a
//! test kills, freezes and restarts one at a time.

use std::time::Duration;

use crate::nats::{NatsServer, NatsServerError, PORT_ATTEMPTS, free_port, jetstream_ready};

/// How long the cluster may take to elect its JetStream meta leader.
const QUORUM_TIMEOUT: Duration = Duration::from_secs(30);

/// A cluster of `n` nats-servers with JetStream on loopback: free client
/// and route ports, a store directory per node, routes between all of
/// them; each node a [`NatsServer`] (killed on drop). Streams with
/// `replicas(3)` on it are stored on a quorum of disks.
///
/// ```no_run
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use txoutbox_testing::nats::NatsCluster;
///
/// let mut cluster = NatsCluster::start(3).await?;
/// let client = cluster.connect().await?; // knows every node
/// let leader = cluster.stream_leader(&async_nats::jetstream::new(client), "EVENTS").await?;
/// cluster.node_mut(leader).kill();        // the stream elects another leader
/// cluster.node_mut(leader).restart().await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct NatsCluster {
    nodes: Vec<NatsServer>,
    names: Vec<String>,
}

impl NatsCluster {
    /// Starts `size` nodes (3 for a replicated stream) and waits until
    /// JetStream answers on each. Should a port chosen free be taken before
    /// its node binds it, starts them all again on other ports.
    pub async fn start(size: usize) -> Result<Self, NatsServerError> {
        Self::start_on(size, None).await
    }

    /// [`start`](Self::start) with the nats-server binary at `binary` (a
    /// newer server than the default one, say) for every node.
    pub async fn start_with_binary(
        size: usize,
        binary: impl Into<String>,
    ) -> Result<Self, NatsServerError> {
        Self::start_on(size, Some(binary.into())).await
    }

    async fn start_on(size: usize, binary: Option<String>) -> Result<Self, NatsServerError> {
        let mut attempts = 1;
        loop {
            match Self::start_once(size, binary.as_deref()).await {
                Err(err) if err.port_taken() && attempts < PORT_ATTEMPTS => attempts += 1,
                started => return started,
            }
        }
    }

    async fn start_once(size: usize, binary: Option<&str>) -> Result<Self, NatsServerError> {
        let route_ports = (0..size)
            .map(|_| free_port())
            .collect::<Result<Vec<_>, _>>()?;
        let routes = route_ports
            .iter()
            .map(|port| format!("nats-route://127.0.0.1:{port}"))
            .collect::<Vec<_>>()
            .join(",");
        let mut nodes = Vec::with_capacity(size);
        let mut names = Vec::with_capacity(size);
        for (k, port) in route_ports.iter().enumerate() {
            let name = format!("n{}", k + 1);
            let mut builder = NatsServer::builder();
            if let Some(binary) = binary {
                builder = builder.binary(binary);
            }
            let node = builder
                .port_only()
                .arg("--server_name")
                .arg(name.clone())
                .arg("--cluster_name")
                .arg("outbox-test")
                .arg("--cluster")
                .arg(format!("nats://127.0.0.1:{port}"))
                .arg("--routes")
                .arg(routes.clone())
                .start()
                .await?;
            nodes.push(node);
            names.push(name);
        }
        let cluster = Self { nodes, names };
        cluster.wait_for_quorum().await?;
        Ok(cluster)
    }

    /// Every node's client URL, comma-separated (as `NATS_URL` takes them).
    pub fn urls(&self) -> String {
        self.nodes
            .iter()
            .map(NatsServer::url)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// A client that knows every node and reconnects every 100 ms, forever.
    pub async fn connect(&self) -> Result<async_nats::Client, NatsServerError> {
        let addresses = self
            .nodes
            .iter()
            .map(|node| node.url().parse::<async_nats::ServerAddr>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|err| NatsServerError::NotReady {
                reason: format!("a node's URL: {err}"),
                log: String::new(),
            })?;
        let client = async_nats::ConnectOptions::new()
            .retry_on_initial_connect()
            .reconnect_delay_callback(|_| Duration::from_millis(100))
            .connect(addresses)
            .await?;
        let deadline = tokio::time::Instant::now() + QUORUM_TIMEOUT;
        while client.connection_state() != async_nats::connection::State::Connected {
            if tokio::time::Instant::now() > deadline {
                return Err(NatsServerError::NotReady {
                    reason: "no connection to the cluster".to_owned(),
                    log: self.logs(),
                });
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Ok(client)
    }

    /// How many nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the cluster has no node.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Node `index` (0-based), to kill, freeze, stop or restart.
    ///
    /// # Panics
    /// When there is no such node.
    pub fn node_mut(&mut self, index: usize) -> &mut NatsServer {
        &mut self.nodes[index]
    }

    /// The index of the node leading `stream` now.
    pub async fn stream_leader(
        &self,
        jetstream: &async_nats::jetstream::Context,
        stream: &str,
    ) -> Result<usize, NatsServerError> {
        let not_ready = |reason: String| NatsServerError::NotReady {
            reason,
            log: self.logs(),
        };
        let mut handle = jetstream
            .get_stream(stream)
            .await
            .map_err(|err| not_ready(format!("stream {stream}: {err}")))?;
        let info = handle
            .info()
            .await
            .map_err(|err| not_ready(format!("stream {stream}: {err}")))?;
        let leader = info
            .cluster
            .as_ref()
            .and_then(|cluster| cluster.leader.clone())
            .ok_or_else(|| not_ready(format!("stream {stream} has no leader")))?;
        self.names
            .iter()
            .position(|name| *name == leader)
            .ok_or_else(|| not_ready(format!("leader {leader} is not a node of this cluster")))
    }

    /// Every node's log, one after the other.
    pub fn logs(&self) -> String {
        self.nodes
            .iter()
            .zip(&self.names)
            .map(|(node, name)| format!("--- {name}\n{}", node.log()))
            .collect()
    }

    /// Waits until JetStream answers on every node (a meta leader is
    /// elected and every node knows it).
    async fn wait_for_quorum(&self) -> Result<(), NatsServerError> {
        let deadline = tokio::time::Instant::now() + QUORUM_TIMEOUT;
        for node in &self.nodes {
            while !jetstream_ready(node.port(), None).await {
                if tokio::time::Instant::now() > deadline {
                    return Err(NatsServerError::NotReady {
                        reason: "the cluster elected no JetStream meta leader".to_owned(),
                        log: self.logs(),
                    });
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        self.wait_for_placement(deadline).await
    }

    /// Waits until the meta leader places a stream on every node: a node
    /// answers JetStream before the leader counts it among the peers a
    /// replicated stream may use ("no suitable peers for placement"), which
    /// a loaded machine stretches to seconds. A probe stream with one
    /// replica a node is created, then deleted.
    async fn wait_for_placement(
        &self,
        deadline: tokio::time::Instant,
    ) -> Result<(), NatsServerError> {
        const PROBE: &str = "PLACEMENT_PROBE";
        let not_ready = |reason: String| NatsServerError::NotReady {
            reason,
            log: self.logs(),
        };
        let client = self.connect().await?;
        let jetstream = async_nats::jetstream::new(client.clone());
        let config = async_nats::jetstream::stream::Config {
            name: PROBE.to_owned(),
            subjects: vec!["placement.probe".to_owned()],
            num_replicas: self.nodes.len(),
            storage: async_nats::jetstream::stream::StorageType::Memory,
            ..Default::default()
        };
        loop {
            match jetstream.create_stream(config.clone()).await {
                Ok(_) => break,
                Err(err) if tokio::time::Instant::now() > deadline => {
                    return Err(not_ready(format!(
                        "the cluster placed no stream on its {} nodes: {err}",
                        self.nodes.len()
                    )));
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
        jetstream
            .delete_stream(PROBE)
            .await
            .map_err(|err| not_ready(format!("deleting the placement probe: {err}")))?;
        let _ = client.drain().await;
        Ok(())
    }
}
