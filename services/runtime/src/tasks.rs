//! The tasks of a service process (docs/design/architecture.md#runtime): [`Tasks`] is a handle
//! on the runtime's task list that code building the service's state takes along, so a task it
//! spawns later — an index's watch, a leader term's work — is in a `task` span and is joined by
//! [`crate::Runtime::run`] like the tasks spawned with [`crate::Runtime::spawn`].

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

/// A named task and its handle.
pub(crate) type Named = (&'static str, JoinHandle<()>);

/// Where a service spawns its tasks: each runs in a `task` span naming it and should stop on
/// [`Tasks::shutdown`]. Cloning shares the list.
///
/// The runtime's handle ([`crate::Runtime::tasks`]) keeps every task for the drain to join. A
/// handle made from a bare token ([`Tasks::detached`], or `From<&CancellationToken>`) is for a
/// test or an embedding without a runtime: its tasks stop on the token and no one joins them.
#[derive(Clone, Debug)]
pub struct Tasks {
    shutdown: CancellationToken,
    /// `None`: detached.
    joined: Option<Arc<Mutex<Vec<Named>>>>,
}

impl Tasks {
    /// The runtime's list: every task spawned is joined by [`Tasks::take`].
    pub(crate) fn joined(shutdown: CancellationToken) -> Self {
        Self {
            shutdown,
            joined: Some(Arc::default()),
        }
    }

    /// Tasks that stop on `shutdown` and are joined by no one (see the type's documentation).
    pub fn detached(shutdown: CancellationToken) -> Self {
        Self {
            shutdown,
            joined: None,
        }
    }

    /// The token the tasks stop on (the runtime's shared token, [`crate::Runtime::shutdown`]).
    pub fn shutdown(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// Runs `task` in a `task` span named `name`; the runtime joins it in its drain.
    pub fn spawn(&self, name: &'static str, task: impl Future<Output = ()> + Send + 'static) {
        let handle = tokio::spawn(task.instrument(tracing::info_span!("task", task = name)));
        if let Some(list) = &self.joined {
            let mut list = list.lock().unwrap_or_else(PoisonError::into_inner);
            // Tasks that ended (a leader term's) leave the list as new ones arrive.
            list.retain(|(_, handle)| !handle.is_finished());
            list.push((name, handle));
        }
    }

    /// The tasks spawned so far (and not taken yet), in order.
    pub(crate) fn take(&self) -> Vec<Named> {
        self.joined.as_ref().map_or_else(Vec::new, |list| {
            std::mem::take(&mut *list.lock().unwrap_or_else(PoisonError::into_inner))
        })
    }

    /// The names of the tasks spawned so far (and not taken yet).
    pub(crate) fn names(&self) -> Vec<&'static str> {
        self.joined.as_ref().map_or_else(Vec::new, |list| {
            list.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .iter()
                .map(|(name, _)| *name)
                .collect()
        })
    }
}

impl From<&CancellationToken> for Tasks {
    fn from(shutdown: &CancellationToken) -> Self {
        Self::detached(shutdown.clone())
    }
}

impl From<CancellationToken> for Tasks {
    fn from(shutdown: CancellationToken) -> Self {
        Self::detached(shutdown)
    }
}

impl From<&Tasks> for Tasks {
    fn from(tasks: &Tasks) -> Self {
        tasks.clone()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use super::*;
    use crate::Runtime;

    /// A task spawned through the handle once the runtime runs (as a leader term or an index
    /// built later does) is joined by the drain: `run` returns only after it stopped.
    #[tokio::test]
    async fn a_task_spawned_through_the_handle_is_joined_by_the_drain() {
        let names = crate::testing::service_names("", "tasks-test");
        let admin = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let stop = CancellationToken::new();
        let mut rt = Runtime::new(names, admin, stop.clone()).unwrap();
        let tasks = rt.tasks();
        let stopped = Arc::new(AtomicBool::new(false));
        let (spawned_tx, spawned_rx) = tokio::sync::oneshot::channel();
        {
            let stopped = Arc::clone(&stopped);
            rt.spawn("spawner", async move {
                let shutdown = tasks.shutdown();
                tasks.spawn("late", async move {
                    shutdown.cancelled().await;
                    // Stopping takes a while: a drain that did not join this task would have
                    // returned by then.
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    stopped.store(true, Ordering::SeqCst);
                });
                let _ = spawned_tx.send(());
            });
        }
        let running = tokio::spawn(rt.run());
        spawned_rx.await.unwrap();
        stop.cancel();
        tokio::time::timeout(Duration::from_secs(10), running)
            .await
            .expect("run returns")
            .unwrap()
            .unwrap();
        assert!(
            stopped.load(Ordering::SeqCst),
            "run returned before the late task stopped"
        );
    }

    /// A detached handle spawns (in its span) and keeps nothing to join.
    #[tokio::test]
    async fn a_detached_handle_keeps_no_task() {
        let shutdown = CancellationToken::new();
        let tasks = Tasks::from(&shutdown);
        let (done_tx, done_rx) = tokio::sync::oneshot::channel();
        tasks.spawn("one", async move {
            let _ = done_tx.send(());
        });
        done_rx.await.unwrap();
        assert!(tasks.take().is_empty());
        assert!(tasks.names().is_empty());
    }
}
