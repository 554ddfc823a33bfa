//! The session of the consent page and the owner's console: a cookie the
//! server signs (HMAC-SHA-256 with a secret the host keeps), so that neither
//! host stores sessions. It names the user, whether the person signed in and
//! when, when it expires, and a random nonce the CSRF token of its forms is
//! derived from. Signing out of every session moves the user's
//! `sessions_after` mark past every sign-in made so far
//! ([`Session::is_current`]); signing out of one moves it to that session's
//! sign-in ([`Session::sign_out_mark`]), so a copy of its cookie is dead
//! too. The mark only moves forward.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::model::RecordDate;

/// The cookie's name. `__Host-` makes browsers insist on `Secure`,
/// `Path=/` and no `Domain`, so no other host can set or shadow it.
pub const SESSION_COOKIE: &str = "__Host-folio_session";

/// How long a signed-in session lasts without use: each page that finds
/// less than half of it left renews it ([`Session::renewed`]).
pub const SIGNED_IN_LIFETIME_MS: i64 = 30 * 60 * 1000;

/// How long after signing in a session ends, however much it is used.
pub const SIGNED_IN_MAX_MS: i64 = 12 * 60 * 60 * 1000;

/// How long a visitor's (not yet signed-in) session lasts: its forms'
/// CSRF tokens stay valid this long.
pub const VISITOR_LIFETIME_MS: i64 = 60 * 60 * 1000;

/// The host's secret for session cookies: 32 random bytes it keeps.
#[derive(Clone)]
pub struct SessionKey([u8; 32]);

impl SessionKey {
    /// The key of these bytes; the host draws them once and keeps them, or every cookie it set
    /// stops being valid.
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        SessionKey(bytes)
    }

    fn mac(&self, purpose: &str, data: &[u8]) -> Hmac<Sha256> {
        let mut mac =
            Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes a key of any length");
        mac.update(purpose.as_bytes());
        mac.update(b"\n");
        mac.update(data);
        mac
    }
}

impl std::fmt::Debug for SessionKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionKey(..)")
    }
}

/// A consent session, for one user of the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    /// The `{user}` path segment the session is for.
    pub user: String,
    /// Whether the person proved they are the user (the password).
    pub signed_in: bool,
    /// When the session ends, milliseconds since the Unix epoch.
    pub expires_ms: i64,
    /// When the person signed in (when the visit began, for a visitor).
    pub since_ms: i64,
    nonce: [u8; 16],
}

impl Session {
    /// A session for someone who has not signed in yet: it carries the
    /// CSRF token of the sign-in form. `nonce` is fresh randomness.
    pub fn visitor(user: &str, nonce: [u8; 16], now: RecordDate) -> Self {
        Session {
            user: user.to_owned(),
            signed_in: false,
            expires_ms: now.unix_millis() + VISITOR_LIFETIME_MS,
            since_ms: now.unix_millis(),
            nonce,
        }
    }

    /// The session of someone who just signed in, with a fresh `nonce` (a
    /// new session on every sign-in, so a planted cookie gains nothing).
    pub fn signed_in(user: &str, nonce: [u8; 16], now: RecordDate) -> Self {
        Session {
            user: user.to_owned(),
            signed_in: true,
            expires_ms: now.unix_millis() + SIGNED_IN_LIFETIME_MS,
            since_ms: now.unix_millis(),
            nonce,
        }
    }

    /// Whether the session is a signed-in one of `user` that signing out
    /// everywhere has not ended: made after the user's `sessions_after`
    /// mark (Unix milliseconds; 0 when the user never signed out).
    pub fn is_current(&self, user: &str, sessions_after_ms: i64) -> bool {
        self.signed_in && self.user == user && self.since_ms > sessions_after_ms
    }

    /// The `sessions_after` mark that signing out of this session sets (its
    /// sign-in time): it ends this session wherever its cookie is, and
    /// every session of the user signed in at or before it; sessions signed
    /// in later go on. One mark per user, the one that signing out
    /// everywhere and a password change move, so the server keeps no list
    /// of sessions.
    pub fn sign_out_mark(&self) -> i64 {
        self.since_ms
    }

    /// The same session with its expiry moved on, when less than half of
    /// [`SIGNED_IN_LIFETIME_MS`] is left and [`SIGNED_IN_MAX_MS`] allows:
    /// its nonce (so the CSRF token of open forms) stays.
    pub fn renewed(&self, now: RecordDate) -> Option<Session> {
        let now = now.unix_millis();
        let end = (now + SIGNED_IN_LIFETIME_MS).min(self.since_ms + SIGNED_IN_MAX_MS);
        (self.signed_in
            && self.expires_ms - now < SIGNED_IN_LIFETIME_MS / 2
            && end > self.expires_ms)
            .then(|| Session {
                expires_ms: end,
                ..self.clone()
            })
    }

    /// `v2.<user, base64url>.<0|1>.<expiry ms>.<since ms>.<nonce hex>`,
    /// what the MAC covers.
    fn payload(&self) -> String {
        format!(
            "v2.{}.{}.{}.{}.{}",
            URL_SAFE_NO_PAD.encode(&self.user),
            u8::from(self.signed_in),
            self.expires_ms,
            self.since_ms,
            hex::encode(self.nonce)
        )
    }

    /// The cookie's value: the payload and its MAC.
    pub fn cookie_value(&self, key: &SessionKey) -> String {
        let payload = self.payload();
        let mac = key
            .mac("session", payload.as_bytes())
            .finalize()
            .into_bytes();
        format!("{payload}.{}", hex::encode(mac))
    }

    /// A `Set-Cookie` value for this session: `Secure`, `HttpOnly`,
    /// `SameSite=Lax`, for the whole host, until the session expires.
    pub fn set_cookie(&self, key: &SessionKey, now: RecordDate) -> String {
        let max_age = (self.expires_ms - now.unix_millis()).max(0) / 1000;
        format!(
            "{SESSION_COOKIE}={}; Path=/; Max-Age={max_age}; Secure; HttpOnly; SameSite=Lax",
            self.cookie_value(key)
        )
    }

    /// A `Set-Cookie` value that removes the session cookie (signing out).
    pub fn clear_cookie() -> String {
        format!("{SESSION_COOKIE}=; Path=/; Max-Age=0; Secure; HttpOnly; SameSite=Lax")
    }

    /// The session a request's `Cookie` header carries, if its MAC holds
    /// and it has not expired.
    pub fn from_cookie_header(header: &str, key: &SessionKey, now: RecordDate) -> Option<Self> {
        header
            .split(';')
            .filter_map(|pair| pair.trim().split_once('='))
            .filter(|(name, _)| *name == SESSION_COOKIE)
            .find_map(|(_, value)| Self::from_cookie_value(value, key))
            .filter(|session| session.expires_ms > now.unix_millis())
    }

    fn from_cookie_value(value: &str, key: &SessionKey) -> Option<Self> {
        let (payload, mac) = value.rsplit_once('.')?;
        key.mac("session", payload.as_bytes())
            .verify_slice(&hex::decode(mac).ok()?)
            .ok()?;
        let mut parts = payload.split('.');
        let (
            Some("v2"),
            Some(user),
            Some(signed_in),
            Some(expires),
            Some(since),
            Some(nonce),
            None,
        ) = (
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
        )
        else {
            return None;
        };
        Some(Session {
            user: String::from_utf8(URL_SAFE_NO_PAD.decode(user).ok()?).ok()?,
            signed_in: match signed_in {
                "1" => true,
                "0" => false,
                _ => return None,
            },
            expires_ms: expires.parse().ok()?,
            since_ms: since.parse().ok()?,
            nonce: hex::decode(nonce).ok()?.try_into().ok()?,
        })
    }

    /// The CSRF token the session's forms carry.
    pub fn csrf_token(&self, key: &SessionKey) -> String {
        hex::encode(key.mac("csrf", &self.nonce).finalize().into_bytes())
    }

    /// Whether a form's token is this session's (compared in constant time).
    pub fn check_csrf(&self, key: &SessionKey, token: &str) -> bool {
        hex::decode(token)
            .is_ok_and(|token| key.mac("csrf", &self.nonce).verify_slice(&token).is_ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixed_time() -> RecordDate {
        RecordDate::from_unix_millis(1_800_000_000_000).expect("a date")
    }

    #[test]
    fn a_cookie_round_trips_and_a_forged_one_does_not() {
        let key = SessionKey::from_bytes([7; 32]);
        let session = Session::signed_in("me.and/you", [1; 16], fixed_time());
        let header = format!("a=b; {SESSION_COOKIE}={}; c=d", session.cookie_value(&key));
        assert_eq!(
            Session::from_cookie_header(&header, &key, fixed_time()),
            Some(session.clone())
        );
        let other_key = SessionKey::from_bytes([8; 32]);
        assert_eq!(
            Session::from_cookie_header(&header, &other_key, fixed_time()),
            None
        );
        let forged = header.replace(".1.", ".0.");
        assert_eq!(
            Session::from_cookie_header(&forged, &key, fixed_time()),
            None
        );
    }

    #[test]
    fn an_expired_session_is_none() {
        let key = SessionKey::from_bytes([7; 32]);
        let session = Session::visitor("me", [1; 16], fixed_time());
        let header = format!("{SESSION_COOKIE}={}", session.cookie_value(&key));
        let later = RecordDate::from_unix_millis(fixed_time().unix_millis() + VISITOR_LIFETIME_MS)
            .expect("a date");
        assert_eq!(Session::from_cookie_header(&header, &key, later), None);
    }

    #[test]
    fn the_csrf_token_is_bound_to_the_session() {
        let key = SessionKey::from_bytes([7; 32]);
        let session = Session::visitor("me", [1; 16], fixed_time());
        let other = Session::visitor("me", [2; 16], fixed_time());
        assert!(session.check_csrf(&key, &session.csrf_token(&key)));
        assert!(!session.check_csrf(&key, &other.csrf_token(&key)));
        assert!(!session.check_csrf(&key, "not hex"));
    }

    #[test]
    fn signing_out_everywhere_ends_earlier_sessions() {
        let session = Session::signed_in("me", [1; 16], fixed_time());
        let at = fixed_time().unix_millis();
        assert!(session.is_current("me", 0));
        assert!(session.is_current("me", at - 1));
        assert!(!session.is_current("me", at));
        assert!(!session.is_current("you", 0));
        assert!(!Session::visitor("me", [1; 16], fixed_time()).is_current("me", 0));
    }

    #[test]
    fn signing_out_ends_this_session_and_earlier_ones_only() {
        let at = |ms: i64| {
            RecordDate::from_unix_millis(fixed_time().unix_millis() + ms).expect("a date")
        };
        let earlier = Session::signed_in("me", [1; 16], at(-60_000));
        let this = Session::signed_in("me", [2; 16], fixed_time());
        let later = Session::signed_in("me", [3; 16], at(1));
        // A renewed copy of the session keeps its sign-in time, so it ends too.
        let renewed = this
            .renewed(at(SIGNED_IN_LIFETIME_MS - 60_000))
            .expect("renewed");
        let mark = this.sign_out_mark();
        assert!(!this.is_current("me", mark));
        assert!(!renewed.is_current("me", mark));
        assert!(!earlier.is_current("me", mark));
        assert!(later.is_current("me", mark));
    }

    #[test]
    fn a_used_session_is_renewed_up_to_its_maximum() {
        let at = |ms: i64| {
            RecordDate::from_unix_millis(fixed_time().unix_millis() + ms).expect("a date")
        };
        let session = Session::signed_in("me", [1; 16], fixed_time());
        assert_eq!(session.renewed(at(60_000)), None, "most of it is left");
        let renewed = session
            .renewed(at(SIGNED_IN_LIFETIME_MS - 60_000))
            .expect("renewed past half its lifetime");
        assert_eq!(
            renewed.expires_ms,
            at(2 * SIGNED_IN_LIFETIME_MS - 60_000).unix_millis()
        );
        assert_eq!(renewed.since_ms, session.since_ms);
        let key = SessionKey::from_bytes([7; 32]);
        assert_eq!(renewed.csrf_token(&key), session.csrf_token(&key));
        let mut old = session.clone();
        old.expires_ms = session.since_ms + SIGNED_IN_MAX_MS;
        assert_eq!(
            old.renewed(at(SIGNED_IN_MAX_MS - 60_000)),
            None,
            "never past the maximum"
        );
    }

    #[test]
    fn the_cookie_is_secure_http_only_and_lax() {
        let key = SessionKey::from_bytes([7; 32]);
        let cookie = Session::visitor("me", [1; 16], fixed_time()).set_cookie(&key, fixed_time());
        assert!(cookie.starts_with("__Host-folio_session=v2."));
        assert!(cookie.ends_with("; Path=/; Max-Age=3600; Secure; HttpOnly; SameSite=Lax"));
    }
}
