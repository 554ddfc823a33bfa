//! Validating a record against its compiled schema (PROTOCOL.md §6), and
//! finding its links in the same walk.

use std::collections::HashSet;

use serde::Deserialize;
use serde_json::{Number, Value};
use unicode_normalization::is_nfc;

use super::links::{BlobCheck, FoundLink, RecordCheck, StoreChecks, Validated, VersionCheck};
use super::path::JsonPath;
use super::tree::{MAX_SAFE_INTEGER, Node, NodeId, Property, RecordTypeRef, Schema, StringRules};
use super::violation::{Rule, Violation};
use crate::model::canonical::to_canonical_json;
use crate::model::{
    BlobLink, Entity, EntityLink, Link, LinkPath, Permissions, ReadPermission, Record, RecordBody,
    RecordLink, Tag, VersionLink,
};
use crate::query::record_text;

/// The deepest a record's values may nest below the record itself.
pub const MAX_VALUE_DEPTH: usize = 64;

/// How many schema nodes one validation may visit. Unions retry a value
/// against each branch, so a hostile schema could otherwise take time
/// exponential in the value's depth.
pub const MAX_VALIDATION_STEPS: usize = 100_000;

impl Schema {
    /// Validates a record against this schema and finds its links.
    ///
    /// A live record is checked by the rules of PROTOCOL.md §6; a tombstone
    /// has nothing to validate and yields its envelope and `no_content` links.
    pub fn validate(&self, record: &Record) -> Result<Validated, Violation> {
        let Node::Object { properties, .. } = self.node(self.root) else {
            // Compilation only accepts an object at the root.
            return Ok(Validated::default());
        };
        // The envelope fields the schema names, as JSON (content is already JSON).
        let fields: Vec<Option<Value>> = properties
            .iter()
            .map(|p| envelope_field(record, &p.name))
            .collect();

        let mut walk = Walk::new(self, &record.author.entity, &record.permissions);
        walk.envelope_links(record);
        match &record.body {
            RecordBody::Live(content) => {
                for (property, field) in properties.iter().zip(&fields) {
                    let value = match &*property.name {
                        "content" => Some(content.as_value()),
                        _ => field.as_ref(),
                    };
                    let in_content = &*property.name == "content";
                    walk.property(property, value.map(|v| (&*property.name, v)), in_content, 0)?;
                }
                let names_content = properties.iter().any(|p| &*p.name == "content");
                if !names_content && !content.as_map().is_empty() {
                    return Err(Violation {
                        path: "$['content']".into(),
                        rule: Rule::ContentNotEmpty,
                    });
                }
            }
            RecordBody::Tombstone(no_content) => {
                for link in &no_content.links {
                    walk.found(
                        link.path.as_str(),
                        link.link.clone(),
                        true,
                        false,
                        Constraint::None,
                    );
                }
            }
        }
        Ok(walk.finish())
    }
}

/// The JSON of an envelope field a record schema may name.
fn envelope_field(record: &Record, name: &str) -> Option<Value> {
    let value = match name {
        "author" => serde_json::to_value(&record.author),
        "id" => serde_json::to_value(record.id),
        "source" => serde_json::to_value(record.source),
        "created_at" => serde_json::to_value(record.created_at),
        "received_at" => serde_json::to_value(record.received_at?),
        "version" => serde_json::to_value(&record.version),
        "permissions" => serde_json::to_value(&record.permissions),
        "type" => serde_json::to_value(&record.type_link),
        _ => return None,
    };
    value.ok()
}

/// The keys the schemas applied to one object value declare.
#[derive(Default)]
struct Keys<'a> {
    /// The property lists of the object schemas that applied: most values
    /// have one, which needs no allocation.
    first: Option<&'a [Property]>,
    more: Vec<&'a [Property]>,
    /// A map, or a link whose shape its own type checks: any key goes.
    any: bool,
    /// An applied object schema said `"strict": true`.
    strict: bool,
}

impl<'a> Keys<'a> {
    fn any() -> Self {
        Keys {
            any: true,
            ..Keys::default()
        }
    }

    fn object(properties: &'a [Property], strict: bool) -> Self {
        Keys {
            first: Some(properties),
            strict,
            ..Keys::default()
        }
    }

    fn merge(&mut self, other: Keys<'a>) {
        for properties in other.first.into_iter().chain(other.more) {
            match self.first {
                None => self.first = Some(properties),
                Some(_) => self.more.push(properties),
            }
        }
        self.any |= other.any;
        self.strict |= other.strict;
    }

    fn declares(&self, key: &str) -> bool {
        let mut applied = self.first.into_iter().chain(self.more.iter().copied());
        self.any || applied.any(|properties| properties.iter().any(|p| &*p.name == key))
    }
}

/// What a found link must also satisfy in the store.
#[derive(Clone, Copy)]
enum Constraint<'a> {
    None,
    RecordTypes(Option<&'a [RecordTypeRef]>),
    MaxSize(Option<u64>),
}

struct Found<'a> {
    path: String,
    link: Link,
    in_content: bool,
    existential: bool,
    constraint: Constraint<'a>,
}

struct Walk<'a> {
    schema: &'a Schema,
    author: &'a Entity,
    permissions: &'a Permissions,
    steps: usize,
    /// Where the walk is, with real indices and keys, for violations.
    path: JsonPath<'a>,
    /// Where the walk is, with `[*]` for indices and map keys, for links.
    link_path: String,
    /// The length of `link_path` before each value entered.
    link_marks: Vec<usize>,
    found: Vec<Found<'a>>,
    /// The content's strings and tags: the text a search finds it by.
    texts: Vec<&'a str>,
}

impl<'a> Walk<'a> {
    fn new(schema: &'a Schema, author: &'a Entity, permissions: &'a Permissions) -> Self {
        Walk {
            schema,
            author,
            permissions,
            steps: 0,
            path: JsonPath::root(),
            link_path: String::from("$"),
            link_marks: Vec::new(),
            found: Vec::new(),
            texts: Vec::new(),
        }
    }

    fn violation(&self, rule: Rule) -> Violation {
        Violation {
            path: self.path.to_string(),
            rule,
        }
    }

    fn found(
        &mut self,
        path: &str,
        link: Link,
        in_content: bool,
        existential: bool,
        constraint: Constraint<'a>,
    ) {
        self.found.push(Found {
            path: path.to_owned(),
            link,
            in_content,
            existential,
            constraint,
        });
    }

    /// The links every record has, whatever its type: author, version author,
    /// type, and the entities its permissions name.
    fn envelope_links(&mut self, record: &Record) {
        let entity = |link: &EntityLink| Link::Entity(link.clone());
        self.found(
            "$['author']",
            entity(&record.author),
            false,
            false,
            Constraint::None,
        );
        self.found(
            "$['version']['author']",
            entity(&record.version.author),
            false,
            false,
            Constraint::None,
        );
        let type_link = Link::Version(record.type_link.clone());
        self.found(
            "$['type']",
            type_link,
            false,
            false,
            Constraint::RecordTypes(None),
        );
        let permissions = &record.permissions;
        let read = match &permissions.read {
            Some(ReadPermission::Entities(links)) => links.as_slice(),
            _ => &[],
        };
        let lists = [
            ("$['permissions']['read'][*]", read),
            (
                "$['permissions']['write'][*]",
                permissions.write.as_deref().unwrap_or_default(),
            ),
            (
                "$['permissions']['notify'][*]",
                permissions.notify.as_deref().unwrap_or_default(),
            ),
        ];
        for (path, links) in lists {
            for link in links {
                self.found(path, entity(link), false, false, Constraint::None);
            }
        }
    }

    /// Checks one property of an object: present, absent, or removed.
    fn property(
        &mut self,
        property: &'a Property,
        entry: Option<(&'a str, &'a Value)>,
        in_content: bool,
        depth: usize,
    ) -> Result<(), Violation> {
        match entry {
            Some((key, _)) if property.removed => {
                self.path.push_key(key);
                let violation = self.violation(Rule::RemovedProperty(key.to_owned()));
                self.path.pop();
                Err(violation)
            }
            Some((key, value)) => {
                self.enter_key(key, false, depth)?;
                self.check_child(property.node, value, in_content, depth)
            }
            None if property.optional || property.removed => Ok(()),
            None => Err(self.violation(Rule::MissingProperty(property.name.to_string()))),
        }
    }

    /// Steps into the value at `key` of an object (`map_value`: of a map,
    /// whose keys are data, so links see `[*]`).
    fn enter_key(&mut self, key: &'a str, map_value: bool, depth: usize) -> Result<(), Violation> {
        self.check_depth(depth)?;
        self.path.push_key(key);
        self.link_marks.push(self.link_path.len());
        if map_value {
            self.link_path.push_str("[*]");
        } else {
            self.link_path.push_str("['");
            self.link_path.push_str(key);
            self.link_path.push_str("']");
        }
        Ok(())
    }

    /// Steps into an array item.
    fn enter_index(&mut self, index: usize, depth: usize) -> Result<(), Violation> {
        self.check_depth(depth)?;
        self.path.push_index(index);
        self.link_marks.push(self.link_path.len());
        self.link_path.push_str("[*]");
        Ok(())
    }

    fn check_depth(&self, depth: usize) -> Result<(), Violation> {
        if depth >= MAX_VALUE_DEPTH {
            Err(self.violation(Rule::TooDeep))
        } else {
            Ok(())
        }
    }

    /// Checks the child value just entered, then steps back out of it,
    /// whatever the outcome.
    fn check_child(
        &mut self,
        id: NodeId,
        value: &'a Value,
        in_content: bool,
        depth: usize,
    ) -> Result<(), Violation> {
        let result = self.check_holding(id, value, in_content, depth + 1);
        self.leave();
        result
    }

    /// Steps back out of the last value entered.
    fn leave(&mut self) {
        self.path.pop();
        let mark = self.link_marks.pop().unwrap_or(1);
        self.link_path.truncate(mark);
    }

    /// Checks a value as a whole: its schema, then the closure of its keys.
    /// Objects inside content are closed; others only under a strict schema.
    fn check_holding(
        &mut self,
        id: NodeId,
        value: &'a Value,
        in_content: bool,
        depth: usize,
    ) -> Result<(), Violation> {
        let keys = self.check(id, value, in_content, depth)?;
        if let Value::Object(object) = value
            && !keys.any
            && (in_content || keys.strict)
            && let Some(key) = object.keys().find(|key| !keys.declares(key))
        {
            self.path.push_key(key);
            let violation = self.violation(Rule::UndeclaredProperty(key.clone()));
            self.path.pop();
            return Err(violation);
        }
        Ok(())
    }

    /// Checks `value` against one schema node, without the closure check,
    /// and returns the keys the node declares for it.
    fn check(
        &mut self,
        id: NodeId,
        value: &'a Value,
        in_content: bool,
        depth: usize,
    ) -> Result<Keys<'a>, Violation> {
        self.steps += 1;
        if self.steps > MAX_VALIDATION_STEPS {
            return Err(self.violation(Rule::TooComplex));
        }
        let schema = self.schema;
        let wrong_type = |walk: &Self, expected| walk.violation(Rule::WrongType { expected });
        match schema.node(id) {
            Node::Object { properties, strict } => {
                let object = value
                    .as_object()
                    .ok_or_else(|| wrong_type(self, "an object"))?;
                for property in properties {
                    let entry = entry(object, &property.name);
                    self.property(property, entry, in_content, depth)?;
                }
                Ok(Keys::object(properties, *strict))
            }
            Node::Array {
                items,
                min_items,
                max_items,
                distinct_items,
            } => {
                let array = value
                    .as_array()
                    .ok_or_else(|| wrong_type(self, "an array"))?;
                let count = array.len() as u64;
                if let Some(min) = *min_items
                    && count < min
                {
                    return Err(self.violation(Rule::TooFewItems { min }));
                }
                if let Some(max) = *max_items
                    && count > max
                {
                    return Err(self.violation(Rule::TooManyItems { max }));
                }
                if *distinct_items {
                    let mut seen = HashSet::with_capacity(array.len());
                    if !array
                        .iter()
                        .all(|item| seen.insert(to_canonical_json(item)))
                    {
                        return Err(self.violation(Rule::DuplicateItems));
                    }
                }
                for (index, item) in array.iter().enumerate() {
                    self.enter_index(index, depth)?;
                    self.check_child(*items, item, in_content, depth)?;
                }
                Ok(Keys::default())
            }
            Node::Map { values } => {
                let object = value
                    .as_object()
                    .ok_or_else(|| wrong_type(self, "an object"))?;
                for (key, item) in object {
                    self.enter_key(key, true, depth)?;
                    self.check_child(*values, item, in_content, depth)?;
                }
                Ok(Keys::any())
            }
            Node::Boolean { allowed } => {
                let value = value
                    .as_bool()
                    .ok_or_else(|| wrong_type(self, "a boolean"))?;
                self.allowed(allowed.as_deref(), &value)?;
                Ok(Keys::default())
            }
            Node::String(rules) => {
                let text = value.as_str().ok_or_else(|| wrong_type(self, "a string"))?;
                self.check_string(text, rules)?;
                if in_content {
                    self.texts.push(text);
                }
                Ok(Keys::default())
            }
            Node::Int { allowed, min, max } => {
                let Value::Number(number) = value else {
                    return Err(wrong_type(self, "an integer"));
                };
                let int = safe_integer(number).map_err(|rule| self.violation(rule))?;
                self.allowed(allowed.as_deref(), &int)?;
                self.bounds(int, *min, *max)?;
                Ok(Keys::default())
            }
            Node::Number { allowed, min, max } => {
                let number = value.as_f64().ok_or_else(|| wrong_type(self, "a number"))?;
                self.allowed(allowed.as_deref(), &number)?;
                self.bounds(number, *min, *max)?;
                Ok(Keys::default())
            }
            Node::Null => value
                .as_null()
                .map(|()| Keys::default())
                .ok_or_else(|| wrong_type(self, "null")),
            Node::TagLink { rules, .. } => {
                let text = value.as_str().ok_or_else(|| wrong_type(self, "a tag"))?;
                let tag: Tag = text
                    .parse()
                    .map_err(|e| self.violation(Rule::InvalidLink(format!("{e}"))))?;
                self.check_string(text, rules)?;
                if in_content {
                    self.texts.push(text);
                }
                self.found_here(Link::Tag(tag), in_content, false, Constraint::None);
                Ok(Keys::any())
            }
            Node::BlobLink {
                max_size,
                content_types,
            } => {
                let link: BlobLink = self.link(value)?;
                if let (Some(max), Some(size)) = (*max_size, link.size)
                    && size > max
                {
                    return Err(self.violation(Rule::BlobTooLarge { max }));
                }
                if let Some(types) = content_types
                    && !types
                        .iter()
                        .any(|t| t.essence().eq_ignore_ascii_case(link.media_type.essence()))
                {
                    return Err(
                        self.violation(Rule::ContentTypeNotAllowed(link.media_type.to_string()))
                    );
                }
                self.found_here(
                    Link::Blob(link),
                    in_content,
                    false,
                    Constraint::MaxSize(*max_size),
                );
                Ok(Keys::any())
            }
            Node::EntityLink { min_permissions } => {
                let link: EntityLink = self.link(value)?;
                if let Some(&permission) = min_permissions
                    .iter()
                    .find(|&&p| !self.permissions.grants(self.author, &link.entity, p))
                {
                    let entity = link.entity.clone();
                    return Err(self.violation(Rule::MissingPermission { entity, permission }));
                }
                self.found_here(Link::Entity(link), in_content, false, Constraint::None);
                Ok(Keys::any())
            }
            Node::RecordLink {
                record_types,
                existential,
            } => {
                let link: RecordLink = self.link(value)?;
                let constraint = Constraint::RecordTypes(record_types.as_deref());
                self.found_here(Link::Record(link), in_content, *existential, constraint);
                Ok(Keys::any())
            }
            Node::VersionLink { record_types } => {
                let link: VersionLink = self.link(value)?;
                let constraint = Constraint::RecordTypes(record_types.as_deref());
                self.found_here(Link::Version(link), in_content, false, constraint);
                Ok(Keys::any())
            }
            Node::Union { branches, strict } => {
                let mut passed = Keys::default();
                let mut matches = 0;
                let mut closest: Option<Violation> = None;
                for branch in branches {
                    let mark = (self.found.len(), self.texts.len());
                    let mut result = self.check(branch.node, value, in_content, depth);
                    if *strict
                        && result.is_ok()
                        && let Value::Object(object) = value
                        && let Some(key) = branch
                            .sibling_only_keys
                            .iter()
                            .find(|k| object.contains_key(&***k))
                    {
                        result = Err(self.violation(Rule::SiblingBranchKey(key.to_string())));
                    }
                    match result {
                        Ok(keys) => {
                            passed.merge(keys);
                            matches += 1;
                        }
                        Err(violation) if violation.rule == Rule::TooComplex => {
                            return Err(violation);
                        }
                        Err(violation) => {
                            self.found.truncate(mark.0);
                            self.texts.truncate(mark.1);
                            if closest
                                .as_ref()
                                .is_none_or(|c| violation.path.len() > c.path.len())
                            {
                                closest = Some(violation);
                            }
                        }
                    }
                }
                match (matches, closest) {
                    (0, Some(closest)) => Err(self.violation(Rule::NoBranchMatches {
                        closest: Box::new(closest),
                    })),
                    (0, None) => Err(self.violation(Rule::Never)),
                    (1, _) => Ok(passed),
                    _ if *strict => Err(self.violation(Rule::SeveralBranchesMatch)),
                    _ => Ok(passed),
                }
            }
            Node::Intersection { members } => {
                let mut keys = Keys::default();
                for member in members {
                    keys.merge(self.check(*member, value, in_content, depth)?);
                }
                Ok(keys)
            }
            Node::Ref(target) => self.check(*target, value, in_content, depth),
            Node::Never | Node::Pending => Err(self.violation(Rule::Never)),
        }
    }

    fn link<T: Deserialize<'a>>(&self, value: &'a Value) -> Result<T, Violation> {
        T::deserialize(value).map_err(|e| self.violation(Rule::InvalidLink(e.to_string())))
    }

    fn found_here(
        &mut self,
        link: Link,
        in_content: bool,
        existential: bool,
        constraint: Constraint<'a>,
    ) {
        let path = self.link_path.clone();
        self.found.push(Found {
            path,
            link,
            in_content,
            existential,
            constraint,
        });
    }

    fn allowed<T: PartialEq>(&self, allowed: Option<&[T]>, value: &T) -> Result<(), Violation> {
        match allowed {
            Some(allowed) if !allowed.contains(value) => Err(self.violation(Rule::NotInEnum)),
            _ => Ok(()),
        }
    }

    fn bounds<T: PartialOrd>(
        &self,
        value: T,
        min: Option<T>,
        max: Option<T>,
    ) -> Result<(), Violation> {
        if min.is_some_and(|min| value < min) {
            return Err(self.violation(Rule::BelowMinimum));
        }
        if max.is_some_and(|max| value > max) {
            return Err(self.violation(Rule::AboveMaximum));
        }
        Ok(())
    }

    fn check_string(&self, text: &str, rules: &StringRules) -> Result<(), Violation> {
        if !is_nfc(text) {
            return Err(self.violation(Rule::NotNfc));
        }
        let length = text.chars().count() as u64;
        if let Some(min) = rules.min_length
            && length < min
        {
            return Err(self.violation(Rule::TooShort { min }));
        }
        if let Some(max) = rules.max_length
            && length > max
        {
            return Err(self.violation(Rule::TooLong { max }));
        }
        match &rules.allowed {
            Some(allowed) if !allowed.iter().any(|a| a == text) => {
                Err(self.violation(Rule::NotInEnum))
            }
            _ => Ok(()),
        }
    }

    /// The links, each (path, link) once, with what the store must check.
    fn finish(self) -> Validated {
        let keep = first_occurrences(&self.found);
        let mut validated = Validated {
            links: Vec::with_capacity(self.found.len()),
            checks: StoreChecks::default(),
            // A value two branches of a union both accept is read twice:
            // its words count once.
            search_text: record_text(distinct_texts(&self.texts)),
        };
        for (found, keep) in self.found.into_iter().zip(keep) {
            if !keep {
                continue;
            }
            // The walk builds paths from `$`, `['name']` (names without `'`) and `[*]`.
            let path = LinkPath::from_walk(found.path);
            let checks = &mut validated.checks;
            match (&found.link, found.constraint) {
                (Link::Entity(link), _) => {
                    checks.entities.insert(link.entity.clone());
                }
                (Link::Record(link), constraint) => checks.records.push(RecordCheck {
                    path: path.clone(),
                    link: link.clone(),
                    record_types: record_types(constraint),
                }),
                (Link::Version(link), constraint) => checks.versions.push(VersionCheck {
                    path: path.clone(),
                    link: link.clone(),
                    record_types: record_types(constraint),
                }),
                (Link::Blob(link), constraint) => checks.blobs.push(BlobCheck {
                    path: path.clone(),
                    hash: link.hash,
                    size: link.size,
                    max_size: match constraint {
                        Constraint::MaxSize(max) => max,
                        _ => None,
                    },
                }),
                (Link::Tag(_), _) => {}
            }
            validated.links.push(FoundLink {
                path,
                link: found.link,
                in_content: found.in_content,
                existential: found.existential,
            });
        }
        validated
    }
}

/// Each text once, by address: a union's branches may each have pushed it.
fn distinct_texts<'t>(texts: &[&'t str]) -> Vec<&'t str> {
    let mut seen = HashSet::with_capacity(texts.len());
    texts
        .iter()
        .copied()
        .filter(|text| seen.insert(text.as_ptr()))
        .collect()
}

/// Whether each found link is the first with its (path, link). A record
/// holds a handful of links, where comparing beats hashing; a set takes over
/// for the rare record with many.
fn first_occurrences(found: &[Found<'_>]) -> Vec<bool> {
    const COMPARE_UP_TO: usize = 32;
    fn key<'f>(found: &'f Found<'_>) -> (&'f str, &'f Link) {
        (found.path.as_str(), &found.link)
    }
    if found.len() <= COMPARE_UP_TO {
        (0..found.len())
            .map(|i| {
                !found[..i]
                    .iter()
                    .any(|earlier| key(earlier) == key(&found[i]))
            })
            .collect()
    } else {
        let mut seen = HashSet::with_capacity(found.len());
        found.iter().map(|found| seen.insert(key(found))).collect()
    }
}

fn record_types(constraint: Constraint<'_>) -> Option<Vec<RecordTypeRef>> {
    match constraint {
        Constraint::RecordTypes(types) => types.map(<[RecordTypeRef]>::to_vec),
        _ => None,
    }
}

/// The entry of `object` at `key`. Record objects are small, and a linear
/// scan beats hashing the key for them.
fn entry<'a>(
    object: &'a serde_json::Map<String, Value>,
    key: &str,
) -> Option<(&'a str, &'a Value)> {
    const SCAN_UP_TO: usize = 16;
    if object.len() <= SCAN_UP_TO {
        object
            .iter()
            .find(|(k, _)| k.as_str() == key)
            .map(|(k, v)| (k.as_str(), v))
    } else {
        object.get_key_value(key).map(|(k, v)| (k.as_str(), v))
    }
}

/// An `int`: an integral number within ±(2^53 − 1). `1.0` counts, as it does
/// for the JavaScript clients that write these records.
fn safe_integer(number: &Number) -> Result<i64, Rule> {
    if let Some(int) = number.as_i64() {
        return if int.unsigned_abs() <= MAX_SAFE_INTEGER as u64 {
            Ok(int)
        } else {
            Err(Rule::UnsafeInteger)
        };
    }
    if number.is_u64() {
        return Err(Rule::UnsafeInteger);
    }
    let float = number.as_f64().unwrap_or(f64::NAN);
    if float.fract() != 0.0 {
        Err(Rule::WrongType {
            expected: "an integer",
        })
    } else if float.abs() <= MAX_SAFE_INTEGER as f64 {
        Ok(float as i64)
    } else {
        Err(Rule::UnsafeInteger)
    }
}
