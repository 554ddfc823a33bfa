//! The record model: every value a record holds, as a type that can only hold
//! a valid value, with serde that reads and writes the wire JSON.

pub mod canonical;
pub mod dialect;
pub mod hash;

mod date;
mod ids;
mod links;
mod names;
mod permissions;
mod record;

pub use date::{DateError, MillisForm, RecordDate};
pub use ids::{BlobHash, ClientId, HexIdError, RecordId, VersionHash};
pub use links::{
    BlobLink, EntityLink, Link, LinkKind, LinkPath, LinkPathError, RecordLink, VersionLink,
};
pub use names::{
    Entity, EntityError, FileName, FileNameError, MediaType, MediaTypeError, Tag, TagError,
    UserName, UserNameError,
};
pub use permissions::{Permission, Permissions, ReadPermission};
pub use record::{
    Content, DeletionAction, NoContent, ReceivedRecord, Record, RecordBody, RecordSource,
    RecordSourceError, TombstoneLink, Version,
};

use std::fmt;
use std::marker::PhantomData;
use std::str::FromStr;

use serde::Deserializer;
use serde::de::{Error, Visitor};

/// Deserializes a string through `T::from_str`, borrowing the text when the
/// format allows, so a valid value costs no more than its own allocation.
pub(crate) fn deserialize_from_str<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: FromStr,
    T::Err: fmt::Display,
{
    struct ParseVisitor<T>(PhantomData<T>);

    impl<T: FromStr> Visitor<'_> for ParseVisitor<T>
    where
        T::Err: fmt::Display,
    {
        type Value = T;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a string")
        }

        fn visit_str<E: Error>(self, text: &str) -> Result<T, E> {
            text.parse()
                .map_err(|e| E::custom(format_args!("{text:?}: {e}")))
        }
    }

    deserializer.deserialize_str(ParseVisitor(PhantomData))
}
