//! A browser's part in the consent flow (PROTOCOL.md §10), over plain HTTP
//! forms: the session cookie kept by hand, redirects never followed (the
//! checks assert each `303`), form fields read from the served page.

use url::Url;
use url::form_urlencoded::Serializer;

use crate::client::{Call, Http, Response};
use crate::expect::ensure;
use crate::html::Document;

/// The consent page's session cookie.
pub const SESSION_COOKIE: &str = "__Host-folio_session";

/// One `Set-Cookie` header.
#[derive(Debug, Clone)]
pub struct SetCookie {
    pub name: String,
    pub value: String,
    /// Attribute names lowercase, values as sent.
    attributes: Vec<(String, Option<String>)>,
}

impl SetCookie {
    pub fn parse(header: &str) -> Option<Self> {
        let mut parts = header.split(';');
        let (name, value) = parts.next()?.split_once('=')?;
        let attributes = parts
            .map(|part| match part.split_once('=') {
                Some((name, value)) => (
                    name.trim().to_ascii_lowercase(),
                    Some(value.trim().to_string()),
                ),
                None => (part.trim().to_ascii_lowercase(), None),
            })
            .collect();
        Some(Self {
            name: name.trim().to_string(),
            value: value.trim().trim_matches('"').to_string(),
            attributes,
        })
    }

    /// Whether the attribute is present (`Secure`, `HttpOnly`).
    pub fn flag(&self, name: &str) -> bool {
        self.attributes
            .iter()
            .any(|(attribute, _)| attribute.eq_ignore_ascii_case(name))
    }

    /// The value of an attribute (`SameSite`, `Path`).
    pub fn attribute(&self, name: &str) -> Option<&str> {
        self.attributes
            .iter()
            .find(|(attribute, _)| attribute.eq_ignore_ascii_case(name))
            .and_then(|(_, value)| value.as_deref())
    }

    /// Whether this header removes the cookie rather than setting it.
    fn clears(&self) -> bool {
        self.value.is_empty()
            || self
                .attribute("max-age")
                .and_then(|age| age.parse::<i64>().ok())
                .is_some_and(|age| age <= 0)
    }
}

/// The response's `Set-Cookie` headers for the session cookie.
pub fn session_cookies(response: &Response) -> Vec<SetCookie> {
    response
        .headers
        .get_all(reqwest::header::SET_COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .filter_map(SetCookie::parse)
        .filter(|cookie| cookie.name == SESSION_COOKIE)
        .collect()
}

/// Fails unless `cookie` carries the attributes PROTOCOL.md §10's session
/// needs: `Secure; HttpOnly; SameSite=Lax; Path=/`, and no `Domain` (which
/// the `__Host-` prefix forbids).
pub fn ensure_session_attributes(cookie: &SetCookie) -> Result<(), String> {
    ensure!(cookie.flag("secure"), "the session cookie is not Secure");
    ensure!(
        cookie.flag("httponly"),
        "the session cookie is not HttpOnly"
    );
    ensure!(
        cookie
            .attribute("samesite")
            .is_some_and(|value| value.eq_ignore_ascii_case("lax")),
        "the session cookie's SameSite is {:?}, not Lax",
        cookie.attribute("samesite")
    );
    ensure!(
        cookie.attribute("path") == Some("/"),
        "the session cookie's Path is {:?}, not /",
        cookie.attribute("path")
    );
    ensure!(
        !cookie.flag("domain"),
        "the session cookie has a Domain: {:?}",
        cookie.attribute("domain")
    );
    Ok(())
}

/// The response in brief for a failure message: an HTML page's text rather
/// than its markup.
pub fn summary(response: &Response) -> String {
    let is_html = response
        .header("content-type")
        .is_some_and(|content_type| content_type.starts_with("text/html"));
    if !is_html {
        return response.excerpt();
    }
    let text = Document::parse(&String::from_utf8_lossy(&response.body)).text();
    let mut summary: String = text.chars().take(300).collect();
    if summary.len() < text.len() {
        summary.push('…');
    }
    format!("HTML page: {summary}")
}

/// Fails unless the response has exactly this status.
pub fn ensure_status(response: &Response, expected: u16) -> Result<(), String> {
    ensure!(
        response.status == expected,
        "expected status {expected}, got {}: {}",
        response.status,
        summary(response)
    );
    Ok(())
}

/// A response that must be an HTML page with this status; returns the page.
pub fn html(response: &Response, status: u16) -> Result<Document, String> {
    ensure_status(response, status)?;
    let content_type = response.header("content-type").unwrap_or_default();
    ensure!(
        content_type.starts_with("text/html"),
        "expected Content-Type text/html, got {content_type:?}"
    );
    let text = String::from_utf8(response.body.clone())
        .map_err(|_| "the HTML page is not UTF-8".to_string())?;
    Ok(Document::parse(&text))
}

/// The `csrf` hidden field of a page's form.
pub fn csrf(page: &Document) -> Result<String, String> {
    let input = page
        .find("input", &[("name", "csrf")])
        .ok_or("the page has no input named csrf")?;
    ensure!(
        input.attribute("type") == Some("hidden"),
        "the csrf input is not hidden: {}",
        input.describe()
    );
    let value = input.attribute("value").unwrap_or_default();
    ensure!(!value.is_empty(), "the csrf input has no value");
    Ok(value.to_string())
}

/// A `303` whose `Location`, resolved against `request`, is returned.
pub fn see_other(response: &Response, request: &Url) -> Result<Url, String> {
    ensure_status(response, 303)?;
    let location = response
        .header("location")
        .ok_or("303 without a Location")?;
    request
        .join(location)
        .map_err(|error| format!("Location {location:?}: {error}"))
}

/// One browser: its session cookie, and the HTTP client it sends with.
pub struct Browser<'a> {
    http: &'a Http,
    /// What a browser sends as `Origin` on a form post: the page's origin.
    origin: String,
    session: Option<String>,
}

impl<'a> Browser<'a> {
    pub fn new(http: &'a Http, base: &Url) -> Self {
        Self {
            http,
            origin: base.origin().ascii_serialization(),
            session: None,
        }
    }

    /// The session cookie's value, if the browser holds one.
    pub fn session(&self) -> Option<&str> {
        self.session.as_deref()
    }

    /// Holds `session` as its cookie from now on (to mix sessions up on purpose).
    pub fn use_session(&mut self, session: Option<String>) {
        self.session = session;
    }

    pub async fn get(&mut self, url: &Url) -> Result<Response, String> {
        self.send(Call::get(url.clone())).await
    }

    /// POSTs `fields` as `application/x-www-form-urlencoded`, in this order.
    pub async fn post_form(
        &mut self,
        url: &Url,
        fields: &[(&str, &str)],
    ) -> Result<Response, String> {
        let body = Serializer::new(String::new())
            .extend_pairs(fields)
            .finish()
            .into_bytes();
        let call = Call::post(url.clone())
            .body(body, Some("application/x-www-form-urlencoded"))
            .header("origin", &self.origin);
        self.send(call).await
    }

    async fn send(&mut self, mut call: Call<'_>) -> Result<Response, String> {
        if let Some(session) = &self.session {
            call = call.header("cookie", &format!("{SESSION_COOKIE}={session}"));
        }
        let response = self.http.send(&call).await?;
        if let Some(cookie) = session_cookies(&response).pop() {
            self.session = (!cookie.clears()).then_some(cookie.value);
        }
        Ok(response)
    }

    /// Opens the page at `url` (200, HTML) and returns it with its csrf token.
    pub async fn open(&mut self, url: &Url) -> Result<(Document, String), String> {
        let page =
            html(&self.get(url).await?, 200).map_err(|error| format!("GET {url}: {error}"))?;
        let token = csrf(&page).map_err(|error| format!("GET {url}: {error}"))?;
        Ok((page, token))
    }

    /// Signs in on the consent page at `url` with `password`: the page's
    /// form, then a `303` back to the page.
    pub async fn sign_in(&mut self, url: &Url, password: &str) -> Result<(), String> {
        let (_, token) = self.open(url).await?;
        let fields = [
            ("csrf", token.as_str()),
            ("action", "sign_in"),
            ("password", password),
        ];
        let response = self.post_form(url, &fields).await?;
        let location = see_other(&response, url).map_err(|error| format!("signing in: {error}"))?;
        ensure!(
            location == *url,
            "signing in redirected to {location}, not back to {url}"
        );
        Ok(())
    }

    /// Signed in: opens the consent page and posts `action` (`approve` or
    /// `deny`) with these ticked checkboxes (`name`, `value`).
    pub async fn decide(
        &mut self,
        url: &Url,
        action: &str,
        ticked: &[(&str, String)],
    ) -> Result<Response, String> {
        let (_, token) = self.open(url).await?;
        let mut fields = vec![("csrf", token.as_str()), ("action", action)];
        fields.extend(ticked.iter().map(|(name, value)| (*name, value.as_str())));
        self.post_form(url, &fields).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_set_cookie() {
        let cookie = SetCookie::parse(
            "__Host-folio_session=abc=; Secure; HttpOnly; SameSite=Lax; Path=/; Max-Age=1800",
        )
        .expect("a cookie");
        assert_eq!(cookie.name, SESSION_COOKIE);
        assert_eq!(cookie.value, "abc=");
        assert!(cookie.flag("secure") && cookie.flag("HttpOnly"));
        assert_eq!(cookie.attribute("samesite"), Some("Lax"));
        assert!(ensure_session_attributes(&cookie).is_ok());
        assert!(!cookie.clears());
        let cleared = SetCookie::parse("__Host-folio_session=x; Max-Age=0").expect("a cookie");
        assert!(cleared.clears());
        assert!(SetCookie::parse("no equals sign").is_none());
    }
}
