//! `pacto-evaluator`: serves the Evaluator gRPC API over mTLS.

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    pacto_evaluator::run(clap::Parser::parse()).await?;
    Ok(())
}
