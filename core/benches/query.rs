//! Query benchmarks: reading a list request's filters and compiling the
//! whole request to the store's SQL, for the filters real apps send
//! (../shared/vectors/query-strings.json: Bird's feed, Files' folder
//! listing) and one at the grammar's limits (32 conditions, nested).
//!
//! Run: `cargo bench -p folio-core --bench query`

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use folio_core::auth::access::Access;
use folio_core::model::Entity;
use folio_core::query::{ListQuery, decode_query_string, parse_filter};
use folio_core::store::list_sql;

const BIRD_FEED: &str = "?page_size=20&sources=self%2Csubscription&filter=%24%5B%27type%27%5D%3Dtypes.baq.dev%2B875d6b82645e4833a3f0dca3fb79d69d%2C%24%5B%27content%27%5D%5B%27reply_to_post%27%5D%3D&include_links=entity%2Cexistential%2Cstanding";
const FILES_FOLDER: &str = "?page_size=200&filter=%24%5B%27author%27%5D%3Dalice.baq.run%2C(%24%5B%27type%27%5D%3Dtypes.baq.dev%2B3050fc130d4142a9994af0ef7c89099e%2C%24%5B%27type%27%5D%3Dtypes.baq.dev%2B2b6f7bc8ffd54c8db8062700c040e04f)%2C%24%5B%27content%27%5D%5B%27parent%27%5D%3D";

/// 32 conditions over four levels of parentheses.
fn largest_filter() -> String {
    let condition = |i: usize| match i % 4 {
        0 => format!("$['content']['tags'][*]=\"tag {i}\""),
        1 => format!("$['author']=user{i}.example"),
        2 => format!("$['content']['parent']=user{i}.example+{i:032x}"),
        _ => format!("$['content']['field{i}']="),
    };
    let group = |from: usize| {
        let inner: Vec<String> = (from..from + 8).map(condition).collect();
        format!(
            "{},({},({},({})))",
            inner[0..2].join(","),
            inner[2..4].join(","),
            inner[4..6].join(","),
            inner[6..8].join(",")
        )
    };
    (0..4).map(|g| group(g * 8)).collect::<Vec<_>>().join(",")
}

fn compile(query_string: &str, user: &Entity, access: &Access) -> usize {
    let params = decode_query_string(query_string).expect("a valid query string");
    let query = ListQuery::from_params(&params, user).expect("a valid list query");
    list_sql(1, &query, access).statement.sql.len()
}

fn benches(c: &mut Criterion) {
    let user: Entity = "alice.baq.run".parse().expect("an entity");
    let access = Access::Owner {
        entity: user.clone(),
    };
    let largest = largest_filter();
    parse_filter(&largest).expect("the largest filter parses");
    let largest_query = format!(
        "filter={}",
        percent_encoding::utf8_percent_encode(&largest, percent_encoding::NON_ALPHANUMERIC)
    );

    c.bench_function("filter_parse_largest", |b| {
        b.iter(|| parse_filter(black_box(&largest)))
    });
    for (name, query) in [
        ("list_sql_bird_feed", &BIRD_FEED[1..]),
        ("list_sql_files_folder", &FILES_FOLDER[1..]),
        ("list_sql_largest_filter", largest_query.as_str()),
    ] {
        c.bench_function(name, |b| {
            b.iter(|| compile(black_box(query), &user, &access))
        });
    }
}

criterion_group!(query, benches);
criterion_main!(query);
