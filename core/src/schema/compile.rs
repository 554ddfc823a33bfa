//! Compiling a schema (spec §2.4, PROTOCOL.md §6) from its JSON into an
//! arena of nodes, once, so validation never looks at schema JSON again.

use std::fmt;

use serde::Deserialize;
use serde_json::{Map, Value};

use super::path::JsonPath;
use super::tree::{
    Branch, MAX_SAFE_INTEGER, Node, NodeId, Property, RecordTypeRef, Schema, StringRules,
};
use crate::model::{Permission, Tag};

/// The deepest a schema may nest, counted in schema objects.
pub const MAX_SCHEMA_DEPTH: usize = 64;

/// Why a schema is invalid, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {fault}")]
pub struct SchemaError {
    /// JSON path of the fault, in bracket form.
    pub path: String,
    /// What is wrong there.
    pub fault: SchemaFault,
}

/// What is wrong with a schema.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SchemaFault {
    /// A schema is not a JSON object.
    NotAnObject,
    /// A schema has no `type`.
    MissingType,
    /// A schema's `type`, named here, is not one this server knows.
    UnknownType(String),
    /// A key, named here, is not a property of the schema's type.
    UnknownProperty(String),
    /// A value is not of the kind described here.
    Expected(&'static str),
    /// A property the schema's type requires, named here, is absent.
    MissingProperty(&'static str),
    /// A union or intersection lists fewer than two schemas.
    TooFewSchemas,
    /// A minimum is above its maximum.
    BoundsReversed,
    /// A `ref` names no enclosing definition; the name is given.
    UnknownDefinition(String),
    /// A ref that reaches itself without descending into the value.
    RefCycle(String),
    /// Schemas nest more than [`MAX_SCHEMA_DEPTH`] levels.
    TooDeep,
    /// The schema of a record is not an `object` schema.
    RootNotObject,
    /// A property name, given here, holds `'`, which a link path cannot quote.
    PropertyName(String),
}

impl fmt::Display for SchemaFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SchemaFault::NotAnObject => f.write_str("a schema is a JSON object"),
            SchemaFault::MissingType => f.write_str("a schema needs a `type`"),
            SchemaFault::UnknownType(kind) => write!(f, "unknown schema type `{kind}`"),
            SchemaFault::UnknownProperty(key) => {
                write!(f, "`{key}` is not a property of this schema type")
            }
            SchemaFault::Expected(what) => write!(f, "expected {what}"),
            SchemaFault::MissingProperty(key) => write!(f, "`{key}` is required"),
            SchemaFault::TooFewSchemas => {
                f.write_str("a union or intersection needs at least 2 schemas")
            }
            SchemaFault::BoundsReversed => f.write_str("the minimum is above the maximum"),
            SchemaFault::UnknownDefinition(name) => {
                write!(f, "no enclosing definition named `{name}`")
            }
            SchemaFault::RefCycle(name) => {
                write!(
                    f,
                    "`{name}` refers to itself without descending into the value"
                )
            }
            SchemaFault::TooDeep => write!(f, "schemas nest at most {MAX_SCHEMA_DEPTH} levels"),
            SchemaFault::RootNotObject => f.write_str("a record schema is an `object` schema"),
            SchemaFault::PropertyName(name) => {
                write!(f, "the property name {name:?} cannot hold `'`")
            }
        }
    }
}

fn first_fault(mut faults: Vec<SchemaError>) -> SchemaError {
    faults.swap_remove(0)
}

/// Properties every schema may carry.
const COMMON_KEYS: &[&str] = &[
    "type",
    "definitions",
    "description",
    "default",
    "optional",
    "removed",
];

/// The properties of each schema type, besides the common ones.
fn kind_keys(kind: &str) -> Option<&'static [&'static str]> {
    Some(match kind {
        "object" => &["properties", "strict"],
        "array" => &["items", "min_items", "max_items", "distinct_items"],
        "boolean" => &["enum"],
        "string" => &["enum", "min_length", "max_length"],
        "int" | "number" => &["enum", "min", "max"],
        "null" | "never" => &[],
        "tag_link" => &["enum", "min_length", "max_length", "sort_property"],
        "blob_link" => &["max_size", "content_types"],
        "entity_link" => &["min_permissions"],
        "record_link" => &["record_types", "existential"],
        "version_link" => &["record_types"],
        "map" => &["values"],
        "union" => &["schemas", "strict"],
        "intersection" => &["schemas"],
        "ref" => &["ref"],
        _ => return None,
    })
}

impl Schema {
    /// Compiles a record schema: its top level must be an `object`. Fault
    /// paths start at `$`.
    pub fn compile(value: &Value) -> Result<Self, SchemaError> {
        Self::compile_at(value, JsonPath::root(), false).map_err(first_fault)
    }

    /// Every fault of a schema, in document order; empty when it is valid.
    /// For people writing types: validation only needs the first.
    pub fn faults(value: &Value) -> Vec<SchemaError> {
        Self::compile_at(value, JsonPath::root(), true)
            .err()
            .unwrap_or_default()
    }

    /// Compiles a record schema found at `path` (for example
    /// `$['content']['schema']` of a Type record), so fault paths start there.
    /// With `every_fault`, a fault in one schema does not stop its siblings
    /// from being checked.
    pub(crate) fn compile_at<'a>(
        value: &'a Value,
        path: JsonPath<'a>,
        every_fault: bool,
    ) -> Result<Self, Vec<SchemaError>> {
        let mut compiler = Compiler {
            nodes: Vec::new(),
            scopes: Vec::new(),
            path,
            refs: Vec::new(),
            every_fault,
            faults: Vec::new(),
        };
        let root = compiler.compile(value, 0);
        let root = match root {
            Ok(root) if compiler.faults.is_empty() => root,
            Ok(_) => return Err(compiler.faults),
            Err(fault) => {
                compiler.faults.push(fault);
                return Err(compiler.faults);
            }
        };
        if !matches!(compiler.nodes[root.0 as usize], Node::Object { .. }) {
            return Err(vec![compiler.error(SchemaFault::RootNotObject)]);
        }
        compiler.reject_ref_cycles().map_err(|fault| vec![fault])?;
        let mut schema = Schema {
            nodes: compiler.nodes,
            root,
        };
        schema.compute_sibling_keys();
        Ok(schema)
    }
}

struct Compiler<'a> {
    nodes: Vec<Node>,
    /// Definitions in scope, innermost last.
    scopes: Vec<Vec<(&'a str, NodeId)>>,
    path: JsonPath<'a>,
    /// Every ref node, with the name it refers to and where it was written.
    refs: Vec<(NodeId, String, String)>,
    /// Record a fault in one schema and go on with its siblings.
    every_fault: bool,
    faults: Vec<SchemaError>,
}

impl<'a> Compiler<'a> {
    fn error(&self, fault: SchemaFault) -> SchemaError {
        SchemaError {
            path: self.path.to_string(),
            fault,
        }
    }

    fn error_at(&mut self, key: &'a str, fault: SchemaFault) -> SchemaError {
        self.path.push_key(key);
        let error = self.error(fault);
        self.path.pop();
        error
    }

    /// Runs `f` with `key` appended to the path, whatever it returns.
    fn within_key<T>(
        &mut self,
        key: &'a str,
        f: impl FnOnce(&mut Self) -> Result<T, SchemaError>,
    ) -> Result<T, SchemaError> {
        self.path.push_key(key);
        let result = f(self);
        self.path.pop();
        result
    }

    fn within_index<T>(
        &mut self,
        index: usize,
        f: impl FnOnce(&mut Self) -> Result<T, SchemaError>,
    ) -> Result<T, SchemaError> {
        self.path.push_index(index);
        let result = f(self);
        self.path.pop();
        result
    }

    /// With `every_fault`, a child's fault is recorded and a placeholder node
    /// stands in for the child, so that its siblings are still checked.
    fn settle(&mut self, result: Result<NodeId, SchemaError>) -> Result<NodeId, SchemaError> {
        match result {
            Err(fault) if self.every_fault => {
                self.faults.push(fault);
                Ok(self.reserve())
            }
            other => other,
        }
    }

    fn reserve(&mut self) -> NodeId {
        self.nodes.push(Node::Pending);
        NodeId((self.nodes.len() - 1) as u32)
    }

    fn compile(&mut self, value: &'a Value, depth: usize) -> Result<NodeId, SchemaError> {
        let id = self.reserve();
        self.compile_into(id, value, depth)?;
        Ok(id)
    }

    /// Compiles the required schema at `key` of `object`.
    fn compile_child(
        &mut self,
        object: &'a Map<String, Value>,
        key: &'static str,
        depth: usize,
    ) -> Result<NodeId, SchemaError> {
        let value = object
            .get(key)
            .ok_or_else(|| self.error(SchemaFault::MissingProperty(key)))?;
        self.within_key(key, |c| c.compile(value, depth + 1))
    }

    fn compile_into(
        &mut self,
        id: NodeId,
        value: &'a Value,
        depth: usize,
    ) -> Result<(), SchemaError> {
        if depth > MAX_SCHEMA_DEPTH {
            return Err(self.error(SchemaFault::TooDeep));
        }
        let object = value
            .as_object()
            .ok_or_else(|| self.error(SchemaFault::NotAnObject))?;
        let kind = match object.get("type") {
            None => return Err(self.error(SchemaFault::MissingType)),
            Some(Value::String(kind)) => kind.as_str(),
            Some(_) => return Err(self.error_at("type", SchemaFault::Expected("a string"))),
        };
        let keys = kind_keys(kind)
            .ok_or_else(|| self.error_at("type", SchemaFault::UnknownType(kind.to_owned())))?;
        if let Some(key) = object
            .keys()
            .find(|k| !COMMON_KEYS.contains(&k.as_str()) && !keys.contains(&k.as_str()))
        {
            return Err(self.error_at(key, SchemaFault::UnknownProperty(key.clone())));
        }
        if object.get("description").is_some_and(|d| !d.is_string()) {
            return Err(self.error_at("description", SchemaFault::Expected("a string")));
        }
        for flag in ["optional", "removed"] {
            self.boolean(object, flag)?;
        }

        let scoped = self.enter_definitions(object, depth);
        let node = scoped.and_then(|_| self.compile_kind(id, kind, object, depth));
        if object.contains_key("definitions") {
            self.scopes.pop();
        }
        self.nodes[id.0 as usize] = node?;
        Ok(())
    }

    /// Reserves a node for every definition, brings them into scope, then
    /// compiles them: so definitions may refer to each other and to themselves.
    /// The caller leaves the scope.
    fn enter_definitions(
        &mut self,
        object: &'a Map<String, Value>,
        depth: usize,
    ) -> Result<(), SchemaError> {
        let Some(definitions) = object.get("definitions") else {
            return Ok(());
        };
        let Some(definitions) = definitions.as_object() else {
            self.scopes.push(Vec::new());
            return Err(self.error_at("definitions", SchemaFault::Expected("an object")));
        };
        let scope: Vec<(&'a str, NodeId)> = definitions
            .keys()
            .map(|name| (name.as_str(), self.reserve()))
            .collect();
        self.scopes.push(scope.clone());
        self.within_key("definitions", |c| {
            for (name, id) in scope {
                let result =
                    c.within_key(name, |c| c.compile_into(id, &definitions[name], depth + 1));
                c.settle(result.map(|()| id))?;
            }
            Ok(())
        })
    }

    fn compile_kind(
        &mut self,
        id: NodeId,
        kind: &str,
        object: &'a Map<String, Value>,
        depth: usize,
    ) -> Result<Node, SchemaError> {
        Ok(match kind {
            "object" => self.object(object, depth)?,
            "array" => {
                let items = self.compile_child(object, "items", depth)?;
                let (min_items, max_items) = self.bounds(object, "min_items", "max_items")?;
                Node::Array {
                    items,
                    min_items,
                    max_items,
                    distinct_items: self.boolean(object, "distinct_items")?,
                }
            }
            "boolean" => Node::Boolean {
                allowed: self.list(object, "enum", "booleans", Value::as_bool)?,
            },
            "string" => Node::String(self.string_rules(object, |s| Some(s.to_owned()))?),
            "int" => {
                let int = |v: &Value| {
                    v.as_i64()
                        .filter(|i| i.unsigned_abs() <= MAX_SAFE_INTEGER as u64)
                };
                let allowed = self.list(object, "enum", "safe integers", int)?;
                let min = self.single(object, "min", "a safe integer", int)?;
                let max = self.single(object, "max", "a safe integer", int)?;
                self.check_order(min, max, "max")?;
                Node::Int { allowed, min, max }
            }
            "number" => {
                let allowed = self.list(object, "enum", "numbers", Value::as_f64)?;
                let min = self.single(object, "min", "a number", Value::as_f64)?;
                let max = self.single(object, "max", "a number", Value::as_f64)?;
                self.check_order(min, max, "max")?;
                Node::Number { allowed, min, max }
            }
            "null" => Node::Null,
            "tag_link" => {
                // Checked, and otherwise unused: Folio sorts on any tag path
                // (PROTOCOL.md §7, an extension).
                self.boolean(object, "sort_property")?;
                Node::TagLink {
                    rules: self.string_rules(object, |s| {
                        s.parse::<Tag>().ok().map(|t| t.as_str().to_owned())
                    })?,
                }
            }
            "blob_link" => Node::BlobLink {
                max_size: self.single(object, "max_size", "a byte count", Value::as_u64)?,
                content_types: self.list(object, "content_types", "media types", |v| {
                    v.as_str()?.parse().ok()
                })?,
            },
            "entity_link" => Node::EntityLink {
                min_permissions: self
                    .list(object, "min_permissions", "permission names", |v| {
                        Permission::deserialize(v).ok()
                    })?
                    .unwrap_or_default(),
            },
            "record_link" => Node::RecordLink {
                record_types: self.record_types(object)?,
                existential: self.boolean(object, "existential")?,
            },
            "version_link" => Node::VersionLink {
                record_types: self.record_types(object)?,
            },
            "map" => Node::Map {
                values: self.compile_child(object, "values", depth)?,
            },
            "union" => {
                let branches = self.schemas(object, depth)?;
                let branches = branches
                    .into_iter()
                    .map(|node| Branch {
                        node,
                        sibling_only_keys: Vec::new(),
                    })
                    .collect();
                Node::Union {
                    branches,
                    strict: self.boolean(object, "strict")?,
                }
            }
            "intersection" => Node::Intersection {
                members: self.schemas(object, depth)?,
            },
            "ref" => {
                let name = match object.get("ref") {
                    Some(Value::String(name)) => name,
                    Some(_) => {
                        return Err(
                            self.error_at("ref", SchemaFault::Expected("a definition name"))
                        );
                    }
                    None => return Err(self.error(SchemaFault::MissingProperty("ref"))),
                };
                let target = self
                    .scopes
                    .iter()
                    .rev()
                    .find_map(|scope| scope.iter().find(|(n, _)| n == name).map(|(_, id)| *id))
                    .ok_or_else(|| {
                        self.error_at("ref", SchemaFault::UnknownDefinition(name.clone()))
                    })?;
                self.refs.push((id, name.clone(), self.path.to_string()));
                Node::Ref(target)
            }
            _ => Node::Never,
        })
    }

    /// The `schemas` of a union or intersection: at least two.
    fn schemas(
        &mut self,
        object: &'a Map<String, Value>,
        depth: usize,
    ) -> Result<Vec<NodeId>, SchemaError> {
        let schemas = object
            .get("schemas")
            .ok_or_else(|| self.error(SchemaFault::MissingProperty("schemas")))?;
        let schemas = schemas.as_array().ok_or_else(|| {
            self.error_at("schemas", SchemaFault::Expected("an array of schemas"))
        })?;
        if schemas.len() < 2 {
            return Err(self.error_at("schemas", SchemaFault::TooFewSchemas));
        }
        self.within_key("schemas", |c| {
            let mut members = Vec::with_capacity(schemas.len());
            for (i, schema) in schemas.iter().enumerate() {
                let member = c.within_index(i, |c| c.compile(schema, depth + 1));
                members.push(c.settle(member)?);
            }
            Ok(members)
        })
    }

    fn object(
        &mut self,
        object: &'a Map<String, Value>,
        depth: usize,
    ) -> Result<Node, SchemaError> {
        let strict = self.boolean(object, "strict")?;
        let properties = object
            .get("properties")
            .ok_or_else(|| self.error(SchemaFault::MissingProperty("properties")))?;
        let properties = properties
            .as_object()
            .ok_or_else(|| self.error_at("properties", SchemaFault::Expected("an object")))?;
        let properties = self.within_key("properties", |c| {
            let mut compiled = Vec::with_capacity(properties.len());
            for (name, schema) in properties {
                if name.is_empty() || name.contains('\'') {
                    return Err(c.error_at(name, SchemaFault::PropertyName(name.clone())));
                }
                let flag = |key| schema.get(key).and_then(Value::as_bool).unwrap_or(false);
                let node = c.within_key(name, |c| c.compile(schema, depth + 1));
                let node = c.settle(node)?;
                compiled.push(Property {
                    name: name.as_str().into(),
                    node,
                    optional: flag("optional"),
                    removed: flag("removed"),
                });
            }
            Ok(compiled)
        })?;
        Ok(Node::Object { properties, strict })
    }

    fn string_rules(
        &mut self,
        object: &'a Map<String, Value>,
        read: impl Fn(&str) -> Option<String>,
    ) -> Result<StringRules, SchemaError> {
        let allowed = self.list(object, "enum", "strings", |v| read(v.as_str()?))?;
        let (min_length, max_length) = self.bounds(object, "min_length", "max_length")?;
        Ok(StringRules {
            allowed,
            min_length,
            max_length,
        })
    }

    fn record_types(
        &mut self,
        object: &'a Map<String, Value>,
    ) -> Result<Option<Vec<RecordTypeRef>>, SchemaError> {
        self.list(object, "record_types", "{entity, record_id} objects", |v| {
            RecordTypeRef::deserialize(v).ok()
        })
    }

    fn boolean(
        &mut self,
        object: &'a Map<String, Value>,
        key: &'a str,
    ) -> Result<bool, SchemaError> {
        Ok(self
            .single(object, key, "a boolean", Value::as_bool)?
            .unwrap_or(false))
    }

    fn bounds(
        &mut self,
        object: &'a Map<String, Value>,
        min: &'a str,
        max: &'a str,
    ) -> Result<(Option<u64>, Option<u64>), SchemaError> {
        let low = self.single(object, min, "a non-negative integer", Value::as_u64)?;
        let high = self.single(object, max, "a non-negative integer", Value::as_u64)?;
        self.check_order(low, high, max)?;
        Ok((low, high))
    }

    fn check_order<T: PartialOrd>(
        &mut self,
        min: Option<T>,
        max: Option<T>,
        max_key: &'a str,
    ) -> Result<(), SchemaError> {
        match (min, max) {
            (Some(min), Some(max)) if min > max => {
                Err(self.error_at(max_key, SchemaFault::BoundsReversed))
            }
            _ => Ok(()),
        }
    }

    fn single<T>(
        &mut self,
        object: &'a Map<String, Value>,
        key: &'a str,
        expected: &'static str,
        read: impl Fn(&Value) -> Option<T>,
    ) -> Result<Option<T>, SchemaError> {
        match object.get(key) {
            None => Ok(None),
            Some(value) => read(value)
                .map(Some)
                .ok_or_else(|| self.error_at(key, SchemaFault::Expected(expected))),
        }
    }

    fn list<T>(
        &mut self,
        object: &'a Map<String, Value>,
        key: &'a str,
        expected: &'static str,
        read: impl Fn(&Value) -> Option<T>,
    ) -> Result<Option<Vec<T>>, SchemaError> {
        let Some(value) = object.get(key) else {
            return Ok(None);
        };
        let items = value
            .as_array()
            .ok_or_else(|| self.error_at(key, SchemaFault::Expected(expected)))?;
        self.within_key(key, |c| {
            let read_item = |(i, item): (usize, &Value)| {
                read(item).ok_or_else(|| {
                    c.path.push_index(i);
                    let error = c.error(SchemaFault::Expected(expected));
                    c.path.pop();
                    error
                })
            };
            items
                .iter()
                .enumerate()
                .map(read_item)
                .collect::<Result<Vec<T>, _>>()
                .map(Some)
        })
    }

    /// A ref may lead back to itself only through a node that descends into
    /// the value (object, array, map); otherwise validation would not end.
    fn reject_ref_cycles(&self) -> Result<(), SchemaError> {
        let same_value_edges = |id: NodeId| -> Vec<NodeId> {
            match &self.nodes[id.0 as usize] {
                Node::Ref(target) => vec![*target],
                Node::Union { branches, .. } => branches.iter().map(|b| b.node).collect(),
                Node::Intersection { members } => members.clone(),
                _ => Vec::new(),
            }
        };
        // 0: not seen, 1: on the current walk, 2: done.
        let mut state = vec![0_u8; self.nodes.len()];
        for &(start, _, _) in &self.refs {
            if state[start.0 as usize] != 0 {
                continue;
            }
            state[start.0 as usize] = 1;
            let mut stack = vec![(start, same_value_edges(start), 0_usize)];
            while let Some((node, edges, next)) = stack.last_mut() {
                let Some(&target) = edges.get(*next) else {
                    state[node.0 as usize] = 2;
                    stack.pop();
                    continue;
                };
                *next += 1;
                match state[target.0 as usize] {
                    0 => {
                        state[target.0 as usize] = 1;
                        stack.push((target, same_value_edges(target), 0));
                    }
                    1 => {
                        // The cycle runs through the walk's nodes from `target` on; name one of its refs.
                        let on_cycle = stack
                            .iter()
                            .map(|(n, _, _)| *n)
                            .skip_while(|n| *n != target)
                            .collect::<Vec<_>>();
                        let (_, name, path) = self
                            .refs
                            .iter()
                            .find(|(id, _, _)| on_cycle.contains(id))
                            .unwrap_or(&self.refs[0]);
                        return Err(SchemaError {
                            path: path.clone(),
                            fault: SchemaFault::RefCycle(name.clone()),
                        });
                    }
                    _ => {}
                }
            }
        }
        Ok(())
    }
}
