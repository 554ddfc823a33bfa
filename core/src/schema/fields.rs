//! What a schema lets a record hold at a path of its content, and which of
//! those paths a filter can match: filters see links and tags only, the
//! values the link index holds (PROTOCOL.md §7). A filter on a string field
//! can never match, so the list endpoints refuse it with these answers
//! rather than answer "no records".

use std::collections::BTreeSet;
use std::fmt;

use super::tree::{Node, NodeId, Property, RecordTypeRef, Schema, StringRules};
use crate::model::LinkPath;

/// The prefix of every content path.
const CONTENT: &str = "$['content']";

/// The most paths [`Schema::filterable_paths`] lists: a person picks from
/// them, and a recursive schema has no end of them.
pub const MAX_FILTERABLE_PATHS: usize = 64;

/// What a schema lets a record hold at one place of its content.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum FieldKind {
    /// An entity link.
    EntityLink,
    /// A record link.
    RecordLink,
    /// A version link.
    VersionLink,
    /// A tag link, or a blob link's `type` or `name` (indexed as tags).
    TagLink,
    /// A blob link.
    BlobLink,
    /// A string.
    String,
    /// An integer.
    Int,
    /// A number.
    Number,
    /// A boolean.
    Boolean,
    /// `null`.
    Null,
    /// An object with named properties.
    Object,
    /// An array.
    Array,
    /// A map (its keys are data).
    Map,
}

/// A top-level content field as a form asks for it
/// ([`Schema::form_fields`]).
#[derive(Debug, Clone, PartialEq)]
pub struct FormField {
    /// The property's name.
    pub name: String,
    /// Whether a record may leave it out.
    pub optional: bool,
    /// What the form asks for.
    pub input: FormInput,
}

/// What a form field asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum FormInput {
    /// A string.
    Text(TextRules),
    /// A tag link: a string the link index holds.
    Tag(TextRules),
    /// An integer.
    Integer {
        /// The smallest allowed.
        min: Option<i64>,
        /// The largest allowed.
        max: Option<i64>,
        /// The only values allowed.
        choices: Option<Vec<i64>>,
    },
    /// A number.
    Number {
        /// The smallest allowed.
        min: Option<f64>,
        /// The largest allowed.
        max: Option<f64>,
    },
    /// A boolean.
    Boolean,
    /// An entity link: the entity's name.
    Entity,
    /// A record link to records of these types: one of them, picked.
    Record {
        /// The types its record may have.
        types: Vec<RecordTypeRef>,
    },
    /// A list of strings or tags: one a line.
    Lines {
        /// Each item's rules.
        item: TextRules,
        /// Whether the items are tags.
        tags: bool,
    },
    /// Anything else, as its JSON.
    Json,
}

/// A string field's rules, as a form shows them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextRules {
    /// The fewest characters.
    pub min_length: Option<u64>,
    /// The most characters.
    pub max_length: Option<u64>,
    /// The only values allowed.
    pub choices: Option<Vec<String>>,
}

impl FieldKind {
    /// Whether the link index holds what a record has here, so that a
    /// filter can match it.
    pub fn is_filterable(self) -> bool {
        matches!(
            self,
            FieldKind::EntityLink
                | FieldKind::RecordLink
                | FieldKind::VersionLink
                | FieldKind::TagLink
                | FieldKind::BlobLink
        )
    }

    /// What a filter value for this kind looks like, for a person writing one.
    pub fn value_form(self) -> Option<&'static str> {
        Some(match self {
            FieldKind::EntityLink => "<entity>",
            FieldKind::RecordLink => "<entity>+<record_id>",
            FieldKind::VersionLink => "<entity>+<record_id>+<version_hash>",
            FieldKind::TagLink => "\"<tag>\"",
            // A blob link is matched only by `=` with no value (no blob there).
            _ => return None,
        })
    }
}

impl fmt::Display for FieldKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FieldKind::EntityLink => "an entity link",
            FieldKind::RecordLink => "a record link",
            FieldKind::VersionLink => "a version link",
            FieldKind::TagLink => "a tag",
            FieldKind::BlobLink => "a blob link",
            FieldKind::String => "a string",
            FieldKind::Int => "an integer",
            FieldKind::Number => "a number",
            FieldKind::Boolean => "a boolean",
            FieldKind::Null => "null",
            FieldKind::Object => "an object",
            FieldKind::Array => "an array",
            FieldKind::Map => "a map",
        })
    }
}

/// A path of a type's content that a filter can match, and what is there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterablePath {
    /// The path in bracket form, from `$['content']`.
    pub path: LinkPath,
    /// The link or tag the schema puts there.
    pub kind: FieldKind,
}

/// One step of a content path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step<'p> {
    /// `['name']`: an object's property.
    Name(&'p str),
    /// `[*]`: each item of an array, each value of a map.
    Each,
}

/// The steps of `path` from `$`, or `None` for a path outside the content.
/// A schema describes the whole record; its `content` property, the content.
fn content_steps(path: &LinkPath) -> Option<Vec<Step<'_>>> {
    let mut rest = path.as_str();
    if !rest.starts_with(CONTENT) {
        return None;
    }
    rest = &rest[1..];
    let mut steps = Vec::new();
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("[*]") {
            steps.push(Step::Each);
            rest = after;
        } else {
            // A `LinkPath` is `['name']` and `[*]` segments, names without `']`.
            let inner = rest.strip_prefix("['")?;
            let end = inner.find("']")?;
            steps.push(Step::Name(&inner[..end]));
            rest = &inner[end + 2..];
        }
    }
    Some(steps)
}

impl Schema {
    /// Every kind of value the schema lets a record hold at `path`, a path
    /// of the content (`$['content']…`, with `[*]` for array items and map
    /// values). Empty when the schema declares nothing there, or the path
    /// is not in the content.
    pub fn kinds_at(&self, path: &LinkPath) -> BTreeSet<FieldKind> {
        let mut kinds = BTreeSet::new();
        let Some(steps) = content_steps(path) else {
            return kinds;
        };
        let mut here: BTreeSet<NodeId> = self.concrete(self.root).into_iter().collect();
        for (index, step) in steps.iter().enumerate() {
            let last = index + 1 == steps.len();
            let mut next = BTreeSet::new();
            for &node in &here {
                match (self.node(node), step) {
                    (Node::Object { properties, .. }, Step::Name(name)) => {
                        let declared = properties.iter().find(|p| &*p.name == *name && !p.removed);
                        if let Some(property) = declared {
                            next.extend(self.concrete(property.node));
                        }
                    }
                    (Node::Array { items, .. }, Step::Each) => next.extend(self.concrete(*items)),
                    (Node::Map { values }, Step::Each) => next.extend(self.concrete(*values)),
                    // A blob link's media type and file name are indexed as tags.
                    (Node::BlobLink { .. }, Step::Name("type" | "name")) if last => {
                        kinds.insert(FieldKind::TagLink);
                    }
                    _ => {}
                }
            }
            here = next;
        }
        kinds.extend(here.into_iter().filter_map(|node| self.kind(node)));
        kinds
    }

    /// The paths of the content a filter can match, in the schema's order,
    /// at most [`MAX_FILTERABLE_PATHS`]; a recursive schema's are listed
    /// down to its first recursion.
    pub fn filterable_paths(&self) -> Vec<FilterablePath> {
        let mut found = Vec::new();
        let mut within = Vec::new();
        for content in self.content_nodes() {
            self.collect_filterable(content, CONTENT.to_owned(), &mut within, &mut found);
        }
        found
    }

    fn collect_filterable(
        &self,
        node: NodeId,
        path: String,
        within: &mut Vec<NodeId>,
        found: &mut Vec<FilterablePath>,
    ) {
        for node in self.concrete(node) {
            if found.len() >= MAX_FILTERABLE_PATHS || within.contains(&node) {
                continue;
            }
            let mut push = |path: String, kind| {
                let entry = FilterablePath {
                    path: LinkPath::from_walk(path),
                    kind,
                };
                if found.len() < MAX_FILTERABLE_PATHS && !found.contains(&entry) {
                    found.push(entry);
                }
            };
            within.push(node);
            match self.node(node) {
                Node::Object { properties, .. } => {
                    for property in properties.iter().filter(|p| !p.removed) {
                        let path = format!("{path}['{}']", property.name);
                        self.collect_filterable(property.node, path, within, found);
                    }
                }
                Node::Array { items: inner, .. } | Node::Map { values: inner } => {
                    self.collect_filterable(*inner, format!("{path}[*]"), within, found);
                }
                Node::BlobLink { .. } => {
                    push(path.clone(), FieldKind::BlobLink);
                    push(format!("{path}['type']"), FieldKind::TagLink);
                    push(format!("{path}['name']"), FieldKind::TagLink);
                }
                _ => {
                    if let Some(kind) = self.kind(node).filter(|kind| kind.is_filterable()) {
                        push(path.clone(), kind);
                    }
                }
            }
            within.pop();
        }
    }

    /// The schema nodes of the record's `content` property: a schema
    /// describes the whole record.
    fn content_nodes(&self) -> Vec<NodeId> {
        let mut nodes = Vec::new();
        for root in self.concrete(self.root) {
            if let Node::Object { properties, .. } = self.node(root) {
                let content = properties
                    .iter()
                    .filter(|p| &*p.name == "content" && !p.removed);
                nodes.extend(content.map(|property| property.node));
            }
        }
        nodes
    }

    /// The content's top-level properties (not removed), in the schema's
    /// order, the first of each name.
    fn content_properties(&self) -> Vec<&Property> {
        let mut found: Vec<&Property> = Vec::new();
        for content in self.content_nodes() {
            for node in self.concrete(content) {
                if let Node::Object { properties, .. } = self.node(node) {
                    for property in properties.iter().filter(|p| !p.removed) {
                        if !found.iter().any(|known| known.name == property.name) {
                            found.push(property);
                        }
                    }
                }
            }
        }
        found
    }

    /// The names of the content's top-level fields, in the schema's order:
    /// what tells two types of one name apart for a person.
    pub fn content_fields(&self) -> Vec<&str> {
        self.content_properties()
            .into_iter()
            .map(|property| &*property.name)
            .collect()
    }

    /// The content's top-level fields as a form asks for them, in the
    /// schema's order: a field of one plain kind is an input of its own;
    /// any other (links to records, blobs, arrays, maps, objects, unions)
    /// is its value as JSON.
    pub fn form_fields(&self) -> Vec<FormField> {
        self.content_properties()
            .into_iter()
            .map(|property| {
                let concrete = self.concrete(property.node);
                let input = match concrete.as_slice() {
                    [one] => self.form_input(*one),
                    _ => FormInput::Json,
                };
                FormField {
                    name: property.name.to_string(),
                    optional: property.optional,
                    input,
                }
            })
            .collect()
    }

    fn form_input(&self, id: NodeId) -> FormInput {
        let text = |rules: &StringRules| TextRules {
            min_length: rules.min_length,
            max_length: rules.max_length,
            choices: rules.allowed.clone(),
        };
        match self.node(id) {
            Node::String(rules) => FormInput::Text(text(rules)),
            Node::TagLink { rules } => FormInput::Tag(text(rules)),
            Node::Int { allowed, min, max } => FormInput::Integer {
                min: *min,
                max: *max,
                choices: allowed.clone(),
            },
            Node::Number { min, max, .. } => FormInput::Number {
                min: *min,
                max: *max,
            },
            Node::Boolean { .. } => FormInput::Boolean,
            Node::EntityLink { .. } => FormInput::Entity,
            Node::RecordLink {
                record_types: Some(types),
                ..
            } if !types.is_empty() => FormInput::Record {
                types: types.clone(),
            },
            Node::Array { items, .. } => match self.concrete(*items).as_slice() {
                [one] => match self.node(*one) {
                    Node::String(rules) => FormInput::Lines {
                        item: text(rules),
                        tags: false,
                    },
                    Node::TagLink { rules } => FormInput::Lines {
                        item: text(rules),
                        tags: true,
                    },
                    _ => FormInput::Json,
                },
                _ => FormInput::Json,
            },
            _ => FormInput::Json,
        }
    }

    /// The content's required top-level fields with what the schema puts
    /// in each (the first of several), in the schema's order: what an
    /// example of a new record must hold.
    pub fn required_fields(&self) -> Vec<(&str, FieldKind)> {
        self.content_properties()
            .into_iter()
            .filter(|property| !property.optional)
            .filter_map(|property| {
                let kind = (self.concrete(property.node).into_iter()).find_map(|n| self.kind(n))?;
                Some((&*property.name, kind))
            })
            .collect()
    }

    /// The nodes `id` stands for once refs, unions and intersections are
    /// looked through, in schema order.
    fn concrete(&self, id: NodeId) -> Vec<NodeId> {
        let mut out = Vec::new();
        let mut seen = BTreeSet::new();
        let mut stack = vec![id];
        while let Some(id) = stack.pop() {
            if !seen.insert(id) {
                continue;
            }
            match self.node(id) {
                Node::Ref(target) => stack.push(*target),
                Node::Union { branches, .. } => stack.extend(branches.iter().rev().map(|b| b.node)),
                Node::Intersection { members } => stack.extend(members.iter().rev()),
                Node::Never | Node::Pending => {}
                _ => out.push(id),
            }
        }
        out
    }

    /// The kind of a concrete node.
    fn kind(&self, id: NodeId) -> Option<FieldKind> {
        Some(match self.node(id) {
            Node::Object { .. } => FieldKind::Object,
            Node::Array { .. } => FieldKind::Array,
            Node::Map { .. } => FieldKind::Map,
            Node::Boolean { .. } => FieldKind::Boolean,
            Node::String(_) => FieldKind::String,
            Node::Int { .. } => FieldKind::Int,
            Node::Number { .. } => FieldKind::Number,
            Node::Null => FieldKind::Null,
            Node::TagLink { .. } => FieldKind::TagLink,
            Node::BlobLink { .. } => FieldKind::BlobLink,
            Node::EntityLink { .. } => FieldKind::EntityLink,
            Node::RecordLink { .. } => FieldKind::RecordLink,
            Node::VersionLink { .. } => FieldKind::VersionLink,
            Node::Union { .. }
            | Node::Intersection { .. }
            | Node::Ref(_)
            | Node::Never
            | Node::Pending => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::schema::RecordType;

    /// A type whose records' content follows `content`.
    fn schema(content: serde_json::Value) -> Schema {
        let schema = json!({"type": "object", "properties": {"content": content}});
        RecordType::from_content(&json!({"name": "t", "schema": schema}))
            .expect("the test schema compiles")
            .schema
    }

    fn path(text: &str) -> LinkPath {
        text.parse().expect("a link path")
    }

    fn note() -> Schema {
        schema(json!({
            "type": "object",
            "properties": {
                "title": {"type": "string", "max_length": 200},
                "person": {"type": "entity_link"},
                "label": {"type": "tag_link", "sort_property": true},
                "images": {"type": "array", "items": {"type": "blob_link"}},
                "by_name": {"type": "map", "values": {"type": "record_link"}},
                "either": {"type": "union", "schemas": [{"type": "string"}, {"type": "tag_link"}]},
            },
        }))
    }

    #[test]
    fn kinds_at_follows_properties_arrays_maps_and_unions() {
        let note = note();
        let kinds = |text: &str| note.kinds_at(&path(text)).into_iter().collect::<Vec<_>>();
        assert_eq!(kinds("$['content']['title']"), [FieldKind::String]);
        assert_eq!(kinds("$['content']['person']"), [FieldKind::EntityLink]);
        assert_eq!(kinds("$['content']['label']"), [FieldKind::TagLink]);
        assert_eq!(kinds("$['content']['images']"), [FieldKind::Array]);
        assert_eq!(kinds("$['content']['images'][*]"), [FieldKind::BlobLink]);
        assert_eq!(
            kinds("$['content']['images'][*]['type']"),
            [FieldKind::TagLink]
        );
        assert_eq!(kinds("$['content']['by_name'][*]"), [FieldKind::RecordLink]);
        assert_eq!(
            kinds("$['content']['either']"),
            [FieldKind::TagLink, FieldKind::String]
        );
        assert!(kinds("$['content']['by_name']['x']").is_empty());
        assert!(kinds("$['content']['titel']").is_empty());
        assert!(kinds("$['content']['title']['x']").is_empty());
        assert!(kinds("$['author']").is_empty());
        assert_eq!(kinds("$['content']"), [FieldKind::Object]);
    }

    #[test]
    fn filterable_paths_list_links_and_tags_in_schema_order() {
        let listed: Vec<(String, FieldKind)> = note()
            .filterable_paths()
            .into_iter()
            .map(|p| (p.path.as_str().to_owned(), p.kind))
            .collect();
        let expected = [
            ("$['content']['person']", FieldKind::EntityLink),
            ("$['content']['label']", FieldKind::TagLink),
            ("$['content']['images'][*]", FieldKind::BlobLink),
            ("$['content']['images'][*]['type']", FieldKind::TagLink),
            ("$['content']['images'][*]['name']", FieldKind::TagLink),
            ("$['content']['by_name'][*]", FieldKind::RecordLink),
            ("$['content']['either']", FieldKind::TagLink),
        ];
        let expected: Vec<(String, FieldKind)> =
            expected.iter().map(|(p, k)| (p.to_string(), *k)).collect();
        assert_eq!(listed, expected);
        assert_eq!(
            note().content_fields(),
            ["title", "person", "label", "images", "by_name", "either"]
        );
    }

    #[test]
    fn a_recursive_schema_lists_its_paths_down_to_the_recursion() {
        let tree = schema(json!({
            "type": "object",
            "definitions": {
                "node": {
                    "type": "object",
                    "properties": {
                        "owner": {"type": "entity_link"},
                        "children": {"type": "array", "items": {"type": "ref", "ref": "node"}},
                    },
                },
            },
            "properties": {"root": {"type": "ref", "ref": "node"}},
        }));
        let paths: Vec<String> = tree
            .filterable_paths()
            .into_iter()
            .map(|p| p.path.as_str().to_owned())
            .collect();
        assert_eq!(paths, ["$['content']['root']['owner']"]);
        let deep = path("$['content']['root']['children'][*]['children'][*]['owner']");
        assert_eq!(
            tree.kinds_at(&deep).into_iter().collect::<Vec<_>>(),
            [FieldKind::EntityLink]
        );
    }
}
