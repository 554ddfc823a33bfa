//! The consent flow (PROTOCOL.md §10): the page at `{base_url}/{user}/auth/{app}`
//! where the owner signs in, sees what a registered app asks for, and
//! approves (an App Authorization record, then a 303 to the app's redirect
//! template with `{authorization_id}`) or denies (`error=access_denied`).
//!
//! Everything here is pure: the host checks the password, draws the
//! randomness, runs the writes and keeps the session's secret.

mod page;
pub mod session;

pub use page::{ScopeItem, TypeLabel, consent_page, message_page, scope_items, sign_in_page};
pub use session::{Session, SessionKey};

use iri_string::spec::UriSpec;
use iri_string::template::UriTemplateStr;
use iri_string::template::context::{Context, Visitor};
use serde_json::Value;

use crate::auth::apps::{Scope, authorization_record_body};
use crate::model::{BlobLink, Entity, Record, RecordId, RecordLink};
use crate::write::{RecordKey, WriteRequest};

/// The largest consent form body the host reads.
pub const MAX_FORM_BYTES: usize = 16 * 1024;

/// The longest password the host will hash: longer ones are refused
/// before any work is done.
pub const MAX_PASSWORD_BYTES: usize = 1024;

/// Response headers of every consent page: no framing (clickjacking), no
/// scripts, no referrer leaking the page's URL, never cached.
pub const PAGE_HEADERS: [(&str, &str); 5] = [
    ("content-type", "text/html; charset=utf-8"),
    (
        "content-security-policy",
        "default-src 'none'; style-src 'unsafe-inline'; img-src data:; \
         frame-ancestors 'none'; base-uri 'none'",
    ),
    ("x-frame-options", "DENY"),
    ("referrer-policy", "no-referrer"),
    ("cache-control", "no-store"),
];

/// Why a consent request cannot go on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConsentError {
    /// The form is too long, lacks its CSRF token or a known action, or holds a value this page
    /// never sends.
    #[error("the form is not one this page sends")]
    InvalidForm,
    /// The App record's redirect template does not expand to an http or https URL.
    #[error("the app's redirect address is not an http or https URL template")]
    InvalidRedirect,
}

/// What a posted consent form asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FormAction {
    /// The sign-in form was posted.
    SignIn {
        /// The password typed; at most [`MAX_PASSWORD_BYTES`] bytes.
        password: String,
    },
    /// The scope items the person left ticked.
    Approve {
        /// The scope items left ticked: each a Type record's entity and id.
        ticked: Scope,
    },
    /// The person refused the app.
    Deny,
}

/// A posted consent form: its CSRF token and action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsentForm {
    /// The CSRF token the page put in the form; checked against the session.
    pub csrf: String,
    /// What the form asks for.
    pub action: FormAction,
}

/// Parses an `application/x-www-form-urlencoded` consent form.
pub fn parse_form(body: &[u8]) -> Result<ConsentForm, ConsentError> {
    if body.len() > MAX_FORM_BYTES {
        return Err(ConsentError::InvalidForm);
    }
    let (mut csrf, mut action, mut password) = (None, None, None);
    let mut ticked = Scope::default();
    for (name, value) in form_urlencoded::parse(body) {
        let list = match name.as_ref() {
            "csrf" => {
                csrf = Some(value.into_owned());
                continue;
            }
            "action" => {
                action = Some(value.into_owned());
                continue;
            }
            "password" => {
                password = Some(value.into_owned());
                continue;
            }
            "read" => &mut ticked.read,
            "write" => &mut ticked.write,
            "subscribe" => &mut ticked.subscribe,
            _ => continue,
        };
        list.push(parse_scope_value(&value).ok_or(ConsentError::InvalidForm)?);
    }
    let action = match action.as_deref() {
        Some("sign_in") => FormAction::SignIn {
            password: password
                .filter(|p| p.len() <= MAX_PASSWORD_BYTES)
                .ok_or(ConsentError::InvalidForm)?,
        },
        Some("approve") => FormAction::Approve { ticked },
        Some("deny") => FormAction::Deny,
        _ => return Err(ConsentError::InvalidForm),
    };
    Ok(ConsentForm {
        csrf: csrf.ok_or(ConsentError::InvalidForm)?,
        action,
    })
}

/// What a consent page request comes to, given its session (already read
/// from the cookie and checked) and, for a POST, its form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Show the sign-in form. `new_session` is a visitor session the host
    /// must set as the cookie (the request came without a usable one).
    SignInForm {
        /// The session to show the form in.
        session: Session,
        /// Whether `session` is new and the host must set it as the cookie.
        new_session: bool,
    },
    /// Show the consent form to the signed-in owner.
    ConsentForm {
        /// The signed-in session.
        session: Session,
    },
    /// Check this password (within the host's sign-in rate); on success a
    /// new signed-in session, on failure the sign-in form again.
    CheckPassword {
        /// The session the form was posted in.
        session: Session,
        /// The password typed.
        password: String,
    },
    /// Back to the page (a decision needs a signed-in session).
    BackToPage,
    /// Authorize the app for the scope items the signed-in owner left ticked.
    Approve {
        /// The scope items left ticked; [`AppRequest::granted`] keeps those the app asked for.
        ticked: Scope,
    },
    /// The signed-in owner refused the app: redirect with `error=access_denied`, authorizing
    /// nothing.
    Deny,
    /// No session, a bad form, or a CSRF token that is not the session's.
    Forbidden,
}

/// Decides a consent page request. `session` is the cookie's session if it
/// is valid; one for another user counts as none. `nonce` is fresh
/// randomness for a visitor session. `form` is `None` for a GET.
pub fn decide(
    user: &str,
    session: Option<Session>,
    form: Option<Result<ConsentForm, ConsentError>>,
    key: &SessionKey,
    nonce: [u8; 16],
    now: crate::model::RecordDate,
) -> Decision {
    let session = session.filter(|session| session.user == user);
    let Some(form) = form else {
        return match session {
            Some(session) if session.signed_in => Decision::ConsentForm { session },
            Some(session) => Decision::SignInForm {
                session,
                new_session: false,
            },
            None => Decision::SignInForm {
                session: Session::visitor(user, nonce, now),
                new_session: true,
            },
        };
    };
    let (Some(session), Ok(form)) = (session, form) else {
        return Decision::Forbidden;
    };
    if !session.check_csrf(key, &form.csrf) {
        return Decision::Forbidden;
    }
    match form.action {
        FormAction::SignIn { password } => Decision::CheckPassword { session, password },
        FormAction::Approve { .. } | FormAction::Deny if !session.signed_in => Decision::BackToPage,
        FormAction::Approve { ticked } => Decision::Approve { ticked },
        FormAction::Deny => Decision::Deny,
    }
}

/// A checkbox value: the Type record's entity and id, separated by a space.
fn scope_value(link: &RecordLink) -> String {
    format!("{} {}", link.entity, link.record_id)
}

fn parse_scope_value(value: &str) -> Option<RecordLink> {
    let (entity, id) = value.split_once(' ')?;
    Some(RecordLink {
        entity: entity.parse().ok()?,
        original_entity: None,
        record_id: id.parse().ok()?,
    })
}

/// What an app asks for, from its App record.
#[derive(Debug, Clone, PartialEq)]
pub struct AppRequest {
    /// The App record's id.
    pub id: RecordId,
    /// The app's name, as its record gives it.
    pub name: String,
    /// The app's description, if its record has one.
    pub description: Option<String>,
    /// The app's website, if its record has one.
    pub website: Option<String>,
    /// The app's icon, if its record links one.
    pub icon: Option<BlobLink>,
    /// The RFC 6570 template to send the person back to.
    pub redirect: String,
    /// The record types the app asks for.
    pub scope: Scope,
}

impl AppRequest {
    /// The name of an App record (of its last live version's content;
    /// `None` for a tombstone).
    pub fn name_of(record: &Record) -> Option<String> {
        record.content_text("/name").map(str::to_owned)
    }

    /// The request of a live App record; `None` for anything else.
    pub fn from_record(record: &Record) -> Option<Self> {
        if !crate::auth::access::is_type(
            &record.type_link,
            crate::schema::builtin::BuiltinType::App,
        ) {
            return None;
        }
        let content = record.content()?.as_map();
        let text = |value: Option<&Value>| value.and_then(Value::as_str).map(str::to_owned);
        let uris = content.get("uris");
        let requested = content.get("scope_request");
        let list = |name: &str| -> Vec<RecordLink> {
            requested
                .and_then(|scope| scope.get(name))
                .and_then(|list| serde_json::from_value(list.clone()).ok())
                .unwrap_or_default()
        };
        Some(AppRequest {
            id: record.id,
            name: text(content.get("name"))?,
            description: text(content.get("description")),
            website: text(uris.and_then(|u| u.get("website"))),
            icon: content
                .get("icon")
                .and_then(|icon| serde_json::from_value(icon.clone()).ok()),
            redirect: text(uris.and_then(|u| u.get("redirect")))?,
            scope: Scope {
                read: list("read"),
                write: list("write"),
                subscribe: list("subscribe"),
            },
        })
    }

    /// The scope to grant: what the app asked for that the person left
    /// ticked, in the app's order. Ticks for anything it did not ask for
    /// count for nothing.
    pub fn granted(&self, ticked: &Scope) -> Scope {
        let keep = |requested: &[RecordLink], ticked: &[RecordLink]| -> Vec<RecordLink> {
            requested
                .iter()
                .filter(|link| {
                    ticked
                        .iter()
                        .any(|t| t.entity == link.entity && t.record_id == link.record_id)
                })
                .cloned()
                .collect()
        };
        Scope {
            read: keep(&self.scope.read, &ticked.read),
            write: keep(&self.scope.write, &ticked.write),
            subscribe: keep(&self.scope.subscribe, &ticked.subscribe),
        }
    }

    /// Where approval sends the person: the template with `authorization_id`.
    pub fn approval_redirect(&self, authorization_id: &RecordId) -> Result<String, ConsentError> {
        expand_redirect(&self.redirect, Some(&authorization_id.to_string()))
    }

    /// Where denial sends the person: the template with `authorization_id`
    /// undefined, plus `error=access_denied` (before any fragment).
    pub fn denial_redirect(&self) -> Result<String, ConsentError> {
        let url = expand_redirect(&self.redirect, None)?;
        let (before, fragment) = match url.split_once('#') {
            Some((before, fragment)) => (before, Some(fragment)),
            None => (url.as_str(), None),
        };
        let separator = match before.rfind('?') {
            None => "?",
            Some(at) if at + 1 == before.len() || before.ends_with('&') => "",
            Some(_) => "&",
        };
        let mut denied = format!("{before}{separator}error=access_denied");
        if let Some(fragment) = fragment {
            denied.push('#');
            denied.push_str(fragment);
        }
        Ok(denied)
    }

    /// The website, if it is a link a page may show (http or https).
    pub fn website_link(&self) -> Option<&str> {
        self.website.as_deref().filter(|url| is_web_url(url))
    }
}

/// The largest icon the page inlines (the App type's `icon.max_size`).
pub const MAX_ICON_BYTES: usize = 1024 * 1024;

/// Media types the page shows an icon in (the App type's `icon.content_types`).
const ICON_TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/webp", "image/svg+xml"];

/// The app's icon as a `data:` URL for the page's `<img>` (images in
/// `<img>` run no scripts, SVG included); `None` for anything else.
pub fn icon_data_url(icon: &BlobLink, bytes: &[u8]) -> Option<String> {
    use base64::Engine;
    let media_type = icon.media_type.to_string();
    let essence = media_type.split(';').next().unwrap_or_default().trim();
    (ICON_TYPES.contains(&essence) && bytes.len() <= MAX_ICON_BYTES).then(|| {
        format!(
            "data:{essence};base64,{}",
            base64::engine::general_purpose::STANDARD.encode(bytes)
        )
    })
}

/// The one variable a redirect template knows.
struct RedirectContext<'a> {
    authorization_id: Option<&'a str>,
}

impl Context for RedirectContext<'_> {
    fn visit<V: Visitor>(&self, visitor: V) -> V::Result {
        match (visitor.var_name().as_str(), self.authorization_id) {
            ("authorization_id", Some(id)) => visitor.visit_string(id),
            _ => visitor.visit_undefined(),
        }
    }
}

fn expand_redirect(template: &str, authorization_id: Option<&str>) -> Result<String, ConsentError> {
    let template = UriTemplateStr::new(template).map_err(|_| ConsentError::InvalidRedirect)?;
    let url = template
        .expand::<UriSpec, _>(&RedirectContext { authorization_id })
        .map_err(|_| ConsentError::InvalidRedirect)?
        .to_string();
    if is_web_url(&url) {
        Ok(url)
    } else {
        Err(ConsentError::InvalidRedirect)
    }
}

/// An absolute http or https URL (never `javascript:` or `data:`).
fn is_web_url(url: &str) -> bool {
    let lower = url.get(..8).unwrap_or(url).to_ascii_lowercase();
    (lower.starts_with("https://") || lower.starts_with("http://"))
        && !url.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// The writes an approval makes in `user`'s store: the new App
/// Authorization record, then the deletion of the app's earlier live ones
/// (`superseded`), so that an app has one authorization at a time and
/// deleting it revokes the app.
pub fn approval_writes(
    user: &Entity,
    app: &RecordId,
    scope: &Scope,
    authorization_id: &RecordId,
    superseded: &[RecordId],
) -> Vec<WriteRequest> {
    let create = authorization_record_body(authorization_id, user, app, scope);
    let create = WriteRequest::post(create.to_string().as_bytes())
        .expect("an authorization body built here parses");
    let deletions = superseded.iter().map(|id| {
        WriteRequest::delete(RecordKey::new(user.clone(), *id), b"")
            .expect("an empty deletion body parses")
    });
    std::iter::once(create).chain(deletions).collect()
}

/// The argon2id memory cost of every password hash this server makes or
/// checks, in KiB (19 MiB): argon2's default and OWASP's recommendation.
pub const PASSWORD_MEMORY_KIB: u32 = argon2::Params::DEFAULT_M_COST;
/// The argon2id passes of every password hash.
pub const PASSWORD_PASSES: u32 = argon2::Params::DEFAULT_T_COST;
/// The argon2id lanes of every password hash.
pub const PASSWORD_LANES: u32 = argon2::Params::DEFAULT_P_COST;
/// The length of every password hash's output, in bytes.
pub const PASSWORD_OUTPUT_BYTES: usize = argon2::Params::DEFAULT_OUTPUT_LEN;

/// Why a stored password hash is not one this server checks: its
/// parameters set the cost of every sign-in, so a hash from elsewhere (an
/// archive) is checked only if it has exactly the server's. The fix is
/// always the same: `folio user passwd USER` stores a new hash.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PasswordHashError {
    /// The string is not a PHC string argon2 can parse.
    #[error("not an argon2 PHC string")]
    Malformed,
    /// The hash was made with another algorithm or version, named here.
    #[error("made with {0}, not argon2id version 19")]
    Algorithm(String),
    /// The hash has other cost parameters than this server's.
    #[error(
        "made with m={memory_kib} KiB, t={passes}, p={lanes}, {output_bytes} bytes, not this \
         server's m={PASSWORD_MEMORY_KIB}, t={PASSWORD_PASSES}, p={PASSWORD_LANES}, \
         {PASSWORD_OUTPUT_BYTES} bytes"
    )]
    Parameters {
        /// Memory cost, in KiB.
        memory_kib: u32,
        /// Number of passes.
        passes: u32,
        /// Degree of parallelism.
        lanes: u32,
        /// Length of the hash, in bytes.
        output_bytes: usize,
    },
}

/// Whether `hash` (a PHC string) is one this server checks: argon2id,
/// version 19, with exactly [`PASSWORD_MEMORY_KIB`], [`PASSWORD_PASSES`],
/// [`PASSWORD_LANES`] and [`PASSWORD_OUTPUT_BYTES`], and no secret key or
/// associated data. It only parses the string: it costs nothing, so a
/// sign-in checks it before running argon2, and an import before keeping
/// a hash.
pub fn check_password_hash(hash: &str) -> Result<(), PasswordHashError> {
    let parsed =
        argon2::password_hash::PasswordHash::new(hash).map_err(|_| PasswordHashError::Malformed)?;
    let algorithm = parsed.algorithm.as_str();
    if algorithm != "argon2id" || parsed.version != Some(0x13) {
        let version = parsed
            .version
            .map(|v| format!(" version {v}"))
            .unwrap_or_default();
        return Err(PasswordHashError::Algorithm(format!(
            "{algorithm}{version}"
        )));
    }
    let params = argon2::Params::try_from(&parsed).map_err(|_| PasswordHashError::Malformed)?;
    let output_bytes = parsed.hash.map_or(0, |output| output.len());
    let expected = (
        PASSWORD_MEMORY_KIB,
        PASSWORD_PASSES,
        PASSWORD_LANES,
        PASSWORD_OUTPUT_BYTES,
    );
    let found = (
        params.m_cost(),
        params.t_cost(),
        params.p_cost(),
        output_bytes,
    );
    let extras = params.keyid().is_empty() && params.data().is_empty();
    if found != expected || !extras {
        return Err(PasswordHashError::Parameters {
            memory_kib: found.0,
            passes: found.1,
            lanes: found.2,
            output_bytes,
        });
    }
    Ok(())
}

/// The argon2id hash (a PHC string) stored for `password`, with `salt`
/// (16 random bytes the host draws) and the server's parameters
/// ([`check_password_hash`]). It costs what [`verify_password`] does: the
/// native host runs it off its async workers.
pub fn hash_password(password: &str, salt: [u8; 16]) -> Option<String> {
    use argon2::PasswordHasher;
    let salt = argon2::password_hash::SaltString::encode_b64(&salt).ok()?;
    argon2::Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .ok()
        .map(|hash| hash.to_string())
}

/// Whether `password` matches `hash`, an argon2id PHC string as
/// [`hash_password`] makes it. A hash with other parameters never matches,
/// and is refused before argon2 runs ([`check_password_hash`]): its
/// parameters would set the cost of the check. Otherwise it costs one
/// argon2 run at the server's parameters: the native host runs it off its
/// async workers.
pub fn verify_password(hash: &str, password: &str) -> bool {
    use argon2::PasswordVerifier;
    if check_password_hash(hash).is_err() {
        return false;
    }
    argon2::password_hash::PasswordHash::new(hash).is_ok_and(|hash| {
        argon2::Argon2::default()
            .verify_password(password.as_bytes(), &hash)
            .is_ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `password`'s argon2 hash with other parameters than the server's.
    fn hash_with(algorithm: argon2::Algorithm, params: argon2::Params, password: &str) -> String {
        use argon2::PasswordHasher;
        let salt = argon2::password_hash::SaltString::encode_b64(&[3; 16]).unwrap();
        argon2::Argon2::new(algorithm, argon2::Version::V0x13, params)
            .hash_password(password.as_bytes(), &salt)
            .unwrap()
            .to_string()
    }

    #[test]
    fn the_servers_own_hashes_are_on_policy_and_verify() {
        let hash = hash_password("correct horse", [9; 16]).unwrap();
        assert_eq!(check_password_hash(&hash), Ok(()));
        assert!(verify_password(&hash, "correct horse"));
        assert!(!verify_password(&hash, "wrong horse"));
    }

    #[test]
    fn a_hash_with_other_parameters_never_verifies_and_says_why() {
        // Cheaper than the policy, so the test is fast; a costlier one
        // (m=256 MiB, t=8) is refused the same way, before argon2 runs.
        let cheap = argon2::Params::new(8, 1, 1, None).unwrap();
        let hash = hash_with(argon2::Algorithm::Argon2id, cheap, "correct horse");
        assert_eq!(
            check_password_hash(&hash),
            Err(PasswordHashError::Parameters {
                memory_kib: 8,
                passes: 1,
                lanes: 1,
                output_bytes: 32
            })
        );
        assert!(!verify_password(&hash, "correct horse"));
        let argon2i = hash_with(
            argon2::Algorithm::Argon2i,
            argon2::Params::default(),
            "correct horse",
        );
        assert!(matches!(
            check_password_hash(&argon2i),
            Err(PasswordHashError::Algorithm(_))
        ));
        assert!(!verify_password(&argon2i, "correct horse"));
        let costly = "$argon2id$v=19$m=262144,t=8,p=1$AwMDAwMDAwMDAwMDAwMDAw$\
                      AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
        let started = std::time::Instant::now();
        assert!(matches!(
            check_password_hash(costly),
            Err(PasswordHashError::Parameters {
                memory_kib: 262_144,
                passes: 8,
                ..
            })
        ));
        assert!(!verify_password(costly, "anything"));
        assert!(started.elapsed() < std::time::Duration::from_millis(50));
        assert_eq!(
            check_password_hash("not a hash"),
            Err(PasswordHashError::Malformed)
        );
    }

    fn app(redirect: &str) -> AppRequest {
        AppRequest {
            id: RecordId::from_bytes([1; 16]),
            name: "Notes".into(),
            description: None,
            website: None,
            icon: None,
            redirect: redirect.into(),
            scope: Scope::default(),
        }
    }

    #[test]
    fn approval_expands_the_template() {
        let id = RecordId::from_bytes([0xab; 16]);
        let hex = id.to_string();
        for (template, expected) in [
            (
                "https://app.example/cb{?authorization_id}",
                format!("https://app.example/cb?authorization_id={hex}"),
            ),
            (
                "https://app.example/cb/{authorization_id}",
                format!("https://app.example/cb/{hex}"),
            ),
            (
                "https://app.example/cb?x=1{&authorization_id}",
                format!("https://app.example/cb?x=1&authorization_id={hex}"),
            ),
        ] {
            assert_eq!(app(template).approval_redirect(&id), Ok(expected));
        }
    }

    #[test]
    fn denial_leaves_the_variable_out_and_adds_the_error() {
        for (template, expected) in [
            (
                "https://app.example/cb{?authorization_id}",
                "https://app.example/cb?error=access_denied",
            ),
            (
                "https://app.example/cb?x=1{&authorization_id}",
                "https://app.example/cb?x=1&error=access_denied",
            ),
            (
                "https://app.example/cb/{authorization_id}#top",
                "https://app.example/cb/?error=access_denied#top",
            ),
        ] {
            assert_eq!(app(template).denial_redirect().as_deref(), Ok(expected));
        }
    }

    #[test]
    fn only_web_redirects_are_followed() {
        let id = RecordId::from_bytes([1; 16]);
        for template in [
            "javascript:alert(1)//{authorization_id}",
            "/relative{?x}",
            "https://a/{",
        ] {
            assert_eq!(
                app(template).approval_redirect(&id),
                Err(ConsentError::InvalidRedirect)
            );
        }
    }

    #[test]
    fn a_form_parses_and_unknown_actions_are_refused() {
        let id = "0123456789abcdef0123456789abcdef";
        let body =
            format!("csrf=t&action=approve&read=alice.example+{id}&write=alice.example+{id}");
        let form = parse_form(body.as_bytes()).expect("a form");
        let FormAction::Approve { ticked } = form.action else {
            panic!("an approval")
        };
        assert_eq!(ticked.read.len(), 1);
        assert_eq!(ticked.write.len(), 1);
        assert_eq!(
            parse_form(b"csrf=t&action=sign_in&password=p%20w").map(|f| f.action),
            Ok(FormAction::SignIn {
                password: "p w".into()
            })
        );
        assert_eq!(
            parse_form(b"csrf=t&action=other"),
            Err(ConsentError::InvalidForm)
        );
        assert_eq!(parse_form(b"action=deny"), Err(ConsentError::InvalidForm));
        assert_eq!(
            parse_form(b"csrf=t&action=approve&read=nonsense"),
            Err(ConsentError::InvalidForm)
        );
    }

    #[test]
    fn decisions_follow_the_session_and_the_csrf_token() {
        let key = SessionKey::from_bytes([3; 32]);
        let now = crate::model::RecordDate::from_unix_millis(1_800_000_000_000).expect("a date");
        let visitor = Session::visitor("me", [1; 16], now);
        let owner = Session::signed_in("me", [2; 16], now);
        let form = |session: &Session, action: FormAction| {
            Some(Ok(ConsentForm {
                csrf: session.csrf_token(&key),
                action,
            }))
        };
        let decide = |session: Option<&Session>, form| {
            decide("me", session.cloned(), form, &key, [9; 16], now)
        };
        assert!(matches!(
            decide(None, None),
            Decision::SignInForm {
                new_session: true,
                ..
            }
        ));
        assert!(matches!(
            decide(Some(&Session::signed_in("you", [2; 16], now)), None),
            Decision::SignInForm {
                new_session: true,
                ..
            }
        ));
        assert!(matches!(
            decide(Some(&owner), None),
            Decision::ConsentForm { .. }
        ));
        assert_eq!(
            decide(Some(&owner), form(&visitor, FormAction::Deny)),
            Decision::Forbidden
        );
        assert_eq!(
            decide(None, form(&visitor, FormAction::Deny)),
            Decision::Forbidden
        );
        assert_eq!(
            decide(Some(&visitor), form(&visitor, FormAction::Deny)),
            Decision::BackToPage
        );
        assert_eq!(
            decide(Some(&owner), form(&owner, FormAction::Deny)),
            Decision::Deny
        );
        assert!(matches!(
            decide(
                Some(&visitor),
                form(
                    &visitor,
                    FormAction::SignIn {
                        password: "p".into()
                    }
                )
            ),
            Decision::CheckPassword { .. }
        ));
    }

    #[test]
    fn only_image_icons_are_inlined() {
        let link = |media_type: &str| -> BlobLink {
            serde_json::from_value(serde_json::json!({
                "hash": "a".repeat(64), "type": media_type, "name": "icon"
            }))
            .expect("a blob link")
        };
        assert_eq!(
            icon_data_url(&link("image/png"), b"png").as_deref(),
            Some("data:image/png;base64,cG5n")
        );
        assert_eq!(icon_data_url(&link("text/html"), b"<script>"), None);
        assert_eq!(
            icon_data_url(&link("image/png"), &vec![0; MAX_ICON_BYTES + 1]),
            None
        );
    }

    #[test]
    fn only_requested_items_are_granted() {
        let link = |n: u8| RecordLink {
            entity: "alice.example".parse().expect("an entity"),
            original_entity: None,
            record_id: RecordId::from_bytes([n; 16]),
        };
        let mut request = app("https://app.example/");
        request.scope = Scope {
            read: vec![link(1), link(2)],
            write: vec![link(3)],
            subscribe: vec![link(3)],
        };
        let ticked = Scope {
            read: vec![link(2), link(9)],
            write: vec![],
            subscribe: vec![link(3)],
        };
        assert_eq!(
            request.granted(&ticked),
            Scope {
                read: vec![link(2)],
                write: vec![],
                subscribe: vec![link(3)],
            }
        );
    }
}
