//! Listing records: sorting, bounds, paging, filters, sources, distinct
//! (spec §4.1, PROTOCOL.md §7).

use serde_json::{Value, json};

use super::{Check, CheckResult, check};
use crate::client::{Call, record_id};
use crate::context::{Ctx, ids, type_filter};
use crate::expect::{self, INVALID_PARAMETER, PEER_UNREACHABLE, ensure, ensure_eq, str_at};

pub fn checks() -> Vec<Check> {
    vec![
        check!("list/default-sort-received-at-desc", default_sort),
        check!("list/sort-received-at-desc", sort_received_desc),
        check!("list/sort-received-at-asc", sort_received_asc),
        check!("list/sort-created-at-desc", sort_created_desc),
        check!("list/sort-created-at-asc", sort_created_asc),
        check!(
            "list/sort-version-received-at-desc",
            sort_version_received_desc
        ),
        check!(
            "list/sort-version-received-at-asc",
            sort_version_received_asc
        ),
        check!(
            "list/sort-version-created-at-desc",
            sort_version_created_desc
        ),
        check!("list/sort-version-created-at-asc", sort_version_created_asc),
        check!(
            "list/sort-bracketed-version-path-accepted",
            sort_bracketed_version
        ),
        check!("list/sort-space-for-plus-accepted", sort_space_for_plus),
        check!("list/sort-malformed-invalid-parameter", sort_malformed),
        check!("list/page-size-default-20", page_size_default),
        check!("list/page-size-echoed", page_size_echoed),
        check!("list/page-size-1-accepted", page_size_1),
        check!("list/page-size-200-accepted", page_size_200),
        check!("list/page-size-0-invalid-parameter", page_size_0),
        check!("list/page-size-201-invalid-parameter", page_size_201),
        check!("list/next-page-absent-on-last-page", next_page_absent),
        check!(
            "list/next-page-appends-to-records-url",
            next_page_appendable
        ),
        check!(
            "list/next-page-keeps-parameters",
            next_page_keeps_parameters
        ),
        check!("list/paging-no-duplicates-or-gaps", paging_complete),
        check!("list/min-excludes-equal-value", min_excludes_equal),
        check!("list/max-excludes-equal-value", max_excludes_equal),
        check!("list/min-with-id-includes-equal-value", min_with_id),
        check!("list/max-with-id-includes-equal-value", max_with_id),
        check!(
            "list/min-max-bound-value-in-desc-order",
            bounds_in_desc_order
        ),
        check!("list/page-start-exclusive", page_start_exclusive),
        check!("list/min-malformed-invalid-parameter", min_malformed),
        check!("list/tombstones-left-out-by-default", tombstones_left_out),
        check!("list/include-deleted-lists-tombstones", include_deleted),
        check!("list/sources-self-leaves-out-builtins", sources_self),
        check!("list/sources-resolution-only-builtins", sources_resolution),
        check!("list/sources-unknown-matches-nothing", sources_unknown),
        check!("list/distinct-keeps-first-per-value", distinct_first),
        check!(
            "list/distinct-applies-before-paging",
            distinct_before_paging
        ),
        check!("list/tag-sort-asc", tag_sort_asc),
        check!("list/tag-sort-desc", tag_sort_desc),
        check!(
            "list/tag-sort-leaves-out-records-without-value",
            tag_sort_leaves_out
        ),
        check!("list/proxy-to-own-entity-ignored", proxy_to_self),
        check!(
            "list/proxy-to-unreachable-entity-peer-unreachable",
            proxy_to_other
        ),
        check!(
            "list/proxy-to-not-an-entity-invalid-parameter",
            proxy_to_invalid
        ),
        check!("list/unknown-parameter-ignored", unknown_parameter),
    ]
}

const RECEIVED_AT: &str = "$['received_at']";
const CREATED_AT: &str = "$['created_at']";
const VERSION_RECEIVED_AT: &str = "$['version.received_at']";
const VERSION_CREATED_AT: &str = "$['version.created_at']";
const LABEL: &str = "$['content']['label']";

/// Three records of one fresh type whose four sort properties each order
/// them differently (ascending):
/// - received_at: r1, r2, r3 (creation order)
/// - created_at: r2, r1, r3
/// - version.received_at: r2, r3, r1 (update order)
/// - version.created_at: r3, r1, r2
struct SortFixture {
    ty: Value,
    r: [String; 3],
    created_at: [&'static str; 3],
}

impl SortFixture {
    async fn new(ctx: &Ctx) -> Result<Self, String> {
        let ty = ctx.note_type().await?;
        let created_at = [
            "2024-03-02T00:00:00.0000000Z",
            "2024-03-01T00:00:00.0000000Z",
            "2024-03-03T00:00:00.0000000Z",
        ];
        let mut r = Vec::new();
        for (n, date) in created_at.iter().enumerate() {
            let record = ctx
                .create(json!({"type": ty, "content": {"title": format!("r{}", n + 1)}, "created_at": date}))
                .await?;
            r.push(str_at(&record, "/id")?.to_string());
        }
        let updates = [
            (1, "2024-05-03T00:00:00.0000000Z"),
            (2, "2024-05-01T00:00:00.0000000Z"),
            (0, "2024-05-02T00:00:00.0000000Z"),
        ];
        for (index, date) in updates {
            let body = json!({"content": {"title": "updated"}, "version": {"created_at": date}});
            let call = Call::put(ctx.record_url(&r[index])?)
                .json(&body)
                .signed(&ctx.full);
            expect::status(&ctx.send(call).await?, 200)?;
        }
        let r: [String; 3] = r.try_into().map_err(|_| "three records".to_string())?;
        Ok(Self { ty, r, created_at })
    }

    fn ids(&self, order: &[usize]) -> Vec<String> {
        order.iter().map(|index| self.r[*index].clone()).collect()
    }

    /// The ids listed with these extra parameters.
    async fn list(&self, ctx: &Ctx, parameters: &[(&str, &str)]) -> Result<Vec<String>, String> {
        let filter = type_filter(&self.ty)?;
        let mut all = vec![("filter", filter.as_str())];
        all.extend_from_slice(parameters);
        ids(&ctx.list(&all).await?)
    }
}

async fn expect_order(
    ctx: &Ctx,
    sort: Option<&str>,
    ascending: [usize; 3],
    descending: bool,
) -> CheckResult {
    let fixture = SortFixture::new(ctx).await?;
    let sort_value;
    let parameters: Vec<(&str, &str)> = match sort {
        Some(property) => {
            sort_value = format!("{property}+{}", if descending { "desc" } else { "asc" });
            vec![("sort", sort_value.as_str())]
        }
        None => vec![],
    };
    let mut expected = fixture.ids(&ascending);
    if descending {
        expected.reverse();
    }
    let listed = fixture.list(ctx, &parameters).await?;
    ensure_eq!(listed, expected, format!("order for sort {sort:?}"));
    Ok(())
}

async fn default_sort(ctx: &Ctx) -> CheckResult {
    expect_order(ctx, None, [0, 1, 2], true).await
}

async fn sort_received_desc(ctx: &Ctx) -> CheckResult {
    expect_order(ctx, Some(RECEIVED_AT), [0, 1, 2], true).await
}

async fn sort_received_asc(ctx: &Ctx) -> CheckResult {
    expect_order(ctx, Some(RECEIVED_AT), [0, 1, 2], false).await
}

async fn sort_created_desc(ctx: &Ctx) -> CheckResult {
    expect_order(ctx, Some(CREATED_AT), [1, 0, 2], true).await
}

async fn sort_created_asc(ctx: &Ctx) -> CheckResult {
    expect_order(ctx, Some(CREATED_AT), [1, 0, 2], false).await
}

async fn sort_version_received_desc(ctx: &Ctx) -> CheckResult {
    expect_order(ctx, Some(VERSION_RECEIVED_AT), [1, 2, 0], true).await
}

async fn sort_version_received_asc(ctx: &Ctx) -> CheckResult {
    expect_order(ctx, Some(VERSION_RECEIVED_AT), [1, 2, 0], false).await
}

async fn sort_version_created_desc(ctx: &Ctx) -> CheckResult {
    expect_order(ctx, Some(VERSION_CREATED_AT), [2, 0, 1], true).await
}

async fn sort_version_created_asc(ctx: &Ctx) -> CheckResult {
    expect_order(ctx, Some(VERSION_CREATED_AT), [2, 0, 1], false).await
}

async fn sort_bracketed_version(ctx: &Ctx) -> CheckResult {
    expect_order(ctx, Some("$['version']['created_at']"), [2, 0, 1], false).await
}

async fn sort_space_for_plus(ctx: &Ctx) -> CheckResult {
    let fixture = SortFixture::new(ctx).await?;
    let mut url = ctx.records_url()?;
    let filter = type_filter(&fixture.ty)?;
    url.query_pairs_mut().append_pair("filter", &filter);
    let query = format!(
        "{}&sort=%24%5B%27created_at%27%5D%20asc",
        url.query().unwrap_or_default()
    );
    url.set_query(Some(&query));
    let page = expect::json(&ctx.send(Call::get(url).signed(&ctx.full)).await?, 200)?;
    ensure_eq!(ids(&page)?, fixture.ids(&[1, 0, 2]), "order");
    Ok(())
}

pub(super) async fn expect_list_problem(
    ctx: &Ctx,
    parameters: &[(&str, &str)],
    problem: expect::Problem,
) -> CheckResult {
    let url = crate::context::with_query(ctx.records_url()?, parameters);
    expect::problem_response(&ctx.send(Call::get(url).signed(&ctx.full)).await?, problem).map(drop)
}

async fn sort_malformed(ctx: &Ctx) -> CheckResult {
    expect_list_problem(
        ctx,
        &[("sort", "$['created_at']+sideways")],
        INVALID_PARAMETER,
    )
    .await
}

/// Makes sure the whole list holds more than `count` records.
async fn at_least(ctx: &Ctx, count: usize) -> CheckResult {
    let size = (count + 1).to_string();
    let present = ids(&ctx.list(&[("page_size", &size)]).await?)?.len();
    if present <= count {
        let ty = ctx.note_type().await?;
        for _ in present..=count {
            ctx.note(&ty, json!({"title": "filler"})).await?;
        }
    }
    Ok(())
}

async fn page_size_default(ctx: &Ctx) -> CheckResult {
    at_least(ctx, 20).await?;
    let page = ctx.list(&[]).await?;
    ensure_eq!(ids(&page)?.len(), 20, "records on a default page");
    ensure!(
        page["next_page"].is_string(),
        "no next_page though more records exist"
    );
    Ok(())
}

async fn page_size_echoed(ctx: &Ctx) -> CheckResult {
    let page = ctx.list(&[("page_size", "7")]).await?;
    ensure_eq!(page["page_size"], json!(7), "page_size");
    Ok(())
}

async fn page_size_1(ctx: &Ctx) -> CheckResult {
    at_least(ctx, 1).await?;
    ensure_eq!(
        ids(&ctx.list(&[("page_size", "1")]).await?)?.len(),
        1,
        "records"
    );
    Ok(())
}

async fn page_size_200(ctx: &Ctx) -> CheckResult {
    let page = ctx.list(&[("page_size", "200")]).await?;
    ensure!(ids(&page)?.len() <= 200, "more than 200 records on a page");
    Ok(())
}

async fn page_size_0(ctx: &Ctx) -> CheckResult {
    expect_list_problem(ctx, &[("page_size", "0")], INVALID_PARAMETER).await
}

async fn page_size_201(ctx: &Ctx) -> CheckResult {
    expect_list_problem(ctx, &[("page_size", "201")], INVALID_PARAMETER).await
}

async fn next_page_absent(ctx: &Ctx) -> CheckResult {
    let fixture = SortFixture::new(ctx).await?;
    let filter = type_filter(&fixture.ty)?;
    let page = ctx.list(&[("filter", &filter), ("page_size", "3")]).await?;
    ensure_eq!(ids(&page)?.len(), 3, "records");
    ensure!(
        page.get("next_page").is_none(),
        "next_page on the last page: {}",
        page["next_page"]
    );
    Ok(())
}

/// Follows `next_page` from the first page; returns every id in order.
async fn follow_pages(ctx: &Ctx, parameters: &[(&str, &str)]) -> Result<Vec<String>, String> {
    let mut page = ctx.list(parameters).await?;
    let mut all = ids(&page)?;
    for _ in 0..100 {
        let Some(next) = page["next_page"].as_str() else {
            return Ok(all);
        };
        ensure!(
            next.starts_with('?'),
            "next_page {next:?} does not start with ?"
        );
        let url = url::Url::parse(&format!("{}{next}", ctx.records_url()?))
            .map_err(|error| format!("records URL + next_page: {error}"))?;
        page = expect::json(&ctx.send(Call::get(url).signed(&ctx.full)).await?, 200)?;
        all.extend(ids(&page)?);
    }
    Err("more than 100 pages".into())
}

async fn next_page_appendable(ctx: &Ctx) -> CheckResult {
    let fixture = SortFixture::new(ctx).await?;
    let filter = type_filter(&fixture.ty)?;
    let all = follow_pages(ctx, &[("filter", &filter), ("page_size", "2")]).await?;
    ensure_eq!(all.len(), 3, "records over both pages");
    Ok(())
}

async fn next_page_keeps_parameters(ctx: &Ctx) -> CheckResult {
    let fixture = SortFixture::new(ctx).await?;
    let filter = type_filter(&fixture.ty)?;
    let sort = format!("{CREATED_AT}+asc");
    let all = follow_pages(
        ctx,
        &[("filter", &filter), ("sort", &sort), ("page_size", "1")],
    )
    .await?;
    ensure_eq!(all, fixture.ids(&[1, 0, 2]), "records over the pages");
    Ok(())
}

async fn paging_complete(ctx: &Ctx) -> CheckResult {
    let ty = ctx.note_type().await?;
    for n in 0..7 {
        ctx.note(&ty, json!({"title": format!("page {n}")})).await?;
    }
    let filter = type_filter(&ty)?;
    let whole = ids(&ctx
        .list(&[("filter", &filter), ("page_size", "50")])
        .await?)?;
    let paged = follow_pages(ctx, &[("filter", &filter), ("page_size", "2")]).await?;
    ensure_eq!(whole.len(), 7, "records on one page");
    ensure_eq!(paged, whole, "records over pages of 2");
    Ok(())
}

/// Two records sharing a `created_at`, and one later; returns (type, equal date, ids).
async fn equal_dates(ctx: &Ctx) -> Result<(Value, &'static str, Vec<String>), String> {
    let ty = ctx.note_type().await?;
    let date = "2024-06-01T12:00:00.0000000Z";
    let mut created = Vec::new();
    for date in [
        date,
        date,
        "2024-06-02T12:00:00.0000000Z",
        "2024-05-31T12:00:00.0000000Z",
    ] {
        let record = ctx
            .create(json!({"type": ty, "content": {"title": "d"}, "created_at": date}))
            .await?;
        created.push(str_at(&record, "/id")?.to_string());
    }
    Ok((ty, date, created))
}

async fn bounded(
    ctx: &Ctx,
    ty: &Value,
    bound: (&str, String),
    order: &str,
) -> Result<Vec<String>, String> {
    let filter = type_filter(ty)?;
    let sort = format!("{CREATED_AT}+{order}");
    let mut listed = ids(&ctx
        .list(&[("filter", &filter), ("sort", &sort), (bound.0, &bound.1)])
        .await?)?;
    listed.sort();
    Ok(listed)
}

pub(super) fn sorted(mut ids: Vec<String>) -> Vec<String> {
    ids.sort();
    ids
}

async fn min_excludes_equal(ctx: &Ctx) -> CheckResult {
    let (ty, date, created) = equal_dates(ctx).await?;
    let listed = bounded(ctx, &ty, ("min", format!("\"{date}\"")), "asc").await?;
    ensure_eq!(listed, vec![created[2].clone()], "records above min");
    Ok(())
}

async fn max_excludes_equal(ctx: &Ctx) -> CheckResult {
    let (ty, date, created) = equal_dates(ctx).await?;
    let listed = bounded(ctx, &ty, ("max", format!("\"{date}\"")), "asc").await?;
    ensure_eq!(listed, vec![created[3].clone()], "records below max");
    Ok(())
}

async fn min_with_id(ctx: &Ctx) -> CheckResult {
    let (ty, date, created) = equal_dates(ctx).await?;
    let listed = bounded(
        ctx,
        &ty,
        ("min", format!("\"{date}\"+{}", "0".repeat(32))),
        "asc",
    )
    .await?;
    ensure_eq!(listed, sorted(created[..3].to_vec()), "records above min");
    Ok(())
}

async fn max_with_id(ctx: &Ctx) -> CheckResult {
    let (ty, date, created) = equal_dates(ctx).await?;
    let listed = bounded(
        ctx,
        &ty,
        ("max", format!("\"{date}\"+{}", "f".repeat(32))),
        "asc",
    )
    .await?;
    ensure_eq!(
        listed,
        sorted(vec![
            created[0].clone(),
            created[1].clone(),
            created[3].clone()
        ]),
        "records below max"
    );
    Ok(())
}

async fn bounds_in_desc_order(ctx: &Ctx) -> CheckResult {
    let (ty, date, created) = equal_dates(ctx).await?;
    let listed = bounded(ctx, &ty, ("min", format!("\"{date}\"")), "desc").await?;
    ensure_eq!(
        listed,
        vec![created[2].clone()],
        "records above min in descending order"
    );
    Ok(())
}

async fn page_start_exclusive(ctx: &Ctx) -> CheckResult {
    let fixture = SortFixture::new(ctx).await?;
    let start = format!("\"{}\"+{}", fixture.created_at[1], fixture.r[1]);
    let sort = format!("{CREATED_AT}+asc");
    let listed = fixture
        .list(ctx, &[("sort", &sort), ("page_start", &start)])
        .await?;
    ensure_eq!(listed, fixture.ids(&[0, 2]), "records after page_start");
    Ok(())
}

async fn min_malformed(ctx: &Ctx) -> CheckResult {
    expect_list_problem(ctx, &[("min", "yesterday")], INVALID_PARAMETER).await
}

pub(super) fn id(record: &Value) -> Result<String, String> {
    str_at(record, "/id").map(str::to_string)
}

async fn with_tombstone(ctx: &Ctx) -> Result<(Value, String, String), String> {
    let ty = ctx.note_type().await?;
    let live = id(&ctx.note(&ty, json!({"title": "live"})).await?)?;
    let gone = id(&ctx.note(&ty, json!({"title": "gone"})).await?)?;
    expect::status(
        &ctx.send(Call::delete(ctx.record_url(&gone)?).signed(&ctx.full))
            .await?,
        200,
    )?;
    Ok((ty, live, gone))
}

async fn tombstones_left_out(ctx: &Ctx) -> CheckResult {
    let (ty, live, _) = with_tombstone(ctx).await?;
    ensure_eq!(
        ids(&ctx.list(&[("filter", &type_filter(&ty)?)]).await?)?,
        vec![live],
        "records"
    );
    Ok(())
}

async fn include_deleted(ctx: &Ctx) -> CheckResult {
    let (ty, live, gone) = with_tombstone(ctx).await?;
    let listed = ids(&ctx
        .list(&[("filter", &type_filter(&ty)?), ("include_deleted", "true")])
        .await?)?;
    ensure_eq!(sorted(listed), sorted(vec![live, gone]), "records");
    Ok(())
}

async fn sources_self(ctx: &Ctx) -> CheckResult {
    let fresh = ctx.note_type().await?;
    let builtin = ctx.builtin_type("type").await?;
    let filter = format!(
        "{},($['id']=\"{}\",$['id']=\"{}\")",
        type_filter(&builtin)?,
        str_at(&fresh, "/record_id")?,
        str_at(&builtin, "/record_id")?
    );
    let listed = ids(&ctx
        .list(&[("filter", &filter), ("sources", "self")])
        .await?)?;
    ensure_eq!(
        listed,
        vec![str_at(&fresh, "/record_id")?.to_string()],
        "Type records with source self"
    );
    Ok(())
}

async fn sources_resolution(ctx: &Ctx) -> CheckResult {
    let page = ctx
        .list(&[("sources", "resolution"), ("page_size", "200")])
        .await?;
    let records = expect::array_at(&page, "/records")?;
    ensure!(
        records.len() >= 5,
        "only {} records with source resolution",
        records.len()
    );
    for record in records {
        ensure_eq!(record["source"], json!("resolution"), "source");
    }
    Ok(())
}

async fn sources_unknown(ctx: &Ctx) -> CheckResult {
    let listed = ids(&ctx.list(&[("sources", "no-such-source")]).await?)?;
    ensure!(
        listed.is_empty(),
        "records for an unknown source: {listed:?}"
    );
    Ok(())
}

/// Records labelled a, a, b in that order; returns (type, ids).
async fn labelled(ctx: &Ctx) -> Result<(Value, Vec<String>), String> {
    let ty = ctx.note_type().await?;
    let mut created = Vec::new();
    for label in ["a", "a", "b"] {
        created.push(id(&ctx
            .note(&ty, json!({"title": "l", "label": label}))
            .await?)?);
    }
    ctx.note(&ty, json!({"title": "unlabelled"})).await?;
    Ok((ty, created))
}

async fn distinct_first(ctx: &Ctx) -> CheckResult {
    let (ty, created) = labelled(ctx).await?;
    let filter = format!("{},{LABEL}=\"a\"", type_filter(&ty)?);
    let listed = ids(&ctx
        .list(&[("filter", &filter), ("distinct", LABEL)])
        .await?)?;
    ensure_eq!(
        listed,
        vec![created[1].clone()],
        "the newest record labelled a"
    );
    Ok(())
}

async fn distinct_before_paging(ctx: &Ctx) -> CheckResult {
    let (ty, created) = labelled(ctx).await?;
    let filter = format!(
        "{},($['content']['label']=\"a\",$['content']['label']=\"b\")",
        type_filter(&ty)?
    );
    let all = follow_pages(
        ctx,
        &[("filter", &filter), ("distinct", LABEL), ("page_size", "1")],
    )
    .await?;
    ensure_eq!(
        all,
        vec![created[2].clone(), created[1].clone()],
        "records over the pages"
    );
    Ok(())
}

async fn tag_sorted(ctx: &Ctx, order: &str) -> Result<(Vec<String>, Vec<String>), String> {
    let ty = ctx.note_type().await?;
    let mut created = Vec::new();
    for label in ["m", "z", "a"] {
        created.push(id(&ctx
            .note(&ty, json!({"title": "t", "label": label}))
            .await?)?);
    }
    ctx.note(&ty, json!({"title": "unlabelled"})).await?;
    let sort = format!("{LABEL}+{order}");
    let listed = ids(&ctx
        .list(&[("filter", &type_filter(&ty)?), ("sort", &sort)])
        .await?)?;
    Ok((created, listed))
}

async fn tag_sort_asc(ctx: &Ctx) -> CheckResult {
    let (created, listed) = tag_sorted(ctx, "asc").await?;
    ensure_eq!(
        listed,
        vec![created[2].clone(), created[0].clone(), created[1].clone()],
        "order"
    );
    Ok(())
}

async fn tag_sort_desc(ctx: &Ctx) -> CheckResult {
    let (created, listed) = tag_sorted(ctx, "desc").await?;
    ensure_eq!(
        listed,
        vec![created[1].clone(), created[0].clone(), created[2].clone()],
        "order"
    );
    Ok(())
}

async fn tag_sort_leaves_out(ctx: &Ctx) -> CheckResult {
    let (_, listed) = tag_sorted(ctx, "asc").await?;
    ensure_eq!(listed.len(), 3, "records listed under a tag sort");
    Ok(())
}

async fn proxy_to_self(ctx: &Ctx) -> CheckResult {
    ctx.list(&[("proxy_to", ctx.entity())]).await.map(drop)
}

/// `proxy_to` asks the entity's server (docs/federation.md §5); a name
/// under `.invalid` (RFC 2606) has none.
async fn proxy_to_other(ctx: &Ctx) -> CheckResult {
    let other = format!("other-{}.invalid", &record_id()[..8]);
    expect_list_problem(ctx, &[("proxy_to", &other)], PEER_UNREACHABLE).await
}

async fn proxy_to_invalid(ctx: &Ctx) -> CheckResult {
    expect_list_problem(ctx, &[("proxy_to", "not an entity")], INVALID_PARAMETER).await
}

async fn unknown_parameter(ctx: &Ctx) -> CheckResult {
    ctx.list(&[("colour", "blue")]).await.map(drop)
}
