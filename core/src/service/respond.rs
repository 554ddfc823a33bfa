//! Turning the rows a host fetched into the answers of the read endpoints
//! and of writes (spec §4.1–4.4, PROTOCOL.md §7): pages with their
//! `next_page`, a single record with what the caller may see of it, and the
//! `linked_records` every answer carries.
//!
//! A read is two steps for the host: run the statement the core gives, hand
//! back its `(record, links)` rows; then, if [`JsonAnswer::links_statement`]
//! names one, run it and hand its rows to [`JsonAnswer::finish`].

use serde::Serialize;
use serde_json::value::RawValue;

use crate::auth::access::Access;
use crate::model::{Entity, Record, RecordId};
use crate::problem::{Problem, ProblemType};
use crate::query::{
    Bound, IncludeLinks, IndexEntry, ListQuery, ListResponse, RecordResponse, SortValue,
    VersionsQuery, linked_records, next_page_query, next_page_start,
};
use crate::store::{
    Statement, StoredDataError, linked_sql, read_links, read_record, read_version, stored_json,
    versions_sql,
};

/// A `(record, links)` row as every version query yields it.
pub type VersionRow = (String, String);

fn read_rows(rows: Vec<VersionRow>) -> Result<Vec<(Record, Vec<IndexEntry>)>, StoredDataError> {
    rows.iter()
        .map(|(record, links)| read_version(record, links))
        .collect()
}

/// A record of an answer.
#[derive(Debug)]
enum Served {
    /// A stored version's JSON, which goes out as the store holds it. The
    /// store wrote it with [`Record`]'s own serializer, so reading it and
    /// writing it again would give back the same text (a property test in
    /// core holds this), at the cost of a parse and a serialization per
    /// record, which were most of a list's work.
    Stored(String),
    /// A record in memory: a write's answer, a version shown after a
    /// check of its permissions.
    Built(Box<Record>),
}

/// A [`Served`] record, ready to be written out.
#[derive(Serialize)]
#[serde(untagged)]
enum Out<'a> {
    Stored(&'a RawValue),
    Built(&'a Record),
}

impl Served {
    fn out(&self) -> Result<Out<'_>, StoredDataError> {
        Ok(match self {
            Served::Stored(json) => Out::Stored(stored_json(json)?),
            Served::Built(record) => Out::Built(record),
        })
    }
}

/// The records of an answer, waiting for their linked records.
#[derive(Debug)]
pub struct JsonAnswer {
    shape: Shape,
    records: Vec<(Served, Vec<IndexEntry>)>,
    include: IncludeLinks,
    user: Entity,
    access: Access,
}

#[derive(Debug)]
enum Shape {
    Page {
        page_size: u32,
        next_page: Option<String>,
    },
    One,
}

impl JsonAnswer {
    /// The statement fetching the linked records, if any are asked for.
    pub fn links_statement(&self, user_id: i64) -> Option<Statement> {
        let plan = self.include.plan(
            self.records.iter().map(|(_, entries)| entries.as_slice()),
            &self.user,
        );
        (!plan.is_empty()).then(|| linked_sql(user_id, &plan))
    }

    /// The JSON answer, given the rows of [`JsonAnswer::links_statement`] (none when it named none).
    pub fn finish(self, linked_rows: Vec<VersionRow>) -> Result<String, StoredDataError> {
        let fetched = read_rows(linked_rows)?
            .into_iter()
            .map(|(r, _)| r)
            .collect();
        let linked_records = linked_records(fetched, &self.user, &self.access);
        let mut records = self
            .records
            .iter()
            .map(|(served, _)| served.out())
            .collect::<Result<Vec<_>, _>>()?;
        let json = match self.shape {
            Shape::Page {
                page_size,
                next_page,
            } => serde_json::to_string(&ListResponse {
                records,
                linked_records,
                page_size,
                next_page,
            }),
            Shape::One => serde_json::to_string(&RecordResponse {
                record: records.pop().expect("a single answer holds one record"),
                linked_records,
            }),
        };
        Ok(json.expect("records serialize"))
    }
}

/// A page of the list: the rows of [`crate::store::list_sql`] for `query`
/// (at most `page_size + 1`; one more means another page follows). Its
/// records go out as stored; only the last is read, for where the next
/// page starts.
pub fn list_page(
    query: &ListQuery,
    params: &[(String, String)],
    mut rows: Vec<VersionRow>,
    user: &Entity,
    access: &Access,
) -> Result<JsonAnswer, StoredDataError> {
    let page_size = query.page_size;
    let more = rows.len() > page_size as usize;
    rows.truncate(page_size as usize);
    let records = rows
        .into_iter()
        .map(|(record, links)| Ok((record, read_links(&links)?)))
        .collect::<Result<Vec<_>, StoredDataError>>()?;
    let start = match records.last() {
        Some((last, entries)) if more => next_page_start(&query.sort, &read_record(last)?, entries),
        _ => None,
    };
    let next_page = start.map(|start| next_page_query(params, &start));
    Ok(JsonAnswer {
        shape: Shape::Page {
            page_size,
            next_page,
        },
        records: records
            .into_iter()
            .map(|(json, entries)| (Served::Stored(json), entries))
            .collect(),
        include: query.include_links.clone(),
        user: user.clone(),
        access: access.clone(),
    })
}

/// A list page of read rows (at most `page_size + 1`, as
/// [`crate::store::list_sql`] fetches them): the page, and where the next
/// one starts when one more row means another page follows: the console's
/// records page ([`list_page`] reads only the last record for it).
pub fn page_of(
    query: &ListQuery,
    mut records: Vec<(Record, Vec<IndexEntry>)>,
) -> (Vec<(Record, Vec<IndexEntry>)>, Option<Bound>) {
    let more = records.len() > query.page_size as usize;
    records.truncate(query.page_size as usize);
    let start = more
        .then(|| records.last())
        .flatten()
        .and_then(|(last, entries)| next_page_start(&query.sort, last, entries));
    (records, start)
}

impl VersionsQuery {
    /// The statement of this page of `record`'s versions.
    pub fn statement(&self, user_id: i64, author: &Entity, record_id: &RecordId) -> Statement {
        versions_sql(user_id, author, record_id, self.after, self.page_size)
    }

    /// The page, from the statement's rows. Each version is shown under
    /// its own permissions (PROTOCOL.md §7): a version that was private
    /// stays private after the record is made public, as `…/versions/{hash}`
    /// keeps it. A record the caller may read no version of on this page,
    /// and whose latest version it may not read, is not found; so is one
    /// with no versions. The next page starts after the last version
    /// fetched, shown or not.
    pub fn page(
        &self,
        params: &[(String, String)],
        latest: Option<&Record>,
        rows: Vec<VersionRow>,
        user: &Entity,
        access: &Access,
    ) -> Result<Result<JsonAnswer, Problem>, StoredDataError> {
        let mut records = read_rows(rows)?;
        let more = records.len() > self.page_size as usize;
        records.truncate(self.page_size as usize);
        let next_page = more
            .then(|| records.last())
            .flatten()
            .and_then(|(last, _)| last.version.received_at)
            .map(|date| {
                next_page_query(
                    params,
                    &Bound {
                        value: SortValue::Date(date),
                        record_id: None,
                    },
                )
            });
        records.retain(|(record, _)| access.can_read(record));
        if records.is_empty() && !latest.is_some_and(|record| access.can_read(record)) {
            return Ok(Err(Problem::new(ProblemType::RecordNotFound)));
        }
        Ok(Ok(JsonAnswer {
            shape: Shape::Page {
                page_size: self.page_size,
                next_page,
            },
            records: records
                .into_iter()
                .map(|(record, entries)| (Served::Built(Box::new(record)), entries))
                .collect(),
            include: self.include_links.clone(),
            user: user.clone(),
            access: access.clone(),
        }))
    }
}

/// A single record (or one version of it) for a caller: not found when
/// absent or unreadable (never 403, PROTOCOL.md §11).
pub fn one_record(
    row: Option<VersionRow>,
    include: IncludeLinks,
    user: &Entity,
    access: &Access,
) -> Result<Result<JsonAnswer, Problem>, StoredDataError> {
    let Some((record, links)) = row else {
        return Ok(Err(Problem::new(ProblemType::RecordNotFound)));
    };
    let (read, entries) = read_version(&record, &links)?;
    if !access.can_read(&read) {
        return Ok(Err(Problem::new(ProblemType::RecordNotFound)));
    }
    Ok(Ok(JsonAnswer {
        shape: Shape::One,
        records: vec![(Served::Stored(record), entries)],
        include,
        user: user.clone(),
        access: access.clone(),
    }))
}

/// The answer of a write: the version it stored (or replayed), with the
/// links `include` asks for. The writer may always see what it wrote.
pub fn written(
    record: Record,
    entries: Vec<IndexEntry>,
    include: IncludeLinks,
    user: &Entity,
    access: &Access,
) -> JsonAnswer {
    JsonAnswer {
        shape: Shape::One,
        records: vec![(Served::Built(Box::new(record)), entries)],
        include,
        user: user.clone(),
        access: access.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn versions_query_reads_its_parameters() {
        let query = VersionsQuery::from_params(&params(&[
            ("page_size", "5"),
            ("page_start", "\"2024-02-19T15:20:51.3590000Z\""),
            ("include_links", "entity"),
        ]))
        .expect("valid");
        assert_eq!(query.page_size, 5);
        assert!(query.after.is_some());
        assert!(query.include_links.entity && !query.include_links.existential);
        for bad in [
            ("page_size", "0"),
            ("page_size", "201"),
            ("page_start", "x"),
        ] {
            assert!(
                VersionsQuery::from_params(&params(&[bad])).is_err(),
                "{bad:?}"
            );
        }
    }
}
