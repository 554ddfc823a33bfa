//! Live events: the per-user fan-out from the writer to open streams.
//!
//! Each user with open streams has a broadcast channel; the writer publishes
//! each commit's versions of the user to it as one [`LiveCommit`] (one send
//! on the writer's thread, whatever the number of streams), and each
//! stream's body hands them to its core
//! [`EventStream`](folio_core::service::events::EventStream), which decides what it
//! sends. The channel holds core's [`SUBSCRIBER_QUEUE_LEN`] commits: a
//! stream that falls further behind loses commits, is told so
//! ([`EventStream::handle_commits_lost`](folio_core::service::events::EventStream::handle_commits_lost))
//! and ends, and its client reconnects with `Last-Event-Id`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use folio_core::service::events::{
    LiveCommit, OpenStreams, Opened, SUBSCRIBER_QUEUE_LEN, StreamCaps, StreamsFull,
};
use tokio::sync::broadcast;

use crate::metrics::{Limit, METRICS};

#[derive(Default)]
struct Channels {
    users: HashMap<i64, (broadcast::Sender<LiveCommit>, Opened)>,
    open: Opened,
}

/// Every user's live channel.
pub struct Hub {
    channels: Mutex<Channels>,
    caps: StreamCaps,
}

/// An open stream in the hub: its place, and the versions published since
/// it was taken.
pub struct Subscription {
    pub place: StreamPlace,
    /// Receives every commit published after [`Hub::subscribe`], so that
    /// what is committed while the catch-up is read waits here.
    pub receiver: broadcast::Receiver<LiveCommit>,
}

/// An open stream's place among the user's and the server's streams
/// (counted against the caps); dropping it gives the place back.
pub struct StreamPlace {
    hub: Arc<Hub>,
    user_id: i64,
    anonymous: bool,
}

impl Hub {
    pub fn new(caps: StreamCaps) -> Self {
        Hub {
            channels: Mutex::new(Channels::default()),
            caps,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Channels> {
        self.channels
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// Sends a commit's versions of a user to the user's open streams.
    pub fn publish(&self, user_id: i64, commit: LiveCommit) {
        if let Some((sender, _)) = self.lock().users.get(&user_id) {
            // No receiver left is fine: the stream just closed.
            let _ = sender.send(commit);
        }
    }

    /// Opens a stream for a user, `anonymous` or signed, within the caps.
    pub fn subscribe(
        self: &Arc<Self>,
        user_id: i64,
        anonymous: bool,
    ) -> Result<Subscription, StreamsFull> {
        let mut channels = self.lock();
        let open = OpenStreams {
            on_server: Some(channels.open),
            for_user: channels
                .users
                .get(&user_id)
                .map_or_else(Opened::default, |(_, n)| *n),
        };
        if let Err(full) = self.caps.admit(open, anonymous) {
            METRICS.refused(Limit::EventStreams);
            return Err(full);
        }
        METRICS.stream_opened();
        channels.open.open(anonymous);
        let entry = channels.users.entry(user_id).or_insert_with(|| {
            (
                broadcast::channel(SUBSCRIBER_QUEUE_LEN).0,
                Opened::default(),
            )
        });
        entry.1.open(anonymous);
        let receiver = entry.0.subscribe();
        Ok(Subscription {
            place: StreamPlace {
                hub: Arc::clone(self),
                user_id,
                anonymous,
            },
            receiver,
        })
    }
}

impl Drop for StreamPlace {
    fn drop(&mut self) {
        METRICS.stream_closed();
        let mut channels = self.hub.lock();
        channels.open.close(self.anonymous);
        if let Some((_, opened)) = channels.users.get_mut(&self.user_id) {
            opened.close(self.anonymous);
            if opened.all == 0 {
                channels.users.remove(&self.user_id);
            }
        }
    }
}
