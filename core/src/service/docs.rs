//! The human-readable page served at every error type URL (PROTOCOL.md
//! §11): `{docs_url}/error-types/{group}/{status}-{slug}`, with `{docs_url}`
//! defaulting to the server's own `{base_url}/docs`. Both hosts serve the
//! same bytes, rendered here from the problem catalogue.

use std::fmt::Write;

use crate::problem::ProblemType;

/// The path segment between `{docs_url}` and a type path.
pub const ERROR_TYPES_PATH: &str = "error-types";

/// The `Content-Type` of an error type page.
pub const ERROR_TYPE_PAGE_CONTENT_TYPE: &str = "text/html; charset=utf-8";

/// The page of the error type whose [`ProblemType::type_path`] is
/// `type_path` (such as `record/409-version-conflict`, the part of the
/// request path after `…/error-types/`, compared exactly), or `None` when
/// no type has it: the host then answers `request/404-not-found`.
///
/// The page is a complete HTML5 document in English: its title, status,
/// `code`, type path and what it means for a client, all text escaped.
pub fn error_type_page(type_path: &str) -> Option<String> {
    let kind = ProblemType::ALL
        .iter()
        .copied()
        .find(|kind| kind.type_path() == type_path)?;
    let title = escape(kind.title());
    let status = kind.status();
    let mut page = String::with_capacity(1_024);
    // Writing to a String cannot fail.
    let _ = write!(
        page,
        "<!DOCTYPE html>\n\
         <html lang=\"en\">\n\
         <head>\n\
         <meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{title} ({status}) · Folio error</title>\n\
         </head>\n\
         <body>\n\
         <main>\n\
         <h1>{title}</h1>\n\
         <dl>\n\
         <dt>Status</dt><dd>{status} {reason}</dd>\n\
         <dt>Code</dt><dd><code>{code}</code></dd>\n\
         <dt>Type</dt><dd><code>{path}</code></dd>\n\
         </dl>\n\
         <p>{explanation}</p>\n\
         </main>\n\
         </body>\n\
         </html>\n",
        reason = escape(reason_phrase(status)),
        code = escape(kind.code()),
        path = escape(kind.type_path()),
        explanation = with_code_spans(kind.explanation()),
    );
    Some(page)
}

/// The reason phrase of the statuses the catalogue uses (RFC 9110 §15;
/// 429 and 431 from RFC 6585, 507 from RFC 4918).
fn reason_phrase(status: u16) -> &'static str {
    match status {
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        409 => "Conflict",
        410 => "Gone",
        411 => "Length Required",
        413 => "Content Too Large",
        414 => "URI Too Long",
        415 => "Unsupported Media Type",
        416 => "Range Not Satisfiable",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        507 => "Insufficient Storage",
        _ => "",
    }
}

/// Escapes text for HTML content and attribute values.
fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&#39;"),
            _ => escaped.push(c),
        }
    }
    escaped
}

/// Escaped text with each `` `span` `` set in `<code>`, as the explanations write names.
fn with_code_spans(text: &str) -> String {
    text.split('`')
        .enumerate()
        .map(|(i, part)| {
            if i % 2 == 1 {
                format!("<code>{}</code>", escape(part))
            } else {
                escape(part)
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_of_the_catalogue_has_a_reason_phrase() {
        for kind in ProblemType::ALL {
            assert!(!reason_phrase(kind.status()).is_empty(), "{kind:?}");
        }
    }

    #[test]
    fn text_is_escaped_and_code_spans_are_marked() {
        assert_eq!(
            escape("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
        assert_eq!(
            with_code_spans("use `a<b>` & `c`"),
            "use <code>a&lt;b&gt;</code> &amp; <code>c</code>"
        );
    }

    #[test]
    fn unknown_paths_have_no_page() {
        assert_eq!(error_type_page("record/404-missing"), None);
        assert_eq!(error_type_page(""), None);
        assert_eq!(error_type_page("/record/404-not-found"), None);
    }
}
