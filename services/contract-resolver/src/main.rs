//! `pacto-contract-resolver`: serves the ContractResolver gRPC API over mTLS.

use clap::Parser;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    rustls::crypto::ring::default_provider()
        .install_default()
        .map_err(|_| anyhow::anyhow!("a rustls crypto provider is already installed"))?;
    let args = pacto_contract_resolver::Args::parse();
    pacto_contract_resolver::run(args).await?;
    Ok(())
}
