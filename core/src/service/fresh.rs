//! The randomness of one request.
//!
//! The core draws no randomness of its own: the host draws 32 bytes for a
//! request and hands them in with it, and everything the request needs
//! (record ids, key seeds, nonces) is drawn from them here. Each draw takes
//! the next ChaCha20 stream of that seed, so no two draws of a request
//! repeat, and a test that fixes the seed fixes every id the request makes.

use std::sync::atomic::{AtomicU64, Ordering};

use rand_chacha::ChaCha20Rng;
use rand_chacha::rand_core::{RngCore, SeedableRng};

use crate::model::RecordId;

/// A request's source of fresh values, from the seed its host drew.
///
/// It is shared by reference across the request's steps (a draw takes
/// `&self`), and is `Sync` so that a host's request future stays `Send`.
#[derive(Debug)]
pub struct Fresh {
    seed: [u8; 32],
    drawn: AtomicU64,
}

impl Fresh {
    /// The fresh values of a request whose host drew `seed` from a
    /// cryptographically secure source (a server key is made from them).
    pub fn from_seed(seed: [u8; 32]) -> Self {
        Fresh {
            seed,
            drawn: AtomicU64::new(0),
        }
    }

    /// `N` fresh bytes, unlike every other draw of this request.
    pub fn bytes<const N: usize>(&self) -> [u8; N] {
        let mut stream = ChaCha20Rng::from_seed(self.seed);
        stream.set_stream(self.drawn.fetch_add(1, Ordering::Relaxed));
        let mut bytes = [0; N];
        stream.fill_bytes(&mut bytes);
        bytes
    }

    /// A fresh random record id.
    pub fn record_id(&self) -> RecordId {
        RecordId::from_bytes(self.bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_differ_within_a_request_and_repeat_across_equal_seeds() {
        let fresh = Fresh::from_seed([7; 32]);
        let first: [u8; 32] = fresh.bytes();
        let second: [u8; 32] = fresh.bytes();
        assert_ne!(first, second);
        let again = Fresh::from_seed([7; 32]);
        assert_eq!(again.bytes::<32>(), first);
        assert_ne!(Fresh::from_seed([8; 32]).bytes::<32>(), first);
    }

    #[test]
    fn a_short_draw_is_the_start_of_a_long_one() {
        let short: [u8; 16] = Fresh::from_seed([1; 32]).bytes();
        let long: [u8; 32] = Fresh::from_seed([1; 32]).bytes();
        assert_eq!(short, long[..16]);
    }
}
