//! `pacto-node-agent`: an eBPF view of the sockets of the pods on one node, published as the
//! node's `NodeRuntimeObservation` and streamed to the observer (docs/design/node-agent.md).

pub mod facts;
pub mod host;
pub mod kernel;
