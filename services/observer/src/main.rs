//! `pacto-observer`: serves the Observer gRPC API over mTLS.

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    pacto_observer::run(clap::Parser::parse()).await?;
    Ok(())
}
