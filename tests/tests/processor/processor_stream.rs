//! The stream and the broker as the processor meets them: `StreamSpec::ensure`
//! creates the stream or refuses one that does not fit (typed errors);
//! publishing on a subject no stream captures is the message's problem
//! (rejected, spends attempts, ends dead with the reason), while a broker
//! that is down is nobody's (no attempt spent).

mod processor_support;

use std::time::Duration;

use async_nats::jetstream::{self, stream::Config, stream::StorageType};
use processor_support::{
    assert_stream_matches_outbox, outbox_for, private_server_setup, quick_retry, save_new_order,
    spawn_tuned, wait_all_published_within, wait_for_rows, wait_until,
};
use txoutbox_nats::{StreamError, StreamSpec};
use txoutbox_suite::jetstream::{TestStream, nats_url};
use txoutbox_suite::{Backend, TestDb};

const LEASE: Duration = Duration::from_secs(30);
/// A duplicate window longer than [`LEASE`], as `StreamSpec` wants.
const WINDOW: Duration = Duration::from_secs(120);
/// The processors' poll interval.
const QUICK_POLL: Duration = Duration::from_millis(100);

fn tag() -> String {
    uuid::Uuid::now_v7().simple().to_string()[16..].to_owned()
}

/// A memory stream `name` capturing `subject`, created directly (not
/// through `StreamSpec`) with `duplicate_window`.
async fn raw_stream(
    jetstream: &jetstream::Context,
    name: &str,
    subject: &str,
    duplicate_window: Duration,
) {
    jetstream
        .create_stream(Config {
            name: name.to_owned(),
            subjects: vec![subject.to_owned()],
            duplicate_window,
            storage: StorageType::Memory,
            max_age: Duration::from_secs(600),
            ..Config::default()
        })
        .await
        .expect("create the stream");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ensure_creates_the_stream_then_accepts_it() {
    let jetstream = jetstream::new(async_nats::connect(nats_url()).await.expect("nats"));
    let t = tag();
    let spec = StreamSpec::new(format!("E_{t}"), [format!("e{t}.>")])
        .storage(StorageType::Memory)
        .duplicate_window(Duration::from_secs(90))
        .max_age(Duration::from_secs(600))
        .processor_lease(LEASE);
    let created = spec.ensure(&jetstream).await.expect("created");
    assert_eq!(created.config.subjects, [format!("e{t}.>")]);
    assert_eq!(created.config.duplicate_window, Duration::from_secs(90));
    let again = spec.ensure(&jetstream).await.expect("accepted as is");
    assert_eq!(
        again.created, created.created,
        "the same stream, not a new one"
    );
    jetstream.delete_stream(spec.name()).await.expect("delete");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ensure_refuses_a_stream_without_the_subjects() {
    let jetstream = jetstream::new(async_nats::connect(nats_url()).await.expect("nats"));
    let t = tag();
    let name = format!("E_{t}");
    raw_stream(&jetstream, &name, &format!("e{t}.orders.>"), WINDOW).await;
    let result = StreamSpec::new(&name, [format!("e{t}.orders.>"), format!("e{t}.>")])
        .processor_lease(LEASE)
        .ensure(&jetstream)
        .await;
    jetstream.delete_stream(&name).await.expect("delete");
    match result {
        Err(StreamError::SubjectsMissing {
            stream,
            missing,
            actual,
        }) => {
            assert_eq!(stream, name);
            assert_eq!(missing, [format!("e{t}.>")]);
            assert_eq!(actual, [format!("e{t}.orders.>")]);
        }
        other => panic!("expected SubjectsMissing, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ensure_uses_another_stream_that_captures_every_subject() {
    // A second service on a shared server: the README's `DLQ` on `dlq.>`
    // exists; this service's spec names a stream of its own on one subject.
    let jetstream = jetstream::new(async_nats::connect(nats_url()).await.expect("nats"));
    let t = tag();
    let shared = format!("ALL_{t}");
    raw_stream(&jetstream, &shared, &format!("all{t}.>"), WINDOW).await;
    let result = StreamSpec::new(format!("ONE_{t}"), [format!("all{t}.billing")])
        .processor_lease(LEASE)
        .ensure_reporting(&jetstream)
        .await;
    let one_exists = jetstream.get_stream(format!("ONE_{t}")).await.is_ok();
    jetstream.delete_stream(&shared).await.expect("delete");
    let ensured = result.expect("the shared stream is used");
    assert_eq!(ensured.info.config.name, shared);
    assert!(!ensured.created);
    assert!(!one_exists, "no second stream was made");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ensure_names_the_streams_that_capture_part_of_its_subjects() {
    // The other way round: a service made `ONE` on one subject; the spec
    // wants every subject under the prefix.
    let jetstream = jetstream::new(async_nats::connect(nats_url()).await.expect("nats"));
    let t = tag();
    let one = format!("ONE_{t}");
    raw_stream(&jetstream, &one, &format!("part{t}.billing"), WINDOW).await;
    let result = StreamSpec::new(format!("ALL_{t}"), [format!("part{t}.>")])
        .processor_lease(LEASE)
        .ensure(&jetstream)
        .await;
    jetstream.delete_stream(&one).await.expect("delete");
    match result {
        Err(err @ StreamError::SubjectsOverlap { .. }) => {
            let text = err.to_string();
            assert!(text.contains(&format!("`{one}`")), "{text}");
            assert!(text.contains("nats stream rm"), "{text}");
            let StreamError::SubjectsOverlap { overlapping, .. } = err else {
                unreachable!()
            };
            assert_eq!(overlapping.len(), 1, "{overlapping:?}");
            assert_eq!(overlapping[0].subjects, [format!("part{t}.billing")]);
        }
        other => panic!("expected SubjectsOverlap, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ensure_refuses_a_duplicate_window_not_longer_than_the_lease() {
    let jetstream = jetstream::new(async_nats::connect(nats_url()).await.expect("nats"));
    let t = tag();
    let name = format!("E_{t}");
    let subjects = [format!("e{t}.>")];

    // Configured too short: refused before asking the server.
    match StreamSpec::new(&name, subjects.clone())
        .duplicate_window(LEASE)
        .processor_lease(LEASE)
        .ensure(&jetstream)
        .await
    {
        Err(StreamError::WindowTooShort { window, lease, .. }) => {
            assert_eq!((window, lease), (LEASE, LEASE));
        }
        other => panic!("expected WindowTooShort, got {other:?}"),
    }
    assert!(
        jetstream.get_stream(&name).await.is_err(),
        "nothing was created"
    );

    // An existing stream with a short window: refused, left as it is.
    raw_stream(&jetstream, &name, &subjects[0], Duration::from_secs(10)).await;
    let result = StreamSpec::new(&name, subjects)
        .processor_lease(LEASE)
        .ensure(&jetstream)
        .await;
    let kept = jetstream
        .get_stream(&name)
        .await
        .expect("stream")
        .info()
        .await
        .expect("info")
        .config
        .duplicate_window;
    jetstream.delete_stream(&name).await.expect("delete");
    match result {
        Err(StreamError::WindowTooShort {
            stream,
            window,
            lease,
        }) => {
            assert_eq!(stream, name);
            assert_eq!((window, lease), (Duration::from_secs(10), LEASE));
        }
        other => panic!("expected WindowTooShort, got {other:?}"),
    }
    assert_eq!(kept, Duration::from_secs(10), "the stream was not changed");
}

async fn row(test: &TestDb, table: &str) -> (i16, i32, Option<String>, bool) {
    let row = test
        .row(&format!(
            "SELECT status, attempts, last_error, \
             CASE WHEN lease_token IS NULL THEN 0 ELSE 1 END AS leased FROM {table}"
        ))
        .await;
    (
        row.try_get("", "status").expect("status"),
        row.try_get("", "attempts").expect("attempts"),
        row.try_get("", "last_error").expect("last_error"),
        row.try_get::<i32>("", "leased").expect("leased") == 1,
    )
}

/// A message with no stream to go to: a fresh PostgreSQL schema, an outbox
/// publishing under `<name><tag>` (no stream captures it), a processor on
/// it retrying quickly, and order `o-1` saved.
struct Unstreamed {
    test: TestDb,
    table: String,
    prefix: String,
    /// The processor's connection.
    client: async_nats::Client,
    processor: txoutbox_core::ProcessorHandle,
    _outbox: txoutbox_sea_orm::Outbox,
}

impl Unstreamed {
    /// The processor gives up after `max_attempts` rejections.
    async fn saved(name: &str, max_attempts: u32) -> Self {
        let test = TestDb::with_schema(Backend::Postgres).await;
        let client = async_nats::connect(nats_url()).await.expect("nats");
        let prefix = format!("{name}{}", tag());
        let (outbox, table) = outbox_for(&test, &prefix);
        let processor = spawn_tuned(&outbox, client.clone(), "/stream-test", |builder| {
            builder
                .retry(quick_retry(max_attempts))
                .poll_interval(QUICK_POLL)
        });
        save_new_order(&outbox, "o-1", 1).await;
        Self {
            test,
            table,
            prefix,
            client,
            processor,
            _outbox: outbox,
        }
    }

    /// Waits (up to 10 s) until the row matches `filter`; panics with `what`.
    async fn wait_until_row(&self, filter: &str, what: &str) {
        let timeout = Duration::from_secs(10);
        wait_for_rows(&self.test, &self.table, filter, 1, timeout, what).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_stream_for_the_subject_is_rejected_and_spends_attempts() {
    let run = Unstreamed::saved("nostream", 2).await;
    run.wait_until_row("status = 2", "the message is dead")
        .await;
    let (_, attempts, error, leased) = row(&run.test, &run.table).await;
    assert_eq!(attempts, 2, "each rejection spent an attempt");
    assert!(!leased);
    let error = error.expect("the reason is kept");
    assert!(
        error.contains("no JetStream stream captures subject"),
        "{error}"
    );
    let report = run.processor.shutdown().await.expect("clean stop");
    assert_eq!((report.failed, report.dead, report.published), (2, 1, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_message_is_published_once_its_stream_exists() {
    let run = Unstreamed::saved("late", 100).await;
    run.wait_until_row("attempts >= 1", "a rejection is recorded")
        .await;

    let prefix = run.prefix.clone();
    let name = format!("L_{prefix}");
    let jetstream = jetstream::new(run.client.clone());
    raw_stream(&jetstream, &name, &format!("{prefix}.>"), WINDOW).await;
    let stream = TestStream {
        jetstream,
        name,
        prefix,
    };
    run.wait_until_row("status = 1", "the message is published")
        .await;
    assert_eq!(stream.count().await, 1);
    let report = run.processor.shutdown().await.expect("clean stop");
    assert!(report.failed >= 1 && report.dead == 0, "{report:?}");
    assert_eq!(report.published, 1);
    stream.delete().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_that_is_down_spends_no_attempt() {
    let (mut server, setup) = private_server_setup("down").await;
    let (test, stream, outbox, table) = setup.into_parts();
    let processor = spawn_tuned(
        &outbox,
        server
            .connect()
            .await
            .expect("a client of the private nats-server"),
        "/stream-test",
        |builder| {
            builder
                .retry(quick_retry(1)) // one spent attempt would kill it
                .poll_interval(QUICK_POLL)
                .unavailable_backoff(Duration::from_millis(50), Duration::from_millis(200))
        },
    );
    server.kill();
    save_new_order(&outbox, "o-1", 1).await;
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(
        row(&test, &table).await,
        (0, 0, None, false),
        "pending, untried, unleased while the broker is down"
    );

    server.restart().await.expect("nats-server restarted");
    wait_for_rows(
        &test,
        &table,
        "status = 1",
        1,
        Duration::from_secs(15),
        "the message is published",
    )
    .await;
    assert_eq!(row(&test, &table).await.1, 0, "no attempt spent");
    assert_eq!(stream.count().await, 1);
    let report = processor.shutdown().await.expect("clean stop");
    assert_eq!((report.published, report.failed, report.dead), (1, 0, 0));
    stream.delete().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_stream_spends_no_attempt() {
    let test = TestDb::with_schema(Backend::Postgres).await;
    let client = async_nats::connect(nats_url()).await.expect("nats");
    let prefix = format!("full{}", tag());
    let name = format!("F_{prefix}");
    let jetstream = jetstream::new(client.clone());
    // Room for 3 messages, and new ones refused when full: JetStream
    // answers 503 "maximum messages exceeded", the broker's condition, not
    // the message's.
    let config = Config {
        name: name.clone(),
        subjects: vec![format!("{prefix}.>")],
        storage: StorageType::Memory,
        max_messages: 3,
        discard: async_nats::jetstream::stream::DiscardPolicy::New,
        max_age: Duration::from_secs(600),
        ..Config::default()
    };
    jetstream
        .create_stream(config.clone())
        .await
        .expect("create the stream");
    let stream = TestStream {
        jetstream: jetstream.clone(),
        name: name.clone(),
        prefix: prefix.clone(),
    };
    let (outbox, table) = outbox_for(&test, &prefix);
    let processor = spawn_tuned(&outbox, client, "/stream-test", |builder| {
        builder
            .retry(quick_retry(2))
            .poll_interval(QUICK_POLL)
            .unavailable_backoff(Duration::from_millis(50), Duration::from_millis(200))
    });
    processor_support::write_orders(&outbox, "o", 5, 2, 5).await;
    wait_until(Duration::from_secs(10), "the stream is full", || async {
        stream.count().await == 3
    })
    .await;
    tokio::time::sleep(Duration::from_millis(1_000)).await; // many tries
    assert_eq!(
        test.count(&table, "status = 2 OR attempts <> 0").await,
        0,
        "a full stream spent attempts or killed messages"
    );

    // Room again: everything is published, once, in order.
    jetstream
        .update_stream(Config {
            max_messages: -1,
            ..config
        })
        .await
        .expect("raise the limit");
    wait_all_published_within(&test, &table, 10, Duration::from_secs(10)).await;
    let report = processor.shutdown().await.expect("clean stop");
    assert_eq!((report.failed, report.dead), (0, 0), "{report:?}");
    assert_stream_matches_outbox(&stream, &test, &table).await;
    stream.delete().await;
}
