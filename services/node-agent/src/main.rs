//! `pacto-node-agent`: the per-node eBPF socket view.

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    pacto_node_agent::run(clap::Parser::parse()).await?;
    Ok(())
}
