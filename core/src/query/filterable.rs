//! Filters that can never match, refused with what can be filtered
//! (PROTOCOL.md §7). A filter sees only what the link index holds: the
//! record's id and source, the envelope's links and the content's links and
//! tags. A condition on anything else (a string field, a misspelt name, a
//! path outside the content) used to answer "no records", which reads as if
//! the data were missing; it is now `request/400-invalid-filter` saying
//! which path, what the type holds there and what can be filtered.
//!
//! Paths outside the content are checked against the envelope's. Paths in
//! the content are checked only when the filter names the records' type at
//! its top level (`$['type']=…`, or a group of such conditions), against
//! every version of each type named: a path any of them can hold a link or
//! tag at passes.

use std::fmt;

use super::eval::{ID_PATH, SOURCE_PATH};
use super::index::{AUTHOR_PATH, TYPE_PATH, VERSION_AUTHOR_PATH};
use super::{Condition, Filter, FilterValue};
use crate::model::{Entity, LinkPath, RecordId, VersionHash};
use crate::schema::{FieldKind, FilterablePath, Schema};

/// The prefix of every content path.
const CONTENT: &str = "$['content']";

/// The paths outside the content a filter can name.
const ENVELOPE_PATHS: [&str; 8] = [
    ID_PATH,
    SOURCE_PATH,
    AUTHOR_PATH,
    VERSION_AUTHOR_PATH,
    TYPE_PATH,
    "$['permissions']['read'][*]",
    "$['permissions']['write'][*]",
    "$['permissions']['notify'][*]",
];

/// The most types a filter's top level names that are looked up to check
/// its content paths; a filter naming more is not checked.
pub const MAX_NAMED_TYPES: usize = 4;

/// A Type record a filter names at its top level.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedType {
    /// The Type record's author.
    pub entity: Entity,
    /// The Type record's id.
    pub record_id: RecordId,
    /// The version named, when the filter names one.
    pub version_hash: Option<VersionHash>,
}

/// A type a filter names, as the store holds it: its name and the schema
/// of each of its versions (the one named, or all).
#[derive(Debug, Clone, Copy)]
pub struct KnownType<'t> {
    /// The type's `name`, as its latest version gives it.
    pub name: &'t str,
    /// The schemas of the versions whose records the filter can match.
    pub schemas: &'t [Schema],
}

/// A condition no record can match, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unfilterable {
    /// The path the condition names.
    pub path: LinkPath,
    /// What is wrong with it.
    pub reason: UnfilterableReason,
}

/// Why a condition can never match.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum UnfilterableReason {
    /// The path is outside the content and is none of the envelope's.
    NotInRecords,
    /// No type named declares anything at this path of the content.
    NotDeclared {
        /// The types named, by name.
        types: Vec<String>,
        /// What can be filtered in the first type named.
        filterable: Vec<FilterablePath>,
    },
    /// The types named hold values there that the link index does not.
    NotALink {
        /// What the types hold there.
        kinds: Vec<FieldKind>,
        /// The types named, by name.
        types: Vec<String>,
        /// What can be filtered in the first type named.
        filterable: Vec<FilterablePath>,
    },
    /// The value is of a kind the types never hold at the path.
    WrongValue {
        /// What the types hold there.
        kinds: Vec<FieldKind>,
    },
}

impl fmt::Display for Unfilterable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = self.path.as_str();
        match &self.reason {
            UnfilterableReason::NotInRecords => write!(
                f,
                "no record has `{path}`: a filter names `$['id']`, `$['source']`, `$['author']`, \
                 `$['version']['author']`, `$['type']`, `$['permissions'][…][*]` or a link or \
                 tag of the content, as `$['content']['…']`"
            ),
            UnfilterableReason::NotDeclared { types, filterable } => {
                write!(f, "type {} has no field `{path}`", names(types))?;
                write_filterable(f, types, filterable)
            }
            UnfilterableReason::NotALink {
                kinds,
                types,
                filterable,
            } => {
                write!(
                    f,
                    "`{path}` is {} in type {}, and filters match only links and tags \
                     (PROTOCOL.md §7)",
                    alternatives(kinds),
                    names(types)
                )?;
                write_filterable(f, types, filterable)
            }
            UnfilterableReason::WrongValue { kinds } => {
                let forms: Vec<&str> = kinds.iter().filter_map(|k| k.value_form()).collect();
                write!(f, "`{path}` is {}", alternatives(kinds))?;
                match forms.as_slice() {
                    [] => write!(f, ": only `{path}=` (no value there) can match it"),
                    forms => write!(f, ": its values are written {}", forms.join(" or ")),
                }
            }
        }
    }
}

/// `` `note` `` or `` `note` or `task` ``.
fn names(types: &[String]) -> String {
    let quoted: Vec<String> = types.iter().map(|name| format!("`{name}`")).collect();
    quoted.join(" or ")
}

/// "a string" or "a string or an integer".
fn alternatives(kinds: &[FieldKind]) -> String {
    let described: Vec<String> = kinds.iter().map(ToString::to_string).collect();
    described.join(" or ")
}

fn write_filterable(
    f: &mut fmt::Formatter<'_>,
    types: &[String],
    filterable: &[FilterablePath],
) -> fmt::Result {
    let first = types.first().map_or("", String::as_str);
    if filterable.is_empty() {
        return write!(f, "; `{first}` has no link or tag to filter on");
    }
    write!(f, "; in `{first}` a filter can name")?;
    for (index, entry) in filterable.iter().enumerate() {
        let separator = if index == 0 { " " } else { ", " };
        write!(f, "{separator}`{}` ({})", entry.path.as_str(), entry.kind)?;
    }
    Ok(())
}

impl Filter {
    /// The types this filter names at its top level, so that every record
    /// it matches is of one of them: a `$['type']=` condition AND-ed with
    /// the rest, or a group of nothing but such conditions. `None` when it
    /// names none, or more than [`MAX_NAMED_TYPES`].
    pub fn named_types(&self) -> Option<Vec<NamedType>> {
        let top: &[Filter] = match self {
            Filter::And(all) => all,
            single => std::slice::from_ref(single),
        };
        let named = top.iter().find_map(|filter| match filter {
            Filter::Condition(condition) => type_condition(condition).map(|named| vec![named]),
            Filter::Or(any) => any
                .iter()
                .map(|filter| match filter {
                    Filter::Condition(condition) => type_condition(condition),
                    _ => None,
                })
                .collect(),
            Filter::And(_) => None,
        })?;
        (named.len() <= MAX_NAMED_TYPES).then_some(named)
    }

    /// Whether some condition names a path of the content.
    pub fn names_content(&self) -> bool {
        match self {
            Filter::And(members) | Filter::Or(members) => members.iter().any(Filter::names_content),
            Filter::Condition(Condition::Equals { path, .. } | Condition::Absent { path }) => {
                path.as_str().starts_with(CONTENT)
            }
            Filter::Condition(Condition::AnyLink(_)) => false,
        }
    }

    /// The first condition no record can match: on a path that is neither
    /// the envelope's nor in the content, or, when `types` holds the types
    /// the filter names ([`Filter::named_types`]), on a content path none of
    /// them holds a link or tag at, or with a value of another kind than
    /// theirs. `types` is empty when they are not all known; the content's
    /// paths are then not checked.
    pub fn unfilterable(&self, types: &[KnownType<'_>]) -> Option<Unfilterable> {
        match self {
            Filter::And(members) | Filter::Or(members) => {
                members.iter().find_map(|member| member.unfilterable(types))
            }
            Filter::Condition(condition) => unfilterable_condition(condition, types),
        }
    }
}

fn type_condition(condition: &Condition) -> Option<NamedType> {
    let Condition::Equals { path, value } = condition else {
        return None;
    };
    if path.as_str() != TYPE_PATH {
        return None;
    }
    match value {
        FilterValue::Record { entity, record_id } => Some(NamedType {
            entity: entity.clone(),
            record_id: *record_id,
            version_hash: None,
        }),
        FilterValue::Version {
            entity,
            record_id,
            version_hash,
        } => Some(NamedType {
            entity: entity.clone(),
            record_id: *record_id,
            version_hash: Some(*version_hash),
        }),
        FilterValue::Entity(_) | FilterValue::Tag(_) => None,
    }
}

fn unfilterable_condition(condition: &Condition, types: &[KnownType<'_>]) -> Option<Unfilterable> {
    let (path, value) = match condition {
        Condition::Equals { path, value } => (path, Some(value)),
        Condition::Absent { path } => (path, None),
        Condition::AnyLink(_) => return None,
    };
    let refuse = |reason| {
        Some(Unfilterable {
            path: path.clone(),
            reason,
        })
    };
    if !path.as_str().starts_with(CONTENT) {
        return match ENVELOPE_PATHS.contains(&path.as_str()) {
            true => None,
            false => refuse(UnfilterableReason::NotInRecords),
        };
    }
    if types.is_empty() {
        return None;
    }
    let mut kinds: Vec<FieldKind> = Vec::new();
    for schema in types.iter().flat_map(|known| known.schemas) {
        for kind in schema.kinds_at(path) {
            if !kinds.contains(&kind) {
                kinds.push(kind);
            }
        }
    }
    kinds.sort();
    let names = || types.iter().map(|t| t.name.to_owned()).collect::<Vec<_>>();
    let filterable = || {
        types
            .first()
            .and_then(|first| first.schemas.last())
            .map(Schema::filterable_paths)
            .unwrap_or_default()
    };
    if kinds.is_empty() {
        return refuse(UnfilterableReason::NotDeclared {
            types: names(),
            filterable: filterable(),
        });
    }
    if !kinds.iter().any(|kind| kind.is_filterable()) {
        return refuse(UnfilterableReason::NotALink {
            kinds,
            types: names(),
            filterable: filterable(),
        });
    }
    match value {
        Some(value) if !kinds.iter().any(|&kind| matches_kind(value, kind)) => {
            refuse(UnfilterableReason::WrongValue { kinds })
        }
        _ => None,
    }
}

/// Whether a value can match what a record holds of `kind`: a record value
/// matches record links and the record part of version links.
fn matches_kind(value: &FilterValue, kind: FieldKind) -> bool {
    matches!(
        (value, kind),
        (FilterValue::Entity(_), FieldKind::EntityLink)
            | (
                FilterValue::Record { .. },
                FieldKind::RecordLink | FieldKind::VersionLink
            )
            | (FilterValue::Version { .. }, FieldKind::VersionLink)
            | (FilterValue::Tag(_), FieldKind::TagLink)
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::query::parse_filter;
    use crate::schema::RecordType;

    const TYPE: &str = "localhost+0123456789abcdef0123456789abcdef";

    fn note() -> Vec<Schema> {
        let content = json!({"name": "note", "schema": {
            "type": "object",
            "properties": {"content": {
                "type": "object",
                "properties": {
                    "title": {"type": "string"},
                    "person": {"type": "entity_link"},
                    "label": {"type": "tag_link"},
                },
            }},
        }});
        vec![RecordType::from_content(&content).expect("compiles").schema]
    }

    fn check(filter: &str, schemas: &[Schema]) -> Option<String> {
        let filter = parse_filter(filter).expect("parses");
        let known = [KnownType {
            name: "note",
            schemas,
        }];
        let types: &[KnownType<'_>] = match filter.named_types() {
            Some(_) if !schemas.is_empty() => &known,
            _ => &[],
        };
        filter.unfilterable(types).map(|u| u.to_string())
    }

    #[test]
    fn a_string_field_of_the_named_type_is_refused_with_what_can_be_filtered() {
        let refused = check(
            &format!("$['type']={TYPE},$['content']['title']=\"pinned thing\""),
            &note(),
        )
        .expect("refused");
        assert_eq!(
            refused,
            "`$['content']['title']` is a string in type `note`, and filters match only links \
             and tags (PROTOCOL.md §7); in `note` a filter can name \
             `$['content']['person']` (an entity link), `$['content']['label']` (a tag)"
        );
    }

    #[test]
    fn links_and_tags_of_the_named_type_pass_and_values_must_fit() {
        let note = note();
        assert_eq!(
            check(
                &format!("$['type']={TYPE},$['content']['label']=\"x\""),
                &note
            ),
            None
        );
        assert_eq!(
            check(&format!("$['type']={TYPE},$['content']['person']="), &note),
            None
        );
        let wrong = check(
            &format!("$['type']={TYPE},$['content']['person']=\"bob\""),
            &note,
        );
        assert_eq!(
            wrong.as_deref(),
            Some("`$['content']['person']` is an entity link: its values are written <entity>")
        );
        let misspelt = check(
            &format!("$['type']={TYPE},$['content']['lable']=\"x\""),
            &note,
        );
        assert!(
            misspelt
                .as_deref()
                .is_some_and(|m| m.starts_with("type `note` has no field `$['content']['lable']`")),
            "{misspelt:?}"
        );
    }

    #[test]
    fn content_paths_pass_when_no_type_is_named_or_known() {
        assert_eq!(check("$['content']['title']=\"x\"", &note()), None);
        assert_eq!(
            check(
                &format!("$['type']={TYPE},$['content']['title']=\"x\""),
                &[]
            ),
            None
        );
        // A type named in one branch of an OR does not name the records' type.
        assert_eq!(
            check(
                &format!("($['type']={TYPE},$['content']['title']=\"x\")"),
                &note()
            ),
            None
        );
    }

    #[test]
    fn a_group_of_type_conditions_names_its_types() {
        let filter = parse_filter(&format!(
            "($['type']={TYPE},$['type']={TYPE}),$['content']['x']=\"y\""
        ))
        .expect("parses");
        assert_eq!(filter.named_types().map(|types| types.len()), Some(2));
    }

    #[test]
    fn a_field_written_without_its_path_or_in_single_quotes_is_named() {
        use crate::query::FilterFault;
        let bare = parse_filter("title = 'pinned'").expect_err("refused");
        assert_eq!(
            (bare.position, bare.fault),
            (0, FilterFault::NameWithoutPath)
        );
        let quoted = parse_filter("$['content']['title']='pinned'").expect_err("refused");
        assert_eq!(
            (quoted.position, quoted.fault),
            (22, FilterFault::SingleQuoted)
        );
    }

    #[test]
    fn a_path_outside_the_content_and_envelope_is_refused_without_a_type() {
        let refused = check("$['title']=\"x\"", &[]).expect("refused");
        assert!(
            refused.starts_with("no record has `$['title']`"),
            "{refused}"
        );
        for path in ENVELOPE_PATHS {
            assert_eq!(check(&format!("{path}="), &[]), None, "{path}");
        }
    }
}
