//! `pacto-evidence-server`: serves the Evidence Server ingestion API.

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    pacto_evidence_server::run(clap::Parser::parse()).await?;
    Ok(())
}
