//! End-to-end suite of the operator (see `tests/`): the control plane with
//! kube-controller-manager, a docker-registry, Prometheus and the four service binaries
//! (`pacto-contract-resolver`, `pacto-observer`, `pacto-evaluator`, `pacto-status-writer`) as
//! separate processes talking mTLS with certificates generated for the run. Scenarios are
//! asserted through `kubectl get -o yaml` and `kubectl describe`, as a user reads them.
//!
//! The crate has no library code; everything lives in `tests/`. Run with
//! `cargo test -p pacto-e2e` (the harness builds the service binaries and the `pacto` CLI itself).
