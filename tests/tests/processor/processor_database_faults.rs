//! The database fails under the outbox: a private PostgreSQL or MariaDB
//! (never the machine's shared ones) whose connections are terminated
//! mid-batch (`pg_terminate_backend` / `KILL`, the processor's and the
//! writers'), which is restarted (a clean shutdown, and a crash) during a
//! drain and during writes, and which hangs (SIGSTOP) longer than the
//! processor's lease.
//! Writers go on through each fault. After each: nothing lost, nothing
//! published twice past dedup, per-aggregate order intact, the processor
//! resumes by itself, and every commit the unit of work reported as
//! successful is in the table and published (a cut transaction is an
//! error, never a silent success).

mod processor_support;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use processor_support::{
    assert_all_published_cleanly, assert_stream_matches_outbox, outbox_for, spawn_tuned,
    wait_all_published_within,
};
use txoutbox_core::MessageId;
use txoutbox_sea_orm::Outbox;
use txoutbox_suite::jetstream::{TestStream, nats_url};
use txoutbox_suite::orders::Order;
use txoutbox_suite::private_postgres::Shutdown;
use txoutbox_suite::private_server::PrivateServer;
use txoutbox_suite::{Backend, TestDb};

/// What happens to the database a second into the traffic.
#[derive(Debug, Clone, Copy)]
enum Fault {
    TerminateConnections,
    Restart(Shutdown),
    HangLongerThanTheLease,
}

/// One fault at a time: a private server, four writers and a processor are
/// what a 2-core machine carries.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

macro_rules! on_both_servers {
    ($($name:ident: $fault:expr;)*) => {
        mod postgres {
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    survives(Backend::Postgres, $fault).await;
                }
            )*
        }
        mod mariadb {
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    survives(Backend::MySql, $fault).await;
                }
            )*
        }
    };
}

on_both_servers! {
    terminated_connections_lose_nothing: Fault::TerminateConnections;
    a_clean_restart_loses_nothing: Fault::Restart(Shutdown::Fast);
    a_crash_and_restart_loses_nothing: Fault::Restart(Shutdown::Immediate);
    a_database_hung_past_the_lease_loses_nothing: Fault::HangLongerThanTheLease;
}

/// What the writers saw: the ids of every commit reported successful,
/// and the errors of the others.
#[derive(Default)]
struct Writes {
    committed: Vec<MessageId>,
    errors: Vec<String>,
}

async fn survives(backend: Backend, fault: Fault) {
    let _turn = ONE_AT_A_TIME.lock().await;
    let mut server = PrivateServer::start(backend).await;
    let test = TestDb::with_schema_on(backend, &server.url()).await;
    let client = async_nats::connect(nats_url()).await.expect("nats");
    let stream = TestStream::new(client.clone()).await;
    let (outbox, table) = outbox_for(&test, &stream.prefix);
    let processor = spawn_tuned(&outbox, client, "/db-faults-test", |builder| {
        builder
            .batch_size(100)
            .poll_interval(Duration::from_millis(100))
    });
    let writes = Arc::new(Mutex::new(Writes::default()));
    let stop = tokio_util::sync::CancellationToken::new();
    let writers: Vec<_> = (0..4)
        .map(|w| tokio::spawn(write(outbox.clone(), w, writes.clone(), stop.clone())))
        .collect();

    tokio::time::sleep(Duration::from_secs(1)).await;
    match fault {
        Fault::TerminateConnections => {
            for _ in 0..3 {
                let cut = server.terminate_connections().await;
                println!("terminated {cut} connections");
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        }
        Fault::Restart(mode) => server.restart(mode).await,
        Fault::HangLongerThanTheLease => {
            server.freeze();
            tokio::time::sleep(txoutbox_core::processor::DEFAULT_LEASE + Duration::from_secs(2))
                .await;
            server.thaw();
        }
    }
    tokio::time::sleep(Duration::from_secs(1)).await; // writing goes on
    stop.cancel();
    for writer in writers {
        writer.await.expect("a writer");
    }
    let total = test.count(&table, "1=1").await;
    wait_all_published_within(&test, &table, total, Duration::from_secs(60)).await;
    let report = processor.shutdown().await.expect("clean stop");

    let writes = std::mem::take(&mut *writes.lock().expect("writes"));
    let stored: HashSet<MessageId> = test
        .rows(&format!("SELECT id FROM {table}"))
        .await
        .into_iter()
        .map(|row| MessageId::from_uuid(row.try_get::<uuid::Uuid>("", "id").expect("an id")))
        .collect();
    let missing = writes
        .committed
        .iter()
        .filter(|id| !stored.contains(id))
        .count();
    assert_eq!(missing, 0, "every commit reported successful is stored");
    println!(
        "{backend:?} {fault:?}: {} events committed, {} commits failed with an error (e.g. {:?}), {total} rows; {report:?}",
        writes.committed.len(),
        writes.errors.len(),
        writes.errors.first()
    );
    assert_stream_matches_outbox(&stream, &test, &table).await;
    assert_all_published_cleanly(&test, &table).await;
    assert_eq!(report.dead + report.failed, 0, "{report:?}");
    drop(test);
    stream.delete().await;
}

/// Saves new orders (2 events each) one unit of work at a time until
/// `stop`, recording what each commit reported.
async fn write(
    outbox: Outbox,
    writer: usize,
    writes: Arc<Mutex<Writes>>,
    stop: tokio_util::sync::CancellationToken,
) {
    let mut n = 0;
    while !stop.is_cancelled() {
        n += 1;
        let mut order = Order::place(format!("w{writer}-{n}"), 100).expect("record");
        order.amend(200).expect("record");
        let mut uow = outbox.begin();
        let result = match uow.save(&mut order).await {
            Ok(()) => uow.commit().await,
            Err(err) => Err(err),
        };
        {
            let mut writes = writes.lock().expect("writes");
            match result {
                Ok(ids) => writes.committed.extend(ids),
                Err(err) => writes.errors.push(err.to_string()),
            }
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
