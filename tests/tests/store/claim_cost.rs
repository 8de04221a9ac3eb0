//! A claim's cost is bounded by its work, pinned by the plan's shape, not by
//! timing: after 1,000,000 published rows of one aggregate, and with 100,000
//! pending rows blocked behind leased heads, an ordinary claim touches a
//! fixed number of buffers (PostgreSQL, `EXPLAIN (ANALYZE, BUFFERS)`), reads
//! a fixed number of rows (MariaDB, `Handler_read_*`), and searches indexes
//! only, never scanning the table (SQLite, `EXPLAIN QUERY PLAN`). PostgreSQL
//! is checked with no statistics (never analyzed), statistics taken while
//! the table was empty (stale) and fresh ones, and must never JIT-compile
//! the claim.

use std::time::Duration;

use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, Statement};
use serde_json::Value;
use txoutbox_core::OutboxStore;
use txoutbox_sea_orm::{OutboxConfig, SeaOrmOutboxStore};
use txoutbox_suite::{Backend, TestDb};

const TABLE: &str = "outbox_messages";
const LEASE: Duration = Duration::from_secs(300);
/// The published history of the one long-lived aggregate.
const HISTORY: i64 = 1_000_000;
/// Aggregates whose heads are leased, each with this many pending rows behind.
const BLOCKED_AGGREGATES: i64 = 10;
const BLOCKED_EACH: i64 = 10_000;
/// Pending rows of the long-lived aggregate, and of one fresh aggregate.
const FREE_EACH: i64 = 5;

/// What each backend writes the shapes with.
struct Dialect {
    uuid: &'static str,
    now: &'static str,
    later: &'static str,
    concat: fn(&str, &str) -> String,
}

fn dialect(backend: Backend) -> Dialect {
    match backend {
        Backend::Postgres => Dialect {
            uuid: "gen_random_uuid()",
            now: "now()",
            later: "now() + interval '1 hour'",
            concat: |a, b| format!("{a} || {b}"),
        },
        Backend::MySql => Dialect {
            uuid: "UNHEX(REPLACE(UUID(), '-', ''))",
            now: "UTC_TIMESTAMP(6)",
            later: "UTC_TIMESTAMP(6) + INTERVAL 1 HOUR",
            concat: |a, b| format!("CONCAT({a}, {b})"),
        },
        Backend::Sqlite => Dialect {
            uuid: "randomblob(16)",
            now: "strftime('%Y-%m-%d %H:%M:%f', 'now')",
            later: "strftime('%Y-%m-%d %H:%M:%f', 'now', '+1 hour')",
            concat: |a, b| format!("{a} || {b}"),
        },
    }
}

/// `SELECT n FROM <1..=count>` on each backend.
fn numbers(backend: Backend, count: i64) -> String {
    match backend {
        Backend::Postgres => format!("(SELECT g AS n FROM generate_series(1, {count}) AS g) AS s"),
        Backend::MySql => format!("(SELECT seq AS n FROM seq_1_to_{count}) AS s"),
        Backend::Sqlite => format!(
            "(WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < {count}) \
             SELECT n FROM g) AS s"
        ),
    }
}

/// Rows of `aggregate_id` (an SQL expression over `n`) with sequence
/// `sequence` (also over `n`), in `status`.
async fn insert(test: &TestDb, count: i64, aggregate_id: &str, sequence: &str, status: i32) {
    let d = dialect(test.backend());
    let published_at = if status == 1 { d.now } else { "NULL" };
    execute(
        test,
        &format!(
            "INSERT INTO {TABLE} (id, aggregate_type, aggregate_id, sequence, event_name, \
             event_version, subject, payload, correlation_id, occurred_at, created_at, status, \
             attempts, next_attempt_at, published_at) \
             SELECT {uuid}, 'account', {aggregate_id}, {sequence}, 'account.moved', 1, \
             'events.account.moved', '{{\"cents\":1}}', 'c', {now}, {now}, {status}, 0, {now}, \
             {published_at} FROM {numbers}",
            uuid = d.uuid,
            now = d.now,
            numbers = numbers(test.backend(), count),
        ),
    )
    .await;
}

/// The shapes: a long history, and a backlog behind leased heads; then the
/// work a claim should find: the long-lived aggregate's 5 new events and a
/// fresh aggregate's 5.
async fn write_shapes(test: &TestDb) {
    let d = dialect(test.backend());
    insert(test, HISTORY, "'long-lived'", "n", 1).await;
    let blocked = (d.concat)("'blocked-'", "(n % 10)");
    insert(
        test,
        BLOCKED_AGGREGATES * BLOCKED_EACH,
        &blocked,
        &format!("{HISTORY} + n"),
        0,
    )
    .await;
    // Lease each blocked aggregate's head (its lowest sequence: n = 1..10).
    execute(
        test,
        &format!(
            "UPDATE {TABLE} SET lease_expires_at = {later} \
             WHERE aggregate_id LIKE 'blocked-%' AND sequence <= {last_head}",
            later = d.later,
            last_head = HISTORY + BLOCKED_AGGREGATES,
        ),
    )
    .await;
    insert(
        test,
        FREE_EACH,
        "'long-lived'",
        &format!("{HISTORY} + n"),
        0,
    )
    .await;
    insert(test, FREE_EACH, "'fresh'", "n", 0).await;
}

fn store_on(db: DatabaseConnection) -> SeaOrmOutboxStore {
    SeaOrmOutboxStore::new(db, OutboxConfig::default())
}

/// The claim takes exactly the 10 publishable messages, in order per
/// aggregate, and nothing behind a leased head.
async fn claim_takes_the_work(store: &SeaOrmOutboxStore) {
    let batch = store.claim(1000, LEASE).await.expect("claim");
    let got = txoutbox_suite::claimed_positions(&batch);
    let mut expected: Vec<(String, u64)> = (1..=FREE_EACH as u64)
        .map(|n| ("fresh".to_owned(), n))
        .chain((1..=FREE_EACH as u64).map(|n| ("long-lived".to_owned(), HISTORY as u64 + n)))
        .collect();
    expected.sort();
    assert_eq!(got, expected);
}

// ---------------------------------------------------------------------------
// PostgreSQL: buffers, no sequential scan, no JIT, stale and fresh statistics
// ---------------------------------------------------------------------------

/// Buffers the plan touched (shared hits and reads, every node included),
/// the node types anywhere in it, and whether it was JIT-compiled.
fn plan_shape(plan: &str) -> (i64, Vec<String>, bool) {
    let plan: Value = serde_json::from_str(plan).expect("plan JSON");
    let top = &plan[0];
    let root = &top["Plan"];
    let buffers = root["Shared Hit Blocks"].as_i64().unwrap_or(0)
        + root["Shared Read Blocks"].as_i64().unwrap_or(0);
    let mut nodes = Vec::new();
    collect_nodes(root, &mut nodes);
    (buffers, nodes, top.get("JIT").is_some())
}

fn collect_nodes(node: &Value, into: &mut Vec<String>) {
    if let Some(kind) = node["Node Type"].as_str() {
        into.push(kind.to_owned());
    }
    if let Some(children) = node["Plans"].as_array() {
        for child in children {
            collect_nodes(child, into);
        }
    }
}

/// The claim's buffers are bounded: a sequential scan, a probe reading the
/// published history, or a walk through the blocked backlog would each touch
/// thousands (the history alone is ~30,000 pages).
const PG_MAX_BUFFERS: i64 = 1_500;

/// Explains the claim and holds its shape to the bounds.
async fn assert_bounded_plan(store: &SeaOrmOutboxStore, statistics: &str) {
    let plan = store.explain_claim(1000).await.expect("explain the claim");
    let (buffers, nodes, jit) = plan_shape(&plan);
    println!("statistics {statistics}: {buffers} buffers, nodes {nodes:?}");
    assert!(
        buffers <= PG_MAX_BUFFERS,
        "with {statistics} statistics the claim touched {buffers} buffers: {plan}"
    );
    assert!(
        !nodes.iter().any(|n| n == "Seq Scan"),
        "with {statistics} statistics the claim scans the table: {nodes:?}"
    );
    assert!(
        !jit,
        "with {statistics} statistics the claim was JIT-compiled"
    );
}

/// Runs `sql` (a statement that shapes the table or its statistics) on the
/// test database.
async fn execute(test: &TestDb, sql: &str) {
    test.db
        .execute_unprepared(sql)
        .await
        .expect("the statement runs");
}

/// A PostgreSQL test database whose outbox table autovacuum leaves alone,
/// so its statistics are only what the test makes them.
async fn postgres_without_autovacuum() -> TestDb {
    let test = TestDb::with_schema(Backend::Postgres).await;
    execute(
        &test,
        &format!("ALTER TABLE {TABLE} SET (autovacuum_enabled = false)"),
    )
    .await;
    test
}

/// No statistics at all (a table never analyzed; autovacuum kept away),
/// then fresh ones.
#[tokio::test(flavor = "multi_thread")]
async fn postgres_claim_touches_a_bounded_number_of_buffers() {
    let test = postgres_without_autovacuum().await;
    write_shapes(&test).await;
    let store = store_on(test.db.clone());
    assert_bounded_plan(&store, "none (never analyzed)").await;
    execute(&test, &format!("VACUUM ANALYZE {TABLE}")).await;
    assert_bounded_plan(&store, "fresh").await;
    claim_takes_the_work(&store).await;
}

/// Statistics taken while the table was empty, stale once it fills.
#[tokio::test(flavor = "multi_thread")]
async fn postgres_claim_stays_bounded_with_stale_statistics() {
    let test = postgres_without_autovacuum().await;
    execute(&test, &format!("ANALYZE {TABLE}")).await;
    write_shapes(&test).await;
    let store = store_on(test.db.clone());
    assert_bounded_plan(&store, "stale (taken while empty)").await;
    claim_takes_the_work(&store).await;
}

/// The claim runs with JIT off even where the server JIT-compiles anything
/// (`jit_above_cost = 0` for the claim's role), and still claims.
#[tokio::test(flavor = "multi_thread")]
async fn postgres_claim_is_never_jit_compiled() {
    let test = TestDb::with_schema(Backend::Postgres).await;
    let db = test.connect_with(1).await;
    db.execute_unprepared("SET jit = on")
        .await
        .expect("the statement runs");
    db.execute_unprepared("SET jit_above_cost = 0")
        .await
        .expect("the statement runs");
    let available = db
        .query_one_raw(Statement::from_string(
            DbBackend::Postgres,
            "SELECT pg_jit_available() AS jit".to_owned(),
        ))
        .await
        .expect("the statement runs")
        .expect("one row")
        .try_get::<bool>("", "jit")
        .expect("a boolean");
    insert(&test, FREE_EACH, "'fresh'", "n", 0).await;
    let store = store_on(db);
    let plan = store.explain_claim(1000).await.expect("explain the claim");
    let (_, _, jit) = plan_shape(&plan);
    println!("JIT available on this server: {available}");
    assert!(!jit, "the claim was JIT-compiled: {plan}");
    assert_eq!(
        store
            .claim(1000, LEASE)
            .await
            .expect("the statement runs")
            .messages
            .len(),
        FREE_EACH as usize
    );
}

// ---------------------------------------------------------------------------
// MariaDB/MySQL: rows read by the storage engine
// ---------------------------------------------------------------------------

/// Rows the storage engine read on this session so far.
async fn handler_reads(db: &DatabaseConnection) -> i64 {
    let rows = db
        .query_all_raw(Statement::from_string(
            DbBackend::MySql,
            "SHOW SESSION STATUS LIKE 'Handler_read%'".to_owned(),
        ))
        .await
        .expect("the statement runs");
    rows.iter()
        .map(|row| {
            let value: String = row.try_get("", "Value").expect("the status value");
            value.parse::<i64>().expect("a counter")
        })
        .sum()
}

/// Generous: the work is ~10 heads and 10 rows; a scan of the history or of
/// the blocked backlog reads 100,000 to 1,000,000.
const MYSQL_MAX_ROWS_READ: i64 = 2_000;

#[tokio::test(flavor = "multi_thread")]
async fn mysql_claim_reads_a_bounded_number_of_rows() {
    let test = TestDb::with_schema(Backend::MySql).await;
    write_shapes(&test).await;
    execute(&test, &format!("ANALYZE TABLE {TABLE}")).await;
    let read = rows_read_during(
        &test,
        |store| async move { claim_takes_the_work(&store).await },
    )
    .await;
    println!("the claim read {read} rows");
    assert!(
        read <= MYSQL_MAX_ROWS_READ,
        "the claim read {read} rows of {HISTORY} published and {} blocked",
        BLOCKED_AGGREGATES * BLOCKED_EACH
    );
}

// ---------------------------------------------------------------------------
// SQLite: index searches only
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn sqlite_claim_searches_indexes_only() {
    let test = TestDb::with_schema(Backend::Sqlite).await;
    write_shapes(&test).await;
    let store = store_on(test.db.clone());
    let plan = store.explain_claim(1000).await.expect("explain the claim");
    println!("{plan}");
    // The table's aliases in the claim: x (the walk's probes), n, e (the
    // run) and h (the first head). The one index-ordered scan allowed is the
    // first head's (`LIMIT 1`: one entry); `SCAN walk`/`SCAN hd`/`SCAN
    // (subquery…)` read the statement's own small results.
    let first_head = "SCAN x USING INDEX outbox_messages_unpublished";
    let scans: Vec<&str> = plan
        .lines()
        .map(str::trim)
        .filter(|line| *line != first_head)
        .filter(|line| {
            line.strip_prefix("SCAN ").is_some_and(|rest| {
                let name = rest.split_whitespace().next().unwrap_or_default();
                [TABLE, "x", "n", "e", "h"].contains(&name)
            })
        })
        .collect();
    assert!(
        scans.is_empty(),
        "the claim scans the table: {scans:?}\n{plan}"
    );
    assert!(
        plan.contains("outbox_messages_unpublished (aggregate_type=? AND aggregate_id>?)"),
        "the walk's step must seek the next aggregate of the same type:\n{plan}"
    );
    let started = std::time::Instant::now();
    claim_takes_the_work(&store).await;
    println!("claim took {:?}", started.elapsed());
}

// ---------------------------------------------------------------------------
// stats(): bounded work, an estimate past the exact limit
// ---------------------------------------------------------------------------

/// Rows of the outbox table read so far by sequential and index scans,
/// this session's included (PostgreSQL).
async fn pg_rows_read(db: &DatabaseConnection) -> i64 {
    db.execute_unprepared("SELECT pg_stat_force_next_flush()")
        .await
        .expect("the statement runs");
    db.query_one_raw(Statement::from_string(
        DbBackend::Postgres,
        format!(
            "SELECT seq_tup_read + coalesce(idx_tup_fetch, 0) AS n FROM pg_stat_user_tables \
             WHERE relid = '{TABLE}'::regclass"
        ),
    ))
    .await
    .expect("the statement runs")
    .expect("one row")
    .try_get("", "n")
    .expect("the count")
}

/// Rows the database read while `work` ran on a store of one connection (so
/// the session's counters are its own): PostgreSQL's table counters,
/// MariaDB's handler reads.
async fn rows_read_during<F, Fut>(test: &TestDb, work: F) -> i64
where
    F: FnOnce(SeaOrmOutboxStore) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let db = test.connect_with(1).await;
    let count = |db: DatabaseConnection| async move {
        match test.backend() {
            Backend::Postgres => pg_rows_read(&db).await,
            _ => handler_reads(&db).await,
        }
    };
    let before = count(db.clone()).await;
    work(store_on(db.clone())).await;
    count(db).await - before
}

/// What `stats` may read: the exact limit, and slack for the dead rows and
/// the catalog.
const STATS_MAX_ROWS_READ: i64 = txoutbox_sea_orm::admin::STATS_EXACT_PENDING as i64 + 1_000;
/// On PostgreSQL, with the search for the oldest waiting message, which
/// reads the counted rows again, in id order, until one heads its aggregate
/// (UUIDv7 ids put heads first; this shape's random ids may hold none).
const STATS_MAX_ROWS_READ_PG: i64 =
    STATS_MAX_ROWS_READ + txoutbox_sea_orm::admin::STATS_EXACT_PENDING as i64 + 1;

async fn stats_past_the_exact_limit(store: &SeaOrmOutboxStore) {
    let stats = store.stats().await.expect("stats");
    let pending = (BLOCKED_AGGREGATES * BLOCKED_EACH + 2 * FREE_EACH) as u64;
    println!(
        "stats: pending {} (estimate: {}), leased {}, dead {}, oldest {:?}",
        stats.pending,
        stats.pending_is_estimate,
        stats.leased,
        stats.dead,
        stats.oldest_pending_age
    );
    assert!(
        stats.pending_is_estimate,
        "{pending} pending rows exceed the exact limit"
    );
    assert!(stats.pending > txoutbox_sea_orm::admin::STATS_EXACT_PENDING);
    assert!(stats.pending <= pending + pending / 2, "{stats:?}");
    // The oldest waiting message is looked for among the counted rows
    // only: a head of an aggregate, due. With random ids (PostgreSQL,
    // SQLite) the counted rows may hold none of the 20 heads.
    assert!(
        stats
            .oldest_pending_age
            .is_none_or(|age| age < Duration::from_secs(600)),
        "{stats:?}"
    );
    assert_eq!(stats.dead, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_stats_read_a_bounded_number_of_rows() {
    let test = TestDb::with_schema(Backend::Postgres).await;
    write_shapes(&test).await;
    execute(&test, &format!("VACUUM ANALYZE {TABLE}")).await;
    let read = rows_read_during(&test, |store| async move {
        stats_past_the_exact_limit(&store).await
    })
    .await;
    println!("stats read {read} rows");
    assert!(read <= STATS_MAX_ROWS_READ_PG, "stats read {read} rows");
}

#[tokio::test(flavor = "multi_thread")]
async fn mysql_stats_read_a_bounded_number_of_rows() {
    let test = TestDb::with_schema(Backend::MySql).await;
    write_shapes(&test).await;
    let read = rows_read_during(&test, |store| async move {
        stats_past_the_exact_limit(&store).await
    })
    .await;
    println!("stats read {read} rows");
    // Handler reads count each pending row about three times (the index
    // entry, the row for its event name, the derived table's rescan).
    assert!(read <= 3 * STATS_MAX_ROWS_READ, "stats read {read} rows");
}
