//! Which endpoint a request addresses (spec §4, PROTOCOL.md §7, §9, §12),
//! and which methods it answers. Both hosts route through this one table,
//! so an address means the same thing on every host.
//!
//! Routing reads the path alone, percent-decoded segment by segment; path
//! values are parsed into their types here, so a handler never sees a
//! malformed id. A path that names nothing is `request/404-not-found`; a
//! known path asked with a method it does not answer is
//! `request/405-method-not-allowed` with its `Allow` list. `OPTIONS` is
//! answered on every path (the preflight), and `HEAD` wherever `GET` is.

use std::borrow::Cow;

use percent_encoding::percent_decode_str;

use crate::model::{BlobHash, Entity, FileName, RecordId, UserName, VersionHash};
use crate::problem::{Problem, ProblemType};

/// The methods a router knows. Anything else is answered 405.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    /// `HEAD`.
    Head,
    /// `GET`.
    Get,
    /// `POST`.
    Post,
    /// `PUT`.
    Put,
    /// `DELETE`.
    Delete,
    /// `OPTIONS`: a CORS preflight.
    Options,
}

impl Method {
    /// Reads an uppercase HTTP method; `None` for any other.
    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "HEAD" => Method::Head,
            "GET" => Method::Get,
            "POST" => Method::Post,
            "PUT" => Method::Put,
            "DELETE" => Method::Delete,
            "OPTIONS" => Method::Options,
            _ => return None,
        })
    }

    /// The method's name, as a request line spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Head => "HEAD",
            Method::Get => "GET",
            Method::Post => "POST",
            Method::Put => "PUT",
            Method::Delete => "DELETE",
            Method::Options => "OPTIONS",
        }
    }
}

/// A record addressed by a path: `{entity}/{record_id}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordPath {
    /// The record's author entity.
    pub entity: Entity,
    /// The record's id.
    pub record_id: RecordId,
}

/// A blob addressed through a record: `…/blobs/{blob_hash}/{file_name}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlobPath {
    /// The blob's SHA-256.
    pub hash: BlobHash,
    /// The percent-decoded file name.
    pub file_name: FileName,
}

/// The route name of `POST /api/{user}/notifications`, whose answers
/// carry a [`NotificationReceipt`](super::observe::NotificationReceipt).
pub(crate) const NOTIFICATIONS_ROUTE: &str = "notifications";

/// One endpoint, with the values its path carries. `user` is the `{user}`
/// path segment, not yet looked up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// `/`: entity discovery on a user's entity host.
    Discovery,
    /// `/docs/error-types/{group}/{status-slug}`: the page of one error type.
    ErrorType {
        /// The path after [`ERROR_TYPES_PREFIX`], such as `record/409-version-conflict`.
        type_path: String,
    },
    /// `/console.css`: the stylesheet of every page a person reads (the
    /// console, the landing page), the same for every user.
    Stylesheet,
    /// `/console?user=NAME`: the landing page's way to a console, which
    /// names no user on the page: a redirect to `/{NAME}/console`.
    FindConsole,
    /// `/{user}/auth/{app_record_id}`: the consent page.
    Consent {
        /// The `{user}` segment.
        user: UserName,
        /// The App record the consent is for.
        app: RecordId,
    },
    /// `/{user}/console…`: the owner's console.
    Console {
        /// The `{user}` segment.
        user: UserName,
        /// Which console page.
        page: ConsolePage,
    },
    /// `/api/{user}/records`.
    Records {
        /// The `{user}` segment.
        user: UserName,
    },
    /// `/api/{user}/records/{entity}/{record_id}`.
    Record {
        /// The `{user}` segment.
        user: UserName,
        /// The record.
        record: RecordPath,
    },
    /// `…/{record_id}/versions`.
    RecordVersions {
        /// The `{user}` segment.
        user: UserName,
        /// The record.
        record: RecordPath,
    },
    /// `…/{record_id}/versions/{version_hash}`.
    RecordVersion {
        /// The `{user}` segment.
        user: UserName,
        /// The record.
        record: RecordPath,
        /// The version's hash.
        hash: VersionHash,
    },
    /// `…/{record_id}/blobs/{blob_hash}/{file_name}`, or the same through
    /// one version when `version` is set.
    RecordBlob {
        /// The `{user}` segment.
        user: UserName,
        /// The record.
        record: RecordPath,
        /// The version the blob is read through, if the path names one.
        version: Option<VersionHash>,
        /// The blob.
        blob: BlobPath,
    },
    /// `/api/{user}/blobs`.
    NewBlob {
        /// The `{user}` segment.
        user: UserName,
    },
    /// `/api/{user}/events`.
    Events {
        /// The `{user}` segment.
        user: UserName,
    },
    /// `/api/{user}/notifications`.
    NewNotification {
        /// The `{user}` segment.
        user: UserName,
    },
    /// `/api/{user}/server`.
    ServerInfo {
        /// The `{user}` segment.
        user: UserName,
    },
}

/// The path prefix under which error-type pages are served: the path of
/// the default `{docs_url}` (`{base_url}/docs`) plus `/error-types`.
pub const ERROR_TYPES_PREFIX: &str = "/docs/error-types/";

impl Endpoint {
    /// The methods this endpoint answers besides `OPTIONS`, as the `Allow` header lists them.
    pub fn methods(&self) -> &'static [Method] {
        use Method::*;
        match self {
            Endpoint::Discovery
            | Endpoint::ErrorType { .. }
            | Endpoint::Stylesheet
            | Endpoint::FindConsole => &[Head, Get],
            Endpoint::Consent { .. } | Endpoint::Console { .. } => &[Head, Get, Post],
            Endpoint::Records { .. } => &[Head, Get, Post],
            Endpoint::Record { .. } => &[Head, Get, Put, Delete],
            Endpoint::RecordVersions { .. }
            | Endpoint::RecordVersion { .. }
            | Endpoint::RecordBlob { .. }
            | Endpoint::Events { .. }
            | Endpoint::ServerInfo { .. } => &[Head, Get],
            Endpoint::NewBlob { .. } | Endpoint::NewNotification { .. } => &[Post],
        }
    }

    /// The name of what a request does here, for logs and metrics: a
    /// fixed, low-cardinality label that carries no value from the path.
    pub fn name(&self, method: Method) -> &'static str {
        match (self, method) {
            (_, Method::Options) => "preflight",
            (Endpoint::Discovery, _) => "discovery",
            (Endpoint::ErrorType { .. }, _) => "error_type",
            (Endpoint::Stylesheet, _) => "stylesheet",
            (Endpoint::FindConsole, _) => "find_console",
            (Endpoint::Consent { .. }, _) => "consent",
            (Endpoint::Console { .. }, _) => "console",
            (Endpoint::Records { .. }, Method::Post) => "records.create",
            (Endpoint::Records { .. }, _) => "records.list",
            (Endpoint::Record { .. }, Method::Put) => "record.update",
            (Endpoint::Record { .. }, Method::Delete) => "record.delete",
            (Endpoint::Record { .. }, _) => "record.get",
            (Endpoint::RecordVersions { .. }, _) => "record.versions",
            (Endpoint::RecordVersion { .. }, _) => "record.version",
            (Endpoint::RecordBlob { .. }, _) => "record.blob",
            (Endpoint::NewBlob { .. }, _) => "blobs.upload",
            (Endpoint::Events { .. }, _) => "events",
            (Endpoint::NewNotification { .. }, _) => NOTIFICATIONS_ROUTE,
            (Endpoint::ServerInfo { .. }, _) => "server_info",
        }
    }

    /// Whether the endpoint serves pages a person reads in a browser (the
    /// consent page and the console) rather than the API: those send no
    /// CORS headers, so no other origin's script may read them, and their
    /// preflights allow nothing.
    pub fn is_page(&self) -> bool {
        matches!(
            self,
            Endpoint::Consent { .. }
                | Endpoint::Console { .. }
                | Endpoint::Stylesheet
                | Endpoint::FindConsole
        )
    }

    /// The `Allow` header value: the endpoint's methods and `OPTIONS`.
    pub fn allow(&self) -> String {
        let mut names: Vec<&str> = self.methods().iter().map(|m| m.as_str()).collect();
        names.push(Method::Options.as_str());
        names.join(", ")
    }

    /// Checks the method; `request/405-method-not-allowed` names the allowed ones.
    pub fn check_method(&self, method: Method) -> Result<(), Problem> {
        if method == Method::Options || self.methods().contains(&method) {
            Ok(())
        } else {
            Err(Problem::new(ProblemType::MethodNotAllowed)
                .with_detail(format!("allowed: {}", self.allow())))
        }
    }

    /// The `{user}` segment, for endpoints inside a user's API.
    pub fn user(&self) -> Option<&UserName> {
        match self {
            Endpoint::Discovery
            | Endpoint::ErrorType { .. }
            | Endpoint::Stylesheet
            | Endpoint::FindConsole => None,
            Endpoint::Consent { user, .. }
            | Endpoint::Console { user, .. }
            | Endpoint::Records { user }
            | Endpoint::Record { user, .. }
            | Endpoint::RecordVersions { user, .. }
            | Endpoint::RecordVersion { user, .. }
            | Endpoint::RecordBlob { user, .. }
            | Endpoint::NewBlob { user }
            | Endpoint::Events { user }
            | Endpoint::NewNotification { user }
            | Endpoint::ServerInfo { user } => Some(user),
        }
    }
}

/// Finds the endpoint of a request path (without its query).
pub fn route(path: &str) -> Result<Endpoint, Problem> {
    let not_found =
        || Problem::new(ProblemType::NotFound).with_detail(format!("no endpoint at {path}"));
    if path == "/" {
        return Ok(Endpoint::Discovery);
    }
    if let Some(type_path) = path.strip_prefix(ERROR_TYPES_PREFIX) {
        return Ok(Endpoint::ErrorType {
            type_path: type_path.to_owned(),
        });
    }
    let rest = path.strip_prefix('/').ok_or_else(not_found)?;
    let segments: Vec<Cow<'_, str>> = rest
        .split('/')
        .map(|s| percent_decode_str(s).decode_utf8())
        .collect::<Result<_, _>>()
        .map_err(|_| not_found())?;
    let segments: Vec<&str> = segments.iter().map(|s| s.as_ref()).collect();
    // A segment no user can be named is no user's.
    let user = |name: &str| -> Result<UserName, Problem> { name.parse().map_err(|_| not_found()) };
    fn parse<T: std::str::FromStr>(text: &str, path: &str) -> Result<T, Problem> {
        text.parse().map_err(|_| {
            Problem::new(ProblemType::NotFound).with_detail(format!("no endpoint at {path}"))
        })
    }
    let record = |entity: &str, id: &str| -> Result<RecordPath, Problem> {
        Ok(RecordPath {
            entity: parse(entity, path)?,
            record_id: parse(id, path)?,
        })
    };
    // A name no blob link can carry (`/`, control characters) names no
    // blob: `blob/404-not-found`, as for any name the record does not link.
    let blob = |hash: &str, name: &str| -> Result<BlobPath, Problem> {
        Ok(BlobPath {
            hash: parse(hash, path)?,
            file_name: name.parse().map_err(|_| {
                Problem::new(ProblemType::BlobNotFound)
                    .with_detail("no blob link carries this file name")
            })?,
        })
    };
    // The API's paths first: a user may be named `auth`, and
    // `/api/auth/records` is that user's records, not user `api`'s consent
    // page (an app id is never `records`, `blobs`, … anyway).
    Ok(match segments.as_slice() {
        ["console.css"] => Endpoint::Stylesheet,
        ["console"] => Endpoint::FindConsole,
        ["api", name, "records"] => Endpoint::Records { user: user(name)? },
        ["api", name, "blobs"] => Endpoint::NewBlob { user: user(name)? },
        ["api", name, "events"] => Endpoint::Events { user: user(name)? },
        ["api", name, "notifications"] => Endpoint::NewNotification { user: user(name)? },
        ["api", name, "server"] => Endpoint::ServerInfo { user: user(name)? },
        ["api", name, "records", entity, id] => Endpoint::Record {
            user: user(name)?,
            record: record(entity, id)?,
        },
        ["api", name, "records", entity, id, "versions"] => Endpoint::RecordVersions {
            user: user(name)?,
            record: record(entity, id)?,
        },
        ["api", name, "records", entity, id, "versions", hash] => Endpoint::RecordVersion {
            user: user(name)?,
            record: record(entity, id)?,
            hash: parse(hash, path)?,
        },
        ["api", name, "records", entity, id, "blobs", hash, file] => Endpoint::RecordBlob {
            user: user(name)?,
            record: record(entity, id)?,
            version: None,
            blob: blob(hash, file)?,
        },
        [
            "api",
            name,
            "records",
            entity,
            id,
            "versions",
            version,
            "blobs",
            hash,
            file,
        ] => Endpoint::RecordBlob {
            user: user(name)?,
            record: record(entity, id)?,
            version: Some(parse(version, path)?),
            blob: blob(hash, file)?,
        },
        [name, "auth", app] => Endpoint::Consent {
            user: user(name)?,
            app: parse(app, path)?,
        },
        [name, "console", rest @ ..] => Endpoint::Console {
            user: user(name)?,
            page: console_page(rest),
        },
        _ => return Err(not_found()),
    })
}

/// A page of the console, from the path segments after `console`.
/// Any other path, or one whose id or hash is malformed, is
/// [`ConsolePage::Unknown`]: the console answers it with its own page.
fn console_page(segments: &[&str]) -> ConsolePage {
    console_page_of(segments).unwrap_or(ConsolePage::Unknown)
}

fn console_page_of(segments: &[&str]) -> Option<ConsolePage> {
    fn parse<T: std::str::FromStr>(text: &str) -> Option<T> {
        text.parse().ok()
    }
    let record = |entity: &str, id: &str| -> Option<RecordPath> {
        Some(RecordPath {
            entity: parse(entity)?,
            record_id: parse(id)?,
        })
    };
    Some(match segments {
        [] | [""] => ConsolePage::Overview,
        ["sign-in"] => ConsolePage::SignIn,
        ["sign-out"] => ConsolePage::SignOut,
        ["browse"] => ConsolePage::Records,
        ["browse", "new"] => ConsolePage::NewRecord,
        ["browse", entity, id] => ConsolePage::Record(record(entity, id)?),
        ["browse", entity, id, "edit"] => ConsolePage::EditRecord(record(entity, id)?),
        ["browse", entity, id, "delete"] => ConsolePage::DeleteRecord(record(entity, id)?),
        ["browse", entity, id, "versions", hash] => {
            ConsolePage::Version(record(entity, id)?, parse(hash)?)
        }
        ["browse", entity, id, "blobs", hash, name] => ConsolePage::Blob(
            record(entity, id)?,
            BlobPath {
                hash: parse(hash)?,
                file_name: parse(name)?,
            },
        ),
        ["types"] => ConsolePage::Types,
        ["apps"] => ConsolePage::Apps,
        ["apps", id, "revoke"] => ConsolePage::RevokeApp(parse(id)?),
        ["apps", id, "forget"] => ConsolePage::ForgetApp(parse(id)?),
        ["outbox"] => ConsolePage::Outbox,
        ["outbox", "send-now"] => ConsolePage::SendNow,
        ["account"] => ConsolePage::Account,
        ["account", "password"] => ConsolePage::ChangePassword,
        ["account", "sessions"] => ConsolePage::EndSessions,
        _ => ConsolePage::Unknown,
    })
}

/// A page of the owner's console (`/{user}/console/…`); each answers `GET`
/// or takes a form's `POST`, as the console decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConsolePage {
    /// `console`: counts, apps, the latest versions.
    Overview,
    /// `console/sign-in`: the password form's target.
    SignIn,
    /// `console/sign-out`.
    SignOut,
    /// `console/browse`: the list of records; a `POST` creates.
    Records,
    /// `console/browse/new`: the form of a new record.
    NewRecord,
    /// `console/browse/{entity}/{id}`: a record and its versions.
    Record(RecordPath),
    /// `…/edit`: the edit form; a `POST` updates.
    EditRecord(RecordPath),
    /// `…/delete`: a `POST` deletes.
    DeleteRecord(RecordPath),
    /// `…/versions/{hash}`: one version, against its parent.
    Version(RecordPath, VersionHash),
    /// `…/blobs/{hash}/{name}`: a blob the record links, downloaded.
    Blob(RecordPath, BlobPath),
    /// `console/types`: the Type records; a `POST` validates a record.
    Types,
    /// `console/apps`.
    Apps,
    /// `console/apps/{id}/revoke`: a `POST` deletes its authorizations.
    RevokeApp(RecordId),
    /// `console/apps/{id}/forget`: a `POST` deletes the app's records.
    ForgetApp(RecordId),
    /// `console/account`.
    Account,
    /// `console/account/password`: a `POST` changes the password.
    ChangePassword,
    /// `console/account/sessions`: a `POST` signs out of every session.
    EndSessions,
    /// `console/outbox`: the notifications waiting for other servers.
    Outbox,
    /// `console/outbox/send-now`: a `POST` makes one recipient's due now.
    SendNow,
    /// Any other path under `console/`: the console's own not-found page.
    Unknown,
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "0123456789abcdef0123456789abcdef";
    const HASH: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn a_user_named_api_reaches_every_console_page() {
        // `/api/console/…` is also the start of user `console`'s API: the
        // console's pages use segments the API's never do (`browse`, not
        // `records`), so neither shadows the other.
        let api: UserName = "api".parse().expect("a user name");
        let record = RecordPath {
            entity: "alice.example".parse().expect("an entity"),
            record_id: ID.parse().expect("an id"),
        };
        for (path, page) in [
            ("/api/console/browse".to_owned(), ConsolePage::Records),
            (
                format!("/api/console/browse/alice.example/{ID}"),
                ConsolePage::Record(record.clone()),
            ),
            (
                format!("/api/console/browse/alice.example/{ID}/versions/{HASH}"),
                ConsolePage::Version(record.clone(), HASH.parse().expect("a hash")),
            ),
        ] {
            assert_eq!(
                route(&path),
                Ok(Endpoint::Console {
                    user: api.clone(),
                    page
                }),
                "{path}"
            );
        }
        let console: UserName = "console".parse().expect("a user name");
        assert_eq!(
            route("/api/console/records"),
            Ok(Endpoint::Records { user: console })
        );
    }

    #[test]
    fn users_named_like_a_path_segment_reach_their_api() {
        for name in ["auth", "api", "docs"] {
            let user: UserName = name.parse().expect("a user name");
            assert_eq!(
                route(&format!("/api/{name}/records")),
                Ok(Endpoint::Records { user: user.clone() })
            );
            assert_eq!(
                route(&format!("/api/{name}/server")),
                Ok(Endpoint::ServerInfo { user })
            );
        }
        let api: UserName = "api".parse().expect("a user name");
        assert_eq!(
            route(&format!("/api/auth/{ID}")),
            Ok(Endpoint::Consent {
                user: api,
                app: ID.parse().expect("an id"),
            })
        );
    }

    #[test]
    fn dot_segments_are_no_user_names() {
        assert!(".".parse::<UserName>().is_err());
        assert!("..".parse::<UserName>().is_err());
        assert!("..a".parse::<UserName>().is_ok());
        assert!(route("/api/../records").is_err());
    }

    #[test]
    fn every_endpoint_routes() {
        let cases = [
            ("/".to_owned(), "Discovery"),
            ("/api/me/records".to_owned(), "Records"),
            (format!("/api/me/records/a.example/{ID}"), "Record"),
            (
                format!("/api/me/records/a.example/{ID}/versions"),
                "RecordVersions",
            ),
            (
                format!("/api/me/records/a.example/{ID}/versions/{HASH}"),
                "RecordVersion",
            ),
            (
                format!("/api/me/records/a.example/{ID}/blobs/{HASH}/a%20b.png"),
                "RecordBlob",
            ),
            (
                format!("/api/me/records/a.example/{ID}/versions/{HASH}/blobs/{HASH}/x"),
                "RecordBlob",
            ),
            ("/api/me/blobs".to_owned(), "NewBlob"),
            ("/api/me/events".to_owned(), "Events"),
            ("/api/me/notifications".to_owned(), "NewNotification"),
            ("/api/me/server".to_owned(), "ServerInfo"),
            (format!("/me/auth/{ID}"), "Consent"),
            (
                "/docs/error-types/request/404-not-found".to_owned(),
                "ErrorType",
            ),
        ];
        for (path, variant) in cases {
            let endpoint = route(&path).unwrap_or_else(|p| panic!("{path}: {p:?}"));
            // The whole variant name: `Record` is not `RecordVersions`.
            let debug = format!("{endpoint:?}");
            assert_eq!(
                debug.split([' ', '{']).next(),
                Some(variant),
                "{path}: {endpoint:?}"
            );
        }
    }

    #[test]
    fn file_names_are_percent_decoded_and_checked() {
        let path = format!("/api/me/records/a.example/{ID}/blobs/{HASH}/caf%C3%A9%20menu.pdf");
        let Ok(Endpoint::RecordBlob { blob, .. }) = route(&path) else {
            panic!("a blob path");
        };
        assert_eq!(blob.file_name.as_str(), "café menu.pdf");
        // A name no blob link can carry names no blob; a segment that is
        // not UTF-8 names no endpoint at all.
        for (bad, kind) in [
            ("..%2Fsecret", ProblemType::BlobNotFound),
            ("%2e%2e%2fx", ProblemType::BlobNotFound),
            ("a%00b", ProblemType::BlobNotFound),
            ("%FF", ProblemType::NotFound),
        ] {
            let path = format!("/api/me/records/a.example/{ID}/blobs/{HASH}/{bad}");
            assert_eq!(route(&path).map_err(|p| p.kind), Err(kind), "{bad}");
        }
    }

    #[test]
    fn malformed_paths_are_not_found() {
        for path in [
            "",
            "/api",
            "/api/me",
            "/api//records",
            "/api/me/records/",
            "/api/me/records/A.EXAMPLE/0123456789abcdef0123456789abcdef",
            "/api/me/records/a.example/xyz",
            "/api/me/unknown",
            "/api/me/records/a.example/0123456789abcdef0123456789abcdef/versions/short",
        ] {
            assert_eq!(
                route(path).map_err(|p| p.kind),
                Err(ProblemType::NotFound),
                "{path}"
            );
        }
    }

    #[test]
    fn methods_are_checked_with_an_allow_list() {
        let records = route("/api/me/records").expect("routes");
        assert!(records.check_method(Method::Post).is_ok());
        assert!(records.check_method(Method::Options).is_ok());
        let problem = records.check_method(Method::Put).expect_err("405");
        assert_eq!(problem.kind, ProblemType::MethodNotAllowed);
        assert_eq!(records.allow(), "HEAD, GET, POST, OPTIONS");
    }
}
