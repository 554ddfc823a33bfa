//! Just enough HTML to read the consent page's forms: start tags with their
//! attributes, and the text of the page or of one element. It reads markup
//! a server renders, not arbitrary documents: no tree is built, comments,
//! declarations and end tags are skipped, and `script`/`style` contents are
//! never read as markup.

/// A start tag: its lowercase name and its attributes, values decoded.
#[derive(Debug, Clone)]
pub struct Tag {
    pub name: String,
    attributes: Vec<(String, String)>,
    /// Byte offset just past the tag's `>`.
    end: usize,
}

impl Tag {
    /// The value of an attribute (names are case-insensitive); an attribute
    /// without a value reads as `""`.
    pub fn attribute(&self, name: &str) -> Option<&str> {
        self.attributes
            .iter()
            .find(|(attribute, _)| attribute.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }

    pub fn has(&self, name: &str) -> bool {
        self.attribute(name).is_some()
    }

    /// Whether every `(name, value)` is an attribute of this tag.
    pub fn matches(&self, attributes: &[(&str, &str)]) -> bool {
        attributes
            .iter()
            .all(|(name, value)| self.attribute(name) == Some(*value))
    }

    /// The tag as it would be written, for failure messages.
    pub fn describe(&self) -> String {
        let attributes: Vec<String> = self
            .attributes
            .iter()
            .map(|(name, value)| format!("{name}={value:?}"))
            .collect();
        format!("<{} {}>", self.name, attributes.join(" "))
    }
}

/// A page and its start tags, in document order.
#[derive(Debug, Clone)]
pub struct Document {
    source: String,
    tags: Vec<Tag>,
}

impl Document {
    pub fn parse(source: &str) -> Self {
        Self {
            tags: scan(source),
            source: source.to_string(),
        }
    }

    /// The start tags named `name`.
    pub fn tags<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Tag> {
        self.tags
            .iter()
            .filter(move |tag| tag.name.eq_ignore_ascii_case(name))
    }

    /// The first `name` tag carrying every one of `attributes`.
    pub fn find(&self, name: &str, attributes: &[(&str, &str)]) -> Option<&Tag> {
        self.tags
            .iter()
            .find(|tag| tag.name.eq_ignore_ascii_case(name) && tag.matches(attributes))
    }

    /// The first tag of any name carrying every one of `attributes`.
    pub fn find_any(&self, attributes: &[(&str, &str)]) -> Option<&Tag> {
        self.tags.iter().find(|tag| tag.matches(attributes))
    }

    /// The text of the whole page: tags removed, entities decoded,
    /// whitespace collapsed.
    pub fn text(&self) -> String {
        visible_text(&self.source)
    }

    /// The text inside the element `tag` opens, up to its end tag.
    pub fn text_inside(&self, tag: &Tag) -> String {
        let rest = &self.source[tag.end..];
        let inner = &rest[..closing_tag(rest, &tag.name).unwrap_or(rest.len())];
        visible_text(inner)
    }
}

/// Where the end tag of an element named `name` starts in `rest` (the text
/// after its start tag), counting nested elements of the same name.
fn closing_tag(rest: &str, name: &str) -> Option<usize> {
    let lower = rest.to_ascii_lowercase();
    let open = format!("<{name}");
    let close = format!("</{name}");
    let mut depth = 0usize;
    let mut at = 0;
    while let Some(found) = lower[at..].find('<') {
        let position = at + found;
        let here = &lower[position..];
        let boundary = |prefix: &str| {
            here.starts_with(prefix)
                && here[prefix.len()..]
                    .chars()
                    .next()
                    .is_none_or(|next| !next.is_ascii_alphanumeric() && next != '-')
        };
        if boundary(&close) {
            if depth == 0 {
                return Some(position);
            }
            depth -= 1;
        } else if boundary(&open) {
            depth += 1;
        }
        at = position + 1;
    }
    None
}

/// Every start tag of `source`.
fn scan(source: &str) -> Vec<Tag> {
    let bytes = source.as_bytes();
    let mut tags = Vec::new();
    let mut at = 0;
    while let Some(found) = source[at..].find('<') {
        let start = at + found;
        let rest = &source[start + 1..];
        if rest.starts_with("!--") {
            at = rest
                .find("-->")
                .map_or(source.len(), |end| start + 1 + end + 3);
            continue;
        }
        if rest.starts_with(['!', '?', '/']) {
            at = rest
                .find('>')
                .map_or(source.len(), |end| start + 1 + end + 1);
            continue;
        }
        if !rest.starts_with(|c: char| c.is_ascii_alphabetic()) {
            at = start + 1;
            continue;
        }
        let (tag, end) = start_tag(bytes, start + 1);
        at = end;
        if matches!(tag.name.as_str(), "script" | "style") {
            at = closing_tag(&source[end..], &tag.name).map_or(source.len(), |close| end + close);
        }
        tags.push(tag);
    }
    tags
}

/// Reads the start tag whose name begins at `from`; returns it and the
/// offset past its `>` (or the end of the text).
fn start_tag(bytes: &[u8], from: usize) -> (Tag, usize) {
    let mut at = from;
    while at < bytes.len() && (bytes[at].is_ascii_alphanumeric() || bytes[at] == b'-') {
        at += 1;
    }
    let name = String::from_utf8_lossy(&bytes[from..at]).to_ascii_lowercase();
    let mut attributes = Vec::new();
    loop {
        while at < bytes.len() && (bytes[at].is_ascii_whitespace() || bytes[at] == b'/') {
            at += 1;
        }
        if at >= bytes.len() {
            break;
        }
        if bytes[at] == b'>' {
            at += 1;
            break;
        }
        let name_start = at;
        while at < bytes.len()
            && !bytes[at].is_ascii_whitespace()
            && !matches!(bytes[at], b'=' | b'>' | b'/')
        {
            at += 1;
        }
        let attribute = String::from_utf8_lossy(&bytes[name_start..at]).to_ascii_lowercase();
        while at < bytes.len() && bytes[at].is_ascii_whitespace() {
            at += 1;
        }
        let mut value = String::new();
        if at < bytes.len() && bytes[at] == b'=' {
            at += 1;
            while at < bytes.len() && bytes[at].is_ascii_whitespace() {
                at += 1;
            }
            let value_start;
            let value_end;
            if at < bytes.len() && matches!(bytes[at], b'"' | b'\'') {
                let quote = bytes[at];
                value_start = at + 1;
                at = value_start;
                while at < bytes.len() && bytes[at] != quote {
                    at += 1;
                }
                value_end = at;
                at = (at + 1).min(bytes.len());
            } else {
                value_start = at;
                while at < bytes.len() && !bytes[at].is_ascii_whitespace() && bytes[at] != b'>' {
                    at += 1;
                }
                value_end = at;
            }
            value = decode_entities(&String::from_utf8_lossy(&bytes[value_start..value_end]));
        }
        if !attribute.is_empty() {
            attributes.push((attribute, value));
        }
    }
    (
        Tag {
            name,
            attributes,
            end: at,
        },
        at,
    )
}

/// `markup` without its tags, entities decoded, runs of whitespace as one space.
fn visible_text(markup: &str) -> String {
    let mut text = String::new();
    let mut at = 0;
    while let Some(found) = markup[at..].find('<') {
        text.push_str(&markup[at..at + found]);
        text.push(' ');
        let start = at + found;
        let tag_name: String = markup[start + 1..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect::<String>()
            .to_ascii_lowercase();
        at = markup[start..]
            .find('>')
            .map_or(markup.len(), |end| start + end + 1);
        if matches!(tag_name.as_str(), "script" | "style") {
            at = closing_tag(&markup[at..], &tag_name).map_or(markup.len(), |close| at + close);
        }
    }
    text.push_str(&markup[at..]);
    decode_entities(&text)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// Decodes character references: the named ones a renderer escapes with,
/// and every numeric one. Anything else is left as written.
pub fn decode_entities(text: &str) -> String {
    let mut decoded = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(amp) = rest.find('&') {
        decoded.push_str(&rest[..amp]);
        rest = &rest[amp..];
        let reference = rest
            .find(';')
            .filter(|end| *end <= 10)
            .and_then(|end| Some((character(&rest[1..end])?, end)));
        match reference {
            Some((character, end)) => {
                decoded.push(character);
                rest = &rest[end + 1..];
            }
            None => {
                decoded.push('&');
                rest = &rest[1..];
            }
        }
    }
    decoded.push_str(rest);
    decoded
}

fn character(name: &str) -> Option<char> {
    let number = |digits: &str, radix| u32::from_str_radix(digits, radix).ok();
    let code = match name {
        "amp" => u32::from('&'),
        "lt" => u32::from('<'),
        "gt" => u32::from('>'),
        "quot" => u32::from('"'),
        "apos" => u32::from('\''),
        "nbsp" => 0xA0,
        _ => match name.strip_prefix('#') {
            Some(hex) if hex.starts_with(['x', 'X']) => number(&hex[1..], 16)?,
            Some(decimal) => number(decimal, 10)?,
            None => return None,
        },
    };
    char::from_u32(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = r#"<!doctype html>
<html><head><title>Sign in</title><style>p > b { color: red }</style></head>
<body><!-- <input name="ghost"> -->
<h1>Conformance <em>app</em> &amp; co</h1>
<div role="alert"><div>Wrong</div> password</div>
<form method=post action="/me/auth/ab">
<input type="hidden" name="csrf" value="a&quot;b&#x27;c">
<label for="password">Password</label>
<input id='password' name=password type="password" autocomplete="current-password" required>
<input type="checkbox" name="read" value="localhost 0123" checked/>
<button type="submit" name="action" value="sign_in">Sign in</button>
</form></body></html>"#;

    #[test]
    fn reads_tags_and_decoded_attributes() {
        let page = Document::parse(PAGE);
        let csrf = page.find("input", &[("name", "csrf")]).expect("csrf input");
        assert_eq!(csrf.attribute("value"), Some("a\"b'c"));
        let password = page.find("input", &[("id", "password")]).expect("password");
        assert_eq!(password.attribute("name"), Some("password"));
        assert!(password.has("required"));
        let checkbox = page.find("input", &[("type", "checkbox")]).expect("box");
        assert_eq!(checkbox.attribute("value"), Some("localhost 0123"));
        assert!(checkbox.has("checked"));
        assert!(page.find("input", &[("name", "ghost")]).is_none());
        let form = page.tags("form").next().expect("form");
        assert_eq!(form.attribute("action"), Some("/me/auth/ab"));
        assert_eq!(form.attribute("method"), Some("post"));
    }

    #[test]
    fn reads_element_and_page_text() {
        let page = Document::parse(PAGE);
        let h1 = page.tags("h1").next().expect("h1");
        assert_eq!(page.text_inside(h1), "Conformance app & co");
        let alert = page.find_any(&[("role", "alert")]).expect("alert");
        assert_eq!(page.text_inside(alert), "Wrong password");
        assert!(page.text().contains("Sign in"));
        assert!(!page.text().contains("color"));
    }

    #[test]
    fn survives_broken_markup() {
        for broken in [
            "<", "<a", "<a b=\"", "<a b='x", "&#xZZ;", "<!--", "</", "&amp",
        ] {
            let page = Document::parse(broken);
            let _ = page.text();
            for tag in page.tags("a") {
                let _ = page.text_inside(tag);
            }
        }
    }
}
