//! `pacto-contract-resolver`: serves the ContractResolver gRPC API over mTLS.

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    pacto_contract_resolver::run(clap::Parser::parse()).await?;
    Ok(())
}
