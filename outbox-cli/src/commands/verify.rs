//! `outbox verify`: the outbox table against the stream, through
//! `txoutbox_nats::verify_stream` (the same run as the web console's verify
//! page), printed by `crate::render::verify`.

use txoutbox_nats::{VerifyError, VerifyRequest, verify_stream};

use crate::context::Context;
use crate::error::CliError;
use crate::opt::VerifyArgs;
use crate::render;

/// Runs `outbox verify`: prints the report, or fails with
/// [`CliError::Discrepancies`] (which carries it).
pub(super) async fn run(context: &Context, args: VerifyArgs) -> Result<(), CliError> {
    let outbox = context.outbox().await?;
    let jetstream = context.jetstream(&args.nats).await?;
    let mut request = VerifyRequest::new(&args.stream).pending_older_than(args.pending_older_than);
    if let Some(since) = args.since {
        request = request.since(since);
    }
    let outcome = verify_stream(&outbox, &jetstream, &request)
        .await
        .map_err(|err| match err {
            VerifyError::Store(err) => CliError::VerifyStore(err),
            VerifyError::StreamRead(err) => CliError::StreamRead(err),
            other => CliError::BrokerUsage(other.to_string()),
        })?;
    let report = &outcome.report;
    let output = render::verify::report(&args, outcome.within, report, context.json());
    if report.is_clean() {
        print!("{output}");
        Ok(())
    } else {
        Err(CliError::Discrepancies {
            output,
            count: report.discrepancies.len(),
        })
    }
}
