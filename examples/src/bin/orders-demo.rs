//! The orders demo: an orders service writes `Order` aggregates through the
//! outbox repository, an in-process processor publishes their events to
//! NATS JetStream, and a separate consumer process (this binary with the
//! `consume` argument) builds the `order_summaries` read model with typed
//! handlers and the inbox.
//!
//! ```sh
//! cargo run -p txoutbox-examples --bin orders-demo                 # until Ctrl-C
//! cargo run -p txoutbox-examples --bin orders-demo -- --orders 20  # 20 orders, then exit
//! ```
//!
//! Options: `--help`, `--orders N` (write N orders, wait until the read model has all
//! of them, print a summary, exit), `--timeout SECS` (fail if that takes
//! longer; default 60), `--rate N` (orders per second; default 5).
//! Environment: `DATABASE_URL` (default: an SQLite file in the temp
//! directory; `postgres://…` and `mysql://…` work as they are), `NATS_URL`
//! (default: 127.0.0.1:4222, or a private nats-server), `DEMO_STREAM`
//! (default `DEMO_ORDERS`) and `DEMO_PREFIX` (subject prefix, default
//! `demo`): names of its own, so the README's service (`SHOP`, `shop.>`)
//! and the `axum_service` example (`ORDER_SERVICE`, `ordersvc.>`) start
//! beside it on the same server. Dead letters go to the README's `DLQ`
//! stream (`dlq.>`).

use std::collections::BTreeMap;
use std::error::Error;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use sea_orm::sea_query::{Asterisk, Expr, Func, Query, SelectStatement};
use sea_orm::{
    ColumnTrait, ConnectionTrait, EntityTrait, PaginatorTrait, QueryFilter, QuerySelect,
};
use tokio_util::sync::CancellationToken;
use txoutbox::store::OutboxStore;
use txoutbox::{AggregateRoot, MessageContext};
use txoutbox::{Inbox, Outbox, OutboxConfig};
use txoutbox::{JetStreamPublisher, StreamSpec};
use txoutbox_examples::orders::{Order, OrderStatus};
use txoutbox_examples::support::{self, Nats};
use txoutbox_examples::{orders_table, read_model};

type BoxError = Box<dyn Error>;

/// The processor's lease; the stream's duplicate window must be longer.
const LEASE: Duration = txoutbox::processor::DEFAULT_LEASE;

/// Settings shared by the producer and the consumer process.
struct Settings {
    database_url: String,
    stream: String,
    prefix: String,
}

impl Settings {
    fn from_env() -> Self {
        let var =
            |name: &str, default: &str| std::env::var(name).unwrap_or_else(|_| default.into());
        Self {
            database_url: support::database_url("orders-demo"),
            stream: var("DEMO_STREAM", "DEMO_ORDERS"),
            prefix: var("DEMO_PREFIX", "demo"),
        }
    }

    fn outbox_config(&self) -> Result<OutboxConfig, BoxError> {
        Ok(OutboxConfig::default().with_subject_prefix(&self.prefix)?)
    }
}

/// Command-line options of the producer.
struct Options {
    orders: Option<u64>,
    timeout: Duration,
    rate: u64,
}

fn parse_options(args: &[String]) -> Result<Options, BoxError> {
    let mut options = Options {
        orders: None,
        timeout: Duration::from_secs(60),
        rate: 5,
    };
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let mut value = || -> Result<u64, BoxError> {
            let v = args.next().ok_or_else(|| format!("{arg} needs a value"))?;
            Ok(v.parse().map_err(|_| format!("{arg}: not a number: {v}"))?)
        };
        match arg.as_str() {
            "--orders" => options.orders = Some(value()?),
            "--timeout" => options.timeout = Duration::from_secs(value()?),
            "--rate" => options.rate = value()?.max(1),
            other => return Err(format!("unknown argument {other:?} (see --help)").into()),
        }
    }
    Ok(options)
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    support::exit_on_help(include_str!("orders-demo.rs"));
    support::init_logging();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let settings = Settings::from_env();
    if args.first().map(String::as_str) == Some("consume") {
        return consume(&settings).await;
    }
    produce(&settings, &parse_options(&args)?).await
}

// ------------------------------------------------------------- the consumer

/// The consumer process: builds the read model until Ctrl-C, SIGTERM, or
/// its stdin closes (the demo closes it to stop it).
async fn consume(settings: &Settings) -> Result<(), BoxError> {
    let outbox = support::open_outbox(&settings.database_url, settings.outbox_config()?).await?;
    read_model::create_table(outbox.db()).await?;
    let nats_url = std::env::var("NATS_URL").unwrap_or_else(|_| "127.0.0.1:4222".into());
    let client = async_nats::connect(nats_url.as_str()).await?;
    let jetstream = async_nats::jetstream::new(client);
    let inbox = Inbox::new(&outbox, read_model::CONSUMER)?;
    let filter = format!("{}.>", settings.prefix);
    let running = read_model::subscriber(jetstream, &inbox, &settings.stream, &filter)
        .build()
        .await?
        .spawn();
    println!(
        "consumer: durable `{}` on stream {} is running",
        read_model::CONSUMER,
        settings.stream
    );

    // The parent closes our stdin to stop us; a thread watches for that.
    let (closed_tx, closed_rx) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
        let _ = closed_tx.send(());
    });
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
        _ = closed_rx => {}
    }
    running.shutdown().await?;
    println!("consumer: stopped cleanly");
    Ok(())
}

// ------------------------------------------------------------- the producer

/// What happens to order number `i` after it is placed, and its last status.
fn fate(i: u64) -> (&'static [Step], OrderStatus) {
    match i % 4 {
        0 | 2 => (&[Step::Pay, Step::Ship], OrderStatus::Shipped),
        1 => (&[Step::Cancel], OrderStatus::Cancelled),
        _ => (&[Step::Pay], OrderStatus::Paid),
    }
}

#[derive(Clone, Copy, Debug)]
enum Step {
    Pay,
    Ship,
    Cancel,
}

#[derive(Default)]
struct Counters {
    orders: AtomicU64,
    events: AtomicU64,
    finished: AtomicBool,
}

async fn produce(settings: &Settings, options: &Options) -> Result<(), BoxError> {
    // 1. The servers: NATS found or started, the database connected and migrated.
    let nats = Nats::find_or_start()?;
    let how = if nats.is_private() {
        "private server started for this demo"
    } else {
        "found"
    };
    println!("NATS      {} ({how})", nats.url);
    println!("database  {}", support::display_url(&settings.database_url));
    let outbox = support::open_outbox(&settings.database_url, settings.outbox_config()?).await?;
    orders_table::create_table(outbox.db()).await?;
    read_model::create_table(outbox.db()).await?;

    // 2. The stream every `<prefix>.>` event lands in.
    let client = nats.connect().await?;
    let jetstream = async_nats::jetstream::new(client.clone());
    StreamSpec::new(&settings.stream, [format!("{}.>", settings.prefix)])
        .processor_lease(LEASE)
        .ensure(&jetstream)
        .await?;
    println!("stream    {} <- {}.>", settings.stream, settings.prefix);

    // 3. The consumer, as a separate process (this binary, `consume`).
    let mut consumer = tokio::process::Command::new(std::env::current_exe()?)
        .arg("consume")
        .env("DATABASE_URL", &settings.database_url)
        .env("NATS_URL", &nats.url)
        .env("DEMO_STREAM", &settings.stream)
        .env("DEMO_PREFIX", &settings.prefix)
        .stdin(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;

    // 4. The processor, in this process: woken by each commit.
    let processor = outbox
        .processor(JetStreamPublisher::new(client, "/orders-demo"))
        .lease(LEASE)
        .build()?
        .spawn();

    // 5. The orders service writes orders until told to stop.
    let run = uuid::Uuid::now_v7().simple().to_string();
    let run = format!("ord-{}", &run[run.len() - 6..]);
    let counters = Arc::new(Counters::default());
    let stop = CancellationToken::new();
    let writer = tokio::spawn(write_orders(
        outbox.clone(),
        run.clone(),
        options.orders,
        options.rate,
        Arc::clone(&counters),
        stop.clone(),
    ));
    match options.orders {
        Some(n) => println!(
            "writing {n} orders ({run}-*), {} per second\n",
            options.rate
        ),
        None => println!(
            "writing orders ({run}-*), {} per second; Ctrl-C stops\n",
            options.rate
        ),
    }

    // 6. One status line per second until done, Ctrl-C, or the timeout.
    let baseline = Progress::read(&outbox).await?;
    let started = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.tick().await;
    let outcome: Result<(), BoxError> = loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => { println!("\nCtrl-C: stopping"); break Ok(()); }
            _ = tick.tick() => {}
        }
        let now = Progress::read(&outbox).await?.since(&baseline);
        let orders = counters.orders.load(Ordering::SeqCst);
        let events = counters.events.load(Ordering::SeqCst);
        println!(
            "[{:>3}s] orders written {orders:>4} | events written {events:>5} | published {:>5} | consumed {:>5} | backlog {:>4}",
            started.elapsed().as_secs(),
            now.published,
            now.consumed,
            now.pending,
        );
        if options.orders.is_some() {
            if counters.finished.load(Ordering::SeqCst)
                && now.pending == 0
                && now.consumed >= events
            {
                break Ok(());
            }
            if started.elapsed() > options.timeout {
                break Err(format!(
                    "timed out after {:?}: {} of {events} events consumed",
                    options.timeout, now.consumed
                )
                .into());
            }
        }
        if writer.is_finished() && !counters.finished.load(Ordering::SeqCst) {
            break Err("the order writer stopped".into());
        }
    };

    // 7. Clean stop: writer, processor, then the consumer process.
    stop.cancel();
    let written = writer.await?;
    let report = processor.shutdown().await?;
    println!(
        "processor stopped: {} published, {} failed, {} dead",
        report.published, report.failed, report.dead
    );
    drop(consumer.stdin.take()); // the consumer's signal to stop
    if tokio::time::timeout(Duration::from_secs(10), consumer.wait())
        .await
        .is_err()
    {
        consumer.kill().await?;
    }
    written?;
    outcome?;

    // 8. What the consumer built.
    let summary = summary_of(&outbox, &run).await?;
    println!("\nread model `order_summaries` for {run}-*:");
    for (status, count) in &summary {
        println!("  {status:<10} {count}");
    }
    if let Some(n) = options.orders {
        let expected = (0..n).fold(BTreeMap::<String, u64>::new(), |mut m, i| {
            *m.entry(fate(i).1.as_str().to_owned()).or_default() += 1;
            m
        });
        if summary != expected {
            return Err(format!("read model {summary:?}, expected {expected:?}").into());
        }
        println!("all {n} orders reached the read model in their final status");
    }
    Ok(())
}

/// Writes orders: each tick places a new one and moves every open order one
/// step along its [`fate`]. Returns when `limit` orders are done, or on `stop`.
async fn write_orders(
    outbox: Outbox,
    run: String,
    limit: Option<u64>,
    rate: u64,
    counters: Arc<Counters>,
    stop: CancellationToken,
) -> Result<(), String> {
    const CUSTOMERS: [&str; 5] = ["ada", "grace", "linus", "barbara", "ken"];
    let orders = outbox.repository::<Order>();
    let mut open: Vec<(String, &'static [Step])> = Vec::new();
    let mut tick = tokio::time::interval(Duration::from_millis(1000 / rate));
    let mut next = 0u64;
    loop {
        tokio::select! {
            _ = stop.cancelled() => return Ok(()),
            _ = tick.tick() => {}
        }
        // Move open orders one step each, each in its own unit of work.
        for (id, steps) in &mut open {
            let Some((step, rest)) = steps.split_first() else {
                continue;
            };
            let context = MessageContext::new().with_correlation_id(id.clone());
            let mut uow = outbox.begin_with(context);
            let mut order = uow
                .load::<Order>(id.clone())
                .await
                .map_err(|e| e.to_string())?
                .ok_or_else(|| format!("order {id} vanished"))?;
            match step {
                Step::Pay => order.pay(),
                Step::Ship => order.ship("DHL"),
                Step::Cancel => order.cancel("out of stock"),
            }
            .map_err(|e| e.to_string())?;
            let recorded = order.events().pending().len() as u64;
            uow.save(&mut order).await.map_err(|e| e.to_string())?;
            uow.commit().await.map_err(|e| e.to_string())?;
            counters.events.fetch_add(recorded, Ordering::SeqCst);
            *steps = rest;
        }
        open.retain(|(_, steps)| !steps.is_empty());
        // Place a new one.
        if limit.is_none_or(|n| next < n) {
            let id = format!("{run}-{next:04}");
            let customer = CUSTOMERS[(next % 5) as usize];
            let mut order = Order::place(id.clone(), customer, 1_000 + next * 737 % 9_000)
                .map_err(|e| e.to_string())?;
            let recorded = order.events().pending().len() as u64;
            let context = MessageContext::new().with_correlation_id(id.clone());
            orders
                .save_with(&mut order, context)
                .await
                .map_err(|e| e.to_string())?;
            counters.orders.fetch_add(1, Ordering::SeqCst);
            counters.events.fetch_add(recorded, Ordering::SeqCst);
            open.push((id, fate(next).0));
            next += 1;
        } else if open.is_empty() {
            counters.finished.store(true, Ordering::SeqCst);
            stop.cancelled().await;
            return Ok(());
        }
    }
}

/// Published, consumed and backlog counts; published and consumed relative
/// to a baseline (earlier runs may have left rows in the same database).
struct Progress {
    consumed: u64,
    published: u64,
    pending: u64,
}

impl Progress {
    /// Reads consumed before published, so consumed never looks ahead.
    async fn read(outbox: &Outbox) -> Result<Self, BoxError> {
        use sea_orm::sea_query::ExprTrait;
        let inbox = outbox.config().inbox_table().as_str().to_owned();
        let consumed = count(
            outbox,
            Query::select()
                .expr(Func::count(Expr::col(Asterisk)))
                .from(inbox)
                .and_where(Expr::col("consumer").eq(read_model::CONSUMER)),
        )
        .await?;
        let table = outbox.config().table().as_str().to_owned();
        let published = count(
            outbox,
            Query::select()
                .expr(Func::count(Expr::col(Asterisk)))
                .from(table)
                .and_where(Expr::col("status").eq(1)),
        )
        .await?;
        let pending = outbox.store().stats().await?.pending;
        Ok(Self {
            consumed,
            published,
            pending,
        })
    }

    fn since(self, baseline: &Self) -> Self {
        Self {
            consumed: self.consumed.saturating_sub(baseline.consumed),
            published: self.published.saturating_sub(baseline.published),
            pending: self.pending,
        }
    }
}

/// `SELECT COUNT(*) ...`, its values bound as parameters.
async fn count(outbox: &Outbox, select: &mut SelectStatement) -> Result<u64, BoxError> {
    let row = outbox.db().query_one(&select.to_owned()).await?;
    let n = match row {
        Some(row) => row.try_get_by::<i64, _>(0)?,
        None => 0,
    };
    Ok(u64::try_from(n).unwrap_or_default())
}

/// Orders of this run in the read model, per status.
async fn summary_of(outbox: &Outbox, run: &str) -> Result<BTreeMap<String, u64>, BoxError> {
    use read_model::entity::{Column, Entity};
    let mut summary = BTreeMap::new();
    for status in [
        OrderStatus::Placed,
        OrderStatus::Paid,
        OrderStatus::Shipped,
        OrderStatus::Cancelled,
    ] {
        let count = Entity::find()
            .filter(Column::OrderId.starts_with(format!("{run}-")))
            .filter(Column::Status.eq(status.as_str()))
            .select_only()
            .column(Column::OrderId)
            .count(outbox.db())
            .await?;
        if count > 0 {
            summary.insert(status.as_str().to_owned(), count);
        }
    }
    Ok(summary)
}
