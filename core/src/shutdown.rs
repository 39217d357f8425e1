//! Stopping, the same way in every process and test: [`shutdown_signal`] is the one wait for an
//! operator's ctrl-c or SIGTERM; [`Shutdown`] is the stop flag the components of a process share
//! (set by that signal, by a component that stopped on its own, or by a test); [`stopped`] is how
//! a long-lived task (a server, a ticker, an event stream) waits on the flag.

use std::future::Future;

use tokio::sync::watch;

/// Resolves on ctrl-c or, on Unix, SIGTERM (what systemd, Docker and Kubernetes send). A signal
/// that cannot be listened for never fires, so the other still stops the process.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = terminate => {},
    }
}

/// A stop flag: set once, seen by every waiter, cheap to clone (clones share the flag).
#[derive(Debug, Clone)]
pub struct Shutdown {
    sender: watch::Sender<bool>,
}

impl Default for Shutdown {
    fn default() -> Shutdown {
        Shutdown::new()
    }
}

impl Shutdown {
    /// A flag not yet set.
    pub fn new() -> Shutdown {
        let (sender, _) = watch::channel(false);
        Shutdown { sender }
    }

    /// Sets the flag; every waiter wakes. Setting it again does nothing more.
    pub fn trigger(&self) {
        self.sender.send_replace(true);
    }

    pub fn is_triggered(&self) -> bool {
        *self.sender.borrow()
    }

    /// A receiver for tasks that wait with [`stopped`] inside their own `select!`.
    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.sender.subscribe()
    }

    /// A future that resolves once the flag is set: what a component's `run(listener, shutdown)`
    /// takes.
    pub fn wait(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut receiver = self.subscribe();
        async move { stopped(&mut receiver).await }
    }
}

/// Resolves once the flag is set, or once every sender is gone (nobody is left to keep the task
/// running, which also means stop). The guard `wait_for` returns is dropped here, so the
/// caller's future stays `Send`.
pub async fn stopped(flag: &mut watch::Receiver<bool>) {
    let _ = flag.wait_for(|stopping| *stopping).await;
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn every_waiter_wakes_once_the_flag_is_set() {
        let shutdown = Shutdown::new();
        let waiting = tokio::spawn(shutdown.wait());
        let mut receiver = shutdown.subscribe();
        let in_select = tokio::spawn(async move { stopped(&mut receiver).await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished() && !in_select.is_finished());
        assert!(!shutdown.is_triggered());

        shutdown.clone().trigger();
        assert!(shutdown.is_triggered());
        for task in [waiting, in_select] {
            tokio::time::timeout(Duration::from_secs(1), task)
                .await
                .expect("woken")
                .expect("no panic");
        }
        // A waiter that arrives late sees the flag already set.
        tokio::time::timeout(Duration::from_secs(1), shutdown.wait())
            .await
            .expect("already set");
    }

    #[tokio::test]
    async fn a_flag_whose_senders_are_gone_means_stop() {
        let shutdown = Shutdown::new();
        let mut receiver = shutdown.subscribe();
        drop(shutdown);
        tokio::time::timeout(Duration::from_secs(1), stopped(&mut receiver))
            .await
            .expect("resolves");
    }
}
