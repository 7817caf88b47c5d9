//! `pacto-evaluator`: serves the Evaluator gRPC API over mTLS.

use clap::Parser;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    rustls::crypto::ring::default_provider()
        .install_default()
        .map_err(|_| anyhow::anyhow!("a rustls crypto provider is already installed"))?;
    let args = pacto_evaluator::Args::parse();
    pacto_evaluator::run(args).await?;
    Ok(())
}
