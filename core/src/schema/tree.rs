//! A compiled schema: an arena of nodes with refs resolved, and the
//! questions asked of it after compilation (which keys a strict union's
//! branches declare, where a record can be sorted).

use std::collections::BTreeSet;

use serde::Deserialize;

use crate::model::{Entity, MediaType, Permission, RecordId};

/// The largest integer an `int` may hold, either sign: 2^53 − 1.
pub const MAX_SAFE_INTEGER: i64 = (1 << 53) - 1;

/// An index into [`Schema::nodes`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct NodeId(pub(crate) u32);

/// A compiled schema: every node of the schema, with refs resolved.
#[derive(Debug, Clone)]
pub struct Schema {
    pub(crate) nodes: Vec<Node>,
    pub(crate) root: NodeId,
}

/// A Type record's `record_types` entry: a plain `{entity, record_id}`
/// naming a Type record, not a link (PROTOCOL.md §4).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct RecordTypeRef {
    /// The author entity of the Type record.
    pub entity: Entity,
    /// The Type record's id.
    pub record_id: RecordId,
}

#[derive(Debug, Clone)]
pub(crate) enum Node {
    Object {
        properties: Vec<Property>,
        strict: bool,
    },
    Array {
        items: NodeId,
        min_items: Option<u64>,
        max_items: Option<u64>,
        distinct_items: bool,
    },
    Boolean {
        allowed: Option<Vec<bool>>,
    },
    String(StringRules),
    Int {
        allowed: Option<Vec<i64>>,
        min: Option<i64>,
        max: Option<i64>,
    },
    Number {
        allowed: Option<Vec<f64>>,
        min: Option<f64>,
        max: Option<f64>,
    },
    Null,
    TagLink {
        rules: StringRules,
    },
    BlobLink {
        max_size: Option<u64>,
        content_types: Option<Vec<MediaType>>,
    },
    EntityLink {
        min_permissions: Vec<Permission>,
    },
    RecordLink {
        record_types: Option<Vec<RecordTypeRef>>,
        existential: bool,
    },
    VersionLink {
        record_types: Option<Vec<RecordTypeRef>>,
    },
    Map {
        values: NodeId,
    },
    Union {
        branches: Vec<Branch>,
        strict: bool,
    },
    Intersection {
        members: Vec<NodeId>,
    },
    Ref(NodeId),
    Never,
    /// A slot reserved for a definition that is still being compiled.
    Pending,
}

#[derive(Debug, Clone)]
pub(crate) struct Property {
    pub(crate) name: Box<str>,
    pub(crate) node: NodeId,
    pub(crate) optional: bool,
    pub(crate) removed: bool,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct StringRules {
    pub(crate) allowed: Option<Vec<String>>,
    pub(crate) min_length: Option<u64>,
    pub(crate) max_length: Option<u64>,
}

#[derive(Debug, Clone)]
pub(crate) struct Branch {
    pub(crate) node: NodeId,
    /// For a strict union: the keys that only sibling branches declare. A
    /// value carrying one of them fails this branch.
    pub(crate) sibling_only_keys: Vec<Box<str>>,
}

impl Schema {
    pub(crate) fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.0 as usize]
    }

    /// The keys `id` declares for the value it checks, without looking at the
    /// value: what a strict union compares its branches by. `None` is "any key".
    fn static_keys(&self, id: NodeId) -> Option<BTreeSet<&str>> {
        match self.node(id) {
            Node::Object { properties, .. } => Some(properties.iter().map(|p| &*p.name).collect()),
            Node::Map { .. } => None,
            Node::Ref(target) => self.static_keys(*target),
            Node::Intersection { members } => {
                let mut keys = BTreeSet::new();
                for member in members {
                    keys.extend(self.static_keys(*member)?);
                }
                Some(keys)
            }
            Node::Union { branches, .. } => {
                let mut keys = BTreeSet::new();
                for branch in branches {
                    keys.extend(self.static_keys(branch.node)?);
                }
                Some(keys)
            }
            _ => Some(BTreeSet::new()),
        }
    }

    pub(crate) fn compute_sibling_keys(&mut self) {
        let unions: Vec<(usize, Vec<NodeId>)> = (0..self.nodes.len())
            .filter_map(|i| match &self.nodes[i] {
                Node::Union {
                    branches,
                    strict: true,
                } => Some((i, branches.iter().map(|b| b.node).collect())),
                _ => None,
            })
            .collect();
        for (index, branch_nodes) in unions {
            let keys: Vec<Option<BTreeSet<&str>>> =
                branch_nodes.iter().map(|&b| self.static_keys(b)).collect();
            let sibling_only: Vec<Vec<Box<str>>> = (0..keys.len())
                .map(|i| match &keys[i] {
                    None => Vec::new(),
                    Some(own) => {
                        let siblings: BTreeSet<&str> = keys
                            .iter()
                            .enumerate()
                            .filter(|(j, _)| *j != i)
                            .filter_map(|(_, k)| k.as_ref())
                            .flatten()
                            .copied()
                            .collect();
                        siblings.difference(own).map(|k| Box::from(*k)).collect()
                    }
                })
                .collect();
            if let Node::Union { branches, .. } = &mut self.nodes[index] {
                for (branch, keys) in branches.iter_mut().zip(sibling_only) {
                    branch.sibling_only_keys = keys;
                }
            }
        }
    }
}
