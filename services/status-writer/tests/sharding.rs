//! The tests of the sharded assignment of Pactos to several leaders (docs/design/scaling.md#sharding-status-writer-leaders):
//! the module lives beside the `sharding` bench that simulates it, not in the service, and its
//! unit tests run here.

#[allow(dead_code, reason = "the bench reads what these tests do not")]
#[path = "../benches/sharding/shard.rs"]
mod shard;
