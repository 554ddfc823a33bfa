//! A list request as one SQL query over `records` and `link_index`, with
//! exactly the semantics of [`ListQuery::select_page`].

use crate::auth::access::{ALWAYS_READABLE_TYPES, Access};
use crate::query::{AUTHOR_PATH, TYPE_PATH, VERSION_AUTHOR_PATH};
use crate::query::{
    Bound, Condition, Direction, Filter, FilterValue, ListQuery, RANKED_MATCHES, SortProperty,
    SortValue, entity_key, value_key,
};
use crate::query::{ID_PATH, SOURCE_PATH};
use crate::schema::builtin::{BuiltinType, SYSTEM_ENTITY};

use super::{Binder, SqlValue, Statement, ValueList, key_paths_cte, rows_with_key};

/// The path of the entities a record's `read` permission names.
const READ_PATH: &str = "$['permissions']['read'][*]";

/// The list query for one page.
///
/// Its rows are `(record, links)`: a version's JSON and its index entries
/// as JSON, in list order, at most `page_size + 1` of them; one more than
/// the page size means that another page follows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListSql {
    /// The statement; its rows are described above.
    pub statement: Statement,
}

/// Builds the query for `query` over user `user_id`'s store, as `access` sees it.
pub fn list_sql(user_id: i64, query: &ListQuery, access: &Access) -> ListSql {
    let mut binder = Binder::default();
    let user = binder.bind(user_id);
    // The values array is bound as `?2` once every value is known.
    let values_param = binder.bind(SqlValue::Null);
    let sql = SqlBuilder {
        binder,
        values: ValueList::default(),
        values_param,
        user,
        key_paths: false,
    };
    let statement = sql.list(query, access);
    ListSql { statement }
}

struct SqlBuilder {
    binder: Binder,
    values: ValueList,
    /// `?2`: the JSON array of every value a condition compares with.
    values_param: String,
    /// `?1`: the user.
    user: String,
    /// Whether a condition looks entries up by key alone: the statement
    /// then starts with the `key_paths` table.
    key_paths: bool,
}

impl SqlBuilder {
    /// A request value, read from the bound array.
    fn value(&mut self, value: impl Into<serde_json::Value>) -> String {
        self.values.push(&self.values_param, value)
    }

    fn list(mut self, query: &ListQuery, access: &Access) -> Statement {
        let user = self.user.clone();
        let direction = query.sort.direction;
        let (sort_join, sort_expr) = match &query.sort.property {
            SortProperty::ReceivedAt => (String::new(), "r.received_at".to_owned()),
            SortProperty::CreatedAt => (String::new(), "r.created_at".to_owned()),
            SortProperty::VersionReceivedAt => (String::new(), "r.version_received_at".to_owned()),
            SortProperty::VersionCreatedAt => (String::new(), "r.version_created_at".to_owned()),
            SortProperty::Tag(path) => {
                let path = self.value(path.as_str());
                (
                    format!(
                        " JOIN (SELECT record_row, MIN(key) AS value FROM link_index \
                         WHERE user_id = {user} AND path = {path} \
                         AND key >= 't:' AND key < 't;' GROUP BY record_row) s \
                         ON s.record_row = r.row"
                    ),
                    "s.value".to_owned(),
                )
            }
        };
        let mut conditions = vec![format!("r.user_id = {user}")];
        if !query.include_deleted {
            conditions.push("r.deleted = 0".to_owned());
        }
        if let Some(sources) = &query.sources {
            let names: Vec<&str> = sources.iter().map(|s| s.as_str()).collect();
            let names = self.value(names);
            conditions.push(format!(
                "r.source IN (SELECT value FROM json_each({names}))"
            ));
        }
        conditions.extend(self.access(access));
        if !query.filters.is_empty() {
            let filters: Vec<String> = query.filters.iter().map(|f| self.filter(f)).collect();
            conditions.push(format!("({})", filters.join(" OR ")));
        }
        if let Some(min) = &query.min {
            conditions.push(self.after(&sort_expr, min, Direction::Ascending));
        }
        if let Some(max) = &query.max {
            conditions.push(self.after(&sort_expr, max, Direction::Descending));
        }
        let order = |prefix: &str, value: &str| {
            format!(
                "{value} {direction}, {prefix}record_id {direction}, {prefix}author {direction}"
            )
        };
        // A search reads the records holding its words from the full-text
        // index first (`CROSS JOIN` keeps that order): a word is rarer than
        // a sort value.
        let search_from = match &query.search {
            None => String::new(),
            Some(search) => {
                let expression = self.value(search.match_expression());
                conditions.push(format!("record_text MATCH {expression}"));
                conditions.push("r.row = record_text.rowid".to_owned());
                "record_text CROSS JOIN ".to_owned()
            }
        };
        let ranked = query.search.as_ref().is_some_and(|search| search.ranked);
        // A ranked search is one page, its best matches: no row beyond.
        let limit = match ranked {
            true => self.binder.bind(i64::from(query.page_size)),
            false => self.binder.bind(i64::from(query.page_size) + 1),
        };
        let text = match &query.distinct {
            None => {
                if let Some(start) = &query.page_start {
                    conditions.push(self.after(&sort_expr, start, direction));
                }
                match &query.search {
                    None => format!(
                        "SELECT v.record, v.links FROM records r{sort_join} \
                         JOIN versions v ON v.record_row = r.row AND v.hash = r.version_hash \
                         WHERE {} ORDER BY {} LIMIT {limit}",
                        conditions.join(" AND "),
                        order("r.", &sort_expr),
                    ),
                    // A search orders its matches by what the records'
                    // rows hold, then reads the versions of the page alone.
                    // Ranked, it ranks the newest matches the caller may
                    // list (`RANKED_MATCHES`) by BM25, best (lowest) first.
                    Some(_) => {
                        let matches = match ranked {
                            true => format!(
                                "SELECT * FROM (SELECT r.row, r.version_hash, r.record_id, \
                                 r.author, bm25(record_text) AS sort_value \
                                 FROM {search_from}records r{sort_join} WHERE {} \
                                 ORDER BY record_text.rowid DESC LIMIT {RANKED_MATCHES}) \
                                 ORDER BY sort_value, record_id DESC, author DESC LIMIT {limit}",
                                conditions.join(" AND "),
                            ),
                            false => format!(
                                "SELECT r.row, r.version_hash, r.record_id, r.author, \
                                 {sort_expr} AS sort_value \
                                 FROM {search_from}records r{sort_join} WHERE {} \
                                 ORDER BY {} LIMIT {limit}",
                                conditions.join(" AND "),
                                order("r.", &sort_expr),
                            ),
                        };
                        let outer = match ranked {
                            true => "c.sort_value, c.record_id DESC, c.author DESC".to_owned(),
                            false => order("c.", "c.sort_value"),
                        };
                        format!(
                            "SELECT v.record, v.links FROM ({matches}) c \
                             JOIN versions v ON v.record_row = c.row AND v.hash = c.version_hash \
                             ORDER BY {outer}"
                        )
                    }
                }
            }
            Some(path) => {
                // Distinct before paging: rank every candidate within its
                // value, then page through the first of each.
                // The first record or tag value at the path: from the link
                // index, or for the type, its columns (its `r:` key).
                let (distinct_join, distinct_value) = if path.as_str() == TYPE_PATH {
                    (
                        String::new(),
                        "'r:' || r.type_entity || ' ' || r.type_record_id".to_owned(),
                    )
                } else {
                    let path = self.value(path.as_str());
                    (
                        format!(
                            " JOIN (SELECT record_row, MIN(key) AS value FROM link_index \
                             WHERE user_id = {user} AND path = {path} \
                             AND ((key >= 'r:' AND key < 'r;') OR (key >= 't:' AND key < 't;')) \
                             GROUP BY record_row) d ON d.record_row = r.row"
                        ),
                        "d.value".to_owned(),
                    )
                };
                let after_start = match &query.page_start {
                    Some(start) => self.after(&sort_expr, start, direction),
                    None => "1".to_owned(),
                };
                format!(
                    "SELECT v.record, v.links FROM (\
                     SELECT r.row, r.user_id, r.version_hash, r.record_id, r.author, \
                     {sort_expr} AS sort_value, {after_start} AS after_start, \
                     ROW_NUMBER() OVER (PARTITION BY {distinct_value} ORDER BY {}) AS rank \
                     FROM records r{sort_join}{distinct_join} \
                     WHERE {}) c \
                     JOIN versions v ON v.record_row = c.row AND v.hash = c.version_hash \
                     WHERE c.rank = 1 AND c.after_start ORDER BY {} LIMIT {limit}",
                    order("r.", &sort_expr),
                    conditions.join(" AND "),
                    order("c.", "c.sort_value"),
                )
            }
        };
        let SqlBuilder {
            mut binder,
            values,
            key_paths,
            values_param: self_values_param,
            ..
        } = self;
        // Every bare value's key is among the request's values.
        let text = match key_paths {
            true => {
                let keys = format!("(SELECT value FROM json_each({self_values_param}))");
                format!("{}{text}", key_paths_cte(&user, &keys))
            }
            false => text,
        };
        binder.params[1] = values.into_param();
        binder.finish(text)
    }

    /// Positions strictly after `bound` in `direction`; a bound without a
    /// record id excludes its whole value.
    fn after(&mut self, sort_expr: &str, bound: &Bound, direction: Direction) -> String {
        let op = match direction {
            Direction::Ascending => ">",
            Direction::Descending => "<",
        };
        let value = match &bound.value {
            SortValue::Date(date) => self.value(date.unix_ticks()),
            SortValue::Tag(tag) => self.value(crate::query::tag_key(tag)),
        };
        match &bound.record_id {
            None => format!("{sort_expr} {op} {value}"),
            Some(id) => {
                let id = self.value(id.to_string());
                format!("({sort_expr}, r.record_id) {op} ({value}, {id})")
            }
        }
    }

    /// What the caller may read (see [`Access::can_read`]).
    fn access(&mut self, access: &Access) -> Vec<String> {
        let system = self.value(SYSTEM_ENTITY);
        let type_is = |this: &mut Self, builtin: BuiltinType| {
            let id = this.value(builtin.record_id().to_string());
            format!("(r.type_entity = {system} AND r.type_record_id = {id})")
        };
        let mut conditions = vec![format!("NOT {}", type_is(self, BuiltinType::Credentials))];
        let user = self.user.clone();
        match access.entity() {
            None => conditions.push("r.public = 1".to_owned()),
            Some(entity) => {
                let author = self.value(entity.as_str());
                let path = self.value(READ_PATH);
                let key = self.value(entity_key(entity));
                conditions.push(format!(
                    "(r.public = 1 OR r.author = {author} OR r.row IN (\
                     SELECT record_row FROM link_index \
                     WHERE user_id = {user} AND path = {path} AND key = {key}))"
                ));
            }
        }
        if let Some(grant) = access.grant().filter(|grant| !grant.every_type) {
            let mut allowed = vec!["r.public = 1".to_owned()];
            allowed.extend(
                ALWAYS_READABLE_TYPES
                    .iter()
                    .map(|&builtin| type_is(self, builtin)),
            );
            if let Some(app) = grant.app_record {
                let app_type = type_is(self, BuiltinType::App);
                let app = self.value(app.to_string());
                allowed.push(format!("({app_type} AND r.record_id = {app})"));
            }
            let types: Vec<String> = grant
                .read
                .iter()
                .chain(&grant.write)
                .map(|t| format!("{} {}", t.entity, t.record_id))
                .collect();
            let types = self.value(types);
            allowed.push(format!(
                "(r.type_entity || ' ' || r.type_record_id) IN (SELECT value FROM json_each({types}))"
            ));
            conditions.push(format!("({})", allowed.join(" OR ")));
        }
        conditions
    }

    fn filter(&mut self, filter: &Filter) -> String {
        let (members, operator, empty) = match filter {
            Filter::Condition(condition) => return self.condition(condition),
            Filter::And(members) => (members, " AND ", "1"),
            Filter::Or(members) => (members, " OR ", "0"),
        };
        if members.is_empty() {
            return empty.to_owned();
        }
        let parts: Vec<String> = members.iter().map(|m| self.filter(m)).collect();
        format!("({})", parts.join(operator))
    }

    fn condition(&mut self, condition: &Condition) -> String {
        let user = self.user.clone();
        match condition {
            Condition::Equals { path, value } => match path.as_str() {
                ID_PATH | SOURCE_PATH | AUTHOR_PATH | VERSION_AUTHOR_PATH | TYPE_PATH => {
                    self.column_equals(path.as_str(), value)
                }
                path => {
                    let path = self.value(path);
                    let key = self.value(value_key(value));
                    format!(
                        "r.row IN (SELECT record_row FROM link_index \
                         WHERE user_id = {user} AND path = {path} AND key = {key})"
                    )
                }
            },
            Condition::Absent { path } => match path.as_str() {
                // Every record has an id, a source, an author, a version
                // author and a type.
                ID_PATH | SOURCE_PATH | AUTHOR_PATH | VERSION_AUTHOR_PATH | TYPE_PATH => {
                    "0".to_owned()
                }
                path => {
                    let path = self.value(path);
                    format!(
                        "r.row NOT IN (SELECT record_row FROM link_index \
                         WHERE user_id = {user} AND path = {path})"
                    )
                }
            },
            Condition::AnyLink(value) => {
                // Some link has the value: an entry of the link index, or
                // the envelope's, kept as columns. The columns are matched
                // against the key itself (`kind:` and the value), so that
                // the largest filters stay well inside D1's statement size.
                let key = self.value(value_key(value));
                self.key_paths = true;
                let entries = format!("r.row IN ({})", rows_with_key(&key));
                let envelope = match value {
                    FilterValue::Entity(_) => {
                        format!("substr({key},3) IN (r.author,r.version_author)")
                    }
                    FilterValue::Record { .. } => {
                        format!("{key}='r:'||r.type_entity||' '||r.type_record_id")
                    }
                    FilterValue::Version { .. } => format!(
                        "{key}='v:'||r.type_entity||' '||r.type_record_id||' '||r.type_hash"
                    ),
                    FilterValue::Tag(_) => return entries,
                };
                format!("({entries} OR {envelope})")
            }
        }
    }

    /// `path = value` for a path `records` holds as columns: the id and
    /// source (matched by a tag), and the envelope's author, version author
    /// and type (their entries, kept as columns; see [`AUTHOR_PATH`]). A
    /// value of another kind matches nothing.
    fn column_equals(&mut self, path: &str, value: &FilterValue) -> String {
        match (path, value) {
            (ID_PATH, FilterValue::Tag(id)) => {
                format!("r.record_id = {}", self.value(id.as_str()))
            }
            (SOURCE_PATH, FilterValue::Tag(source)) => {
                format!("r.source = {}", self.value(source.as_str()))
            }
            (AUTHOR_PATH, FilterValue::Entity(entity)) => {
                format!("r.author = {}", self.value(entity.as_str()))
            }
            (VERSION_AUTHOR_PATH, FilterValue::Entity(entity)) => {
                format!("r.version_author = {}", self.value(entity.as_str()))
            }
            (TYPE_PATH, FilterValue::Record { entity, record_id }) => {
                let id = self.value(record_id.to_string());
                let entity = self.value(entity.as_str());
                format!("(r.type_record_id = {id} AND r.type_entity = {entity})")
            }
            (
                TYPE_PATH,
                FilterValue::Version {
                    entity,
                    record_id,
                    version_hash,
                },
            ) => {
                let id = self.value(record_id.to_string());
                let entity = self.value(entity.as_str());
                let hash = self.value(version_hash.to_string());
                format!(
                    "(r.type_record_id = {id} AND r.type_entity = {entity} AND r.type_hash = {hash})"
                )
            }
            _ => "0".to_owned(),
        }
    }
}
