//! Entity names and tags: the two kinds of name a record holds as plain text.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize};
use unicode_normalization::is_nfc;

/// An entity name: 1 to 252 characters from `a-z`, `0-9`, `.` and `-`
/// (PROTOCOL.md §2). An entity is who authors records and who permissions name.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct Entity(String);

/// Why a text is not an [`Entity`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "an entity is 1 to {} characters of a-z, 0-9, '.' and '-'",
    Entity::MAX_LEN
)]
pub struct EntityError;

impl Entity {
    /// The longest entity name, in characters.
    pub const MAX_LEN: usize = 252;

    /// The entity name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for Entity {
    type Err = EntityError;

    fn from_str(text: &str) -> Result<Self, EntityError> {
        let allowed = |b: u8| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'.' | b'-');
        if (1..=Self::MAX_LEN).contains(&text.len()) && text.bytes().all(allowed) {
            Ok(Self(text.to_owned()))
        } else {
            Err(EntityError)
        }
    }
}

/// The name of a user of a server: its `{user}` path segment. One path
/// segment, as it reads once percent-decoded: not empty, without `/`, `?`,
/// `#`, `%` or control characters, so that it needs no escaping in a URL
/// the server builds, and not `.` or `..`, which a browser or proxy would
/// collapse out of a path before it reached the server.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct UserName(String);

/// Why a text is not a [`UserName`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` cannot be a user name: it must be one path segment")]
pub struct UserNameError(pub String);

impl UserName {
    /// The user name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for UserName {
    type Err = UserNameError;

    fn from_str(text: &str) -> Result<Self, UserNameError> {
        let segment = !text.is_empty()
            && !matches!(text, "." | "..")
            && !text.contains(['/', '?', '#', '%'])
            && !text.chars().any(char::is_control);
        match segment {
            true => Ok(Self(text.to_owned())),
            false => Err(UserNameError(text.to_owned())),
        }
    }
}

impl fmt::Display for UserName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A tag: 1 to 100 characters (Unicode code points), in NFC.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct Tag(String);

/// Why a text is not a [`Tag`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TagError {
    /// The tag is empty or longer than [`Tag::MAX_CHARS`] characters.
    #[error("a tag is 1 to {} characters", Tag::MAX_CHARS)]
    Length,
    /// The tag is not in Unicode normalization form C.
    #[error("a tag must be in Unicode normalization form C")]
    NotNfc,
}

impl Tag {
    /// The longest tag, in Unicode code points.
    pub const MAX_CHARS: usize = 100;

    /// The tag.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for Tag {
    type Err = TagError;

    fn from_str(text: &str) -> Result<Self, TagError> {
        if !(1..=Self::MAX_CHARS).contains(&text.chars().count()) {
            return Err(TagError::Length);
        }
        if !is_nfc(text) {
            return Err(TagError::NotNfc);
        }
        Ok(Self(text.to_owned()))
    }
}

/// A blob's media type, as a blob link's `type` gives it and a download's
/// `Content-Type` returns it: `type/subtype` with optional parameters (RFC 9110).
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct MediaType(String);

/// Why a text is not a [`MediaType`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a media type (type/subtype)")]
pub struct MediaTypeError;

impl MediaType {
    /// The media type as the writer gave it, parameters included.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// `type/subtype`, without parameters.
    pub fn essence(&self) -> &str {
        self.0.split(';').next().unwrap_or_default().trim_end()
    }
}

impl FromStr for MediaType {
    type Err = MediaTypeError;

    fn from_str(text: &str) -> Result<Self, MediaTypeError> {
        match mediatype::MediaType::parse(text) {
            Ok(_) => Ok(Self(text.to_owned())),
            Err(_) => Err(MediaTypeError),
        }
    }
}

/// The name a blob is downloaded under: 1 to 255 characters, with no control
/// character, `/` or `\`, so that it fits a path segment and a
/// `Content-Disposition` header as it is.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct FileName(String);

/// Why a text is not a [`FileName`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "a file name is 1 to {} characters, without control characters, '/' or '\\'",
    FileName::MAX_CHARS
)]
pub struct FileNameError;

impl FileName {
    /// The longest file name, in characters.
    pub const MAX_CHARS: usize = 255;

    /// The file name, as the writer gave it.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for FileName {
    type Err = FileNameError;

    fn from_str(text: &str) -> Result<Self, FileNameError> {
        let allowed = |c: char| !c.is_control() && c != '/' && c != '\\';
        if (1..=Self::MAX_CHARS).contains(&text.chars().count()) && text.chars().all(allowed) {
            Ok(Self(text.to_owned()))
        } else {
            Err(FileNameError)
        }
    }
}

macro_rules! text_name_impls {
    ($name:ident) => {
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!(stringify!($name), "({:?})"), self.0)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                super::deserialize_from_str(deserializer)
            }
        }
    };
}

text_name_impls!(Entity);
text_name_impls!(Tag);
text_name_impls!(MediaType);
text_name_impls!(FileName);
