//! `pacto-status-writer`: the reconcile hub over Pacto.

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    pacto_status_writer::run(clap::Parser::parse()).await?;
    Ok(())
}
