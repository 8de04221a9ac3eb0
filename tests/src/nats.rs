//! A private nats-server for fault tests: the testing kit's
//! [`NatsServer`] (its own port and store
//! directory, killed, frozen and restarted at will, never the machine's
//! shared server), which these tests use as a service's tests would.
//!
//! The binary is `nats-server` from `PATH`, or `OUTBOX_TEST_NATS_SERVER`.

pub use txoutbox_testing::nats::{NatsCluster, NatsServer, NatsServerBuilder};

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn config_applies_and_restart_keeps_port_and_store() {
        let mut server = NatsServer::builder()
            .config("max_payload: 4096")
            .start()
            .await
            .expect("a private nats-server");
        let client = server.connect().await.expect("a client");
        assert_eq!(client.server_info().max_payload, 4096);
        let jetstream = async_nats::jetstream::new(client.clone());
        jetstream
            .create_stream(async_nats::jetstream::stream::Config {
                name: "KEPT".into(),
                subjects: vec!["kept.>".into()],
                ..Default::default()
            })
            .await
            .expect("a file stream");
        let port = server.port();
        server.kill();
        assert!(!server.is_running());
        server.restart().await.expect("restarted");
        assert_eq!(server.port(), port);
        assert!(
            jetstream.get_stream("KEPT").await.is_ok(),
            "the stream survived in the store directory"
        );
    }

    #[tokio::test]
    async fn a_missing_binary_is_named_with_what_to_install() {
        let err = NatsServer::builder()
            .binary("/nonexistent/nats-server")
            .start()
            .await
            .expect_err("no such binary");
        let message = err.to_string();
        assert!(message.contains("install nats-server"), "{message}");
        assert!(message.contains("/nonexistent/nats-server"), "{message}");
    }
}
