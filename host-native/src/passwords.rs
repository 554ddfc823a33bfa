//! Password checks on the consent page: argon2id takes tens of
//! milliseconds and 19 MiB each, so only [`PASSWORD_CHECKS_AT_ONCE`] run at
//! once, on the blocking threads; the others wait their turn.

use tokio::sync::Semaphore;

/// Most password checks running at once.
pub const PASSWORD_CHECKS_AT_ONCE: usize = 2;

/// The turns of password checks.
#[derive(Debug)]
pub struct PasswordChecks {
    turns: Semaphore,
}

impl PasswordChecks {
    pub fn new(at_once: usize) -> Self {
        Self {
            turns: Semaphore::new(at_once.max(1)),
        }
    }

    /// Whether `password` matches the argon2id `hash`.
    pub async fn verify(&self, hash: String, password: String) -> bool {
        self.in_turn(move || folio_core::service::consent::verify_password(&hash, &password))
            .await
            .unwrap_or(false)
    }

    /// The argon2id hash of a new `password`, with `salt`.
    pub async fn hash(&self, password: String, salt: [u8; 16]) -> Option<String> {
        self.in_turn(move || folio_core::service::consent::hash_password(&password, salt))
            .await
            .flatten()
    }

    /// Runs `work` on a blocking thread once a turn is free; `None` if it
    /// could not run.
    async fn in_turn<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Option<T> {
        // The semaphore is never closed.
        let Ok(_turn) = self.turns.acquire().await else {
            return None;
        };
        tokio::task::spawn_blocking(work).await.ok()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn no_more_checks_run_at_once_than_the_cap_and_every_one_runs() {
        let checks = Arc::new(PasswordChecks::new(2));
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let mut waiting = Vec::new();
        for _ in 0..8 {
            let (checks, running, most) = (checks.clone(), running.clone(), most.clone());
            waiting.push(tokio::spawn(async move {
                checks
                    .in_turn(move || {
                        let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        std::thread::sleep(Duration::from_millis(30));
                        running.fetch_sub(1, Ordering::SeqCst);
                        true
                    })
                    .await
            }));
        }
        for check in waiting {
            assert_eq!(
                check.await.expect("the task ends"),
                Some(true),
                "every check ran"
            );
        }
        assert_eq!(most.load(Ordering::SeqCst), 2, "at most two at once");
    }

    #[tokio::test]
    async fn a_password_matches_its_own_hash_only() {
        let hash = crate::users::hash_password("correct horse").expect("a hash");
        let checks = PasswordChecks::new(PASSWORD_CHECKS_AT_ONCE);
        assert!(checks.verify(hash.clone(), "correct horse".into()).await);
        assert!(!checks.verify(hash, "battery staple".into()).await);
    }
}
