//! `outbox console`: the web console (`txoutbox-console`) on a listener of
//! its own, against the database and broker the command line names.

use axum::Router;
use axum::http::request::Parts;
use txoutbox_console::{Console, Operator};

use crate::confirm::operator;
use crate::context::Context;
use crate::error::CliError;
use crate::opt::ConsoleArgs;

/// Serves the console until Ctrl-C.
pub(super) async fn run(context: &Context, args: ConsoleArgs) -> Result<(), CliError> {
    if !args.listen.ip().is_loopback() && !args.allow_public {
        return Err(CliError::Usage(format!(
            "refusing to listen on {} (not a loopback address): whoever reaches it reads the \
             outbox; put it behind authentication and pass --allow-public",
            args.listen
        )));
    }
    let outbox = context.outbox().await?;
    let mut builder = Console::builder(outbox);
    if args.nats.nats_url.is_some() {
        builder = builder.nats(context.jetstream(&args.nats).await?);
    }
    if let Some(stream) = args.stream {
        builder = builder.stream(stream);
    }
    for consumer in args.consumers {
        builder = builder.consumer(consumer);
    }
    let mode = if args.allow_changes {
        let who = Operator::new(args.operator.unwrap_or_else(operator));
        let mode = format!("changes allowed, recorded as {who}");
        builder = builder.authorize(move |_: &Parts| Some(who.clone()));
        mode
    } else {
        "read-only".to_owned()
    };
    let listener = tokio::net::TcpListener::bind(args.listen).await?;
    let addr = listener.local_addr()?;
    eprintln!("outbox console on http://{addr}/ ({mode}); Ctrl-C stops it");
    let app: Router = Router::new().merge(builder.build().router());
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    Ok(())
}
