//! `outbox dlq`: a consumer's dead letters: list, show, replay after a fix.

use crate::confirm::confirm;
use crate::context::Context;
use crate::error::CliError;
use crate::opt::DlqCommand;
use crate::render;

/// Runs `outbox dlq ...`.
pub(super) async fn run(context: &Context, command: DlqCommand) -> Result<(), CliError> {
    let json = context.json();
    match command {
        DlqCommand::List { on, limit } => {
            let letters = context.dead_letters(&on).await?;
            let list = letters.list(limit).await?;
            print!(
                "{}",
                render::dlq::list(&list, letters.subject(), letters.stream(), json)
            );
        }
        DlqCommand::Show { on, sequence } => {
            let letter = context.dead_letters(&on).await?.get(sequence).await?;
            print!("{}", render::dlq::show(&letter, json));
        }
        DlqCommand::Replay { on, sequences, yes } => {
            let letters = context.dead_letters(&on).await?;
            if !yes {
                // What it would do, then the same question as every change.
                for sequence in &sequences {
                    let letter = letters.get(*sequence).await?;
                    eprint!("{}", render::dlq::replay_plan(*sequence, &letter));
                }
            }
            confirm(&format!("replay {} dead letter(s)", sequences.len()), yes)?;
            let mut replayed = Vec::new();
            for sequence in sequences {
                replayed.push(letters.replay(sequence).await?);
            }
            print!("{}", render::dlq::replayed(&replayed, json));
        }
    }
    Ok(())
}
