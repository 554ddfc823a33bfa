//! The `filter` parameter of the list: each kind of condition, the
//! operators, and the grammar's limits (spec §4.1, PROTOCOL.md §7).

use serde_json::{Value, json};

use super::list::{expect_list_problem, id, sorted};
use super::{Check, CheckResult, check};
use crate::client::Call;
use crate::context::{Ctx, ids, record_link, record_value, type_filter, type_value, version_link};
use crate::expect::{self, INVALID_FILTER, INVALID_PARAMETER, ensure, ensure_eq, str_at};

pub fn checks() -> Vec<Check> {
    vec![
        check!("list/filter-author", filter_author),
        check!("list/filter-type", filter_type),
        check!("list/filter-tag", filter_tag),
        check!("list/filter-record-link", filter_record_link),
        check!(
            "list/filter-record-value-matches-version-link",
            filter_record_value_on_version
        ),
        check!("list/filter-version-link", filter_version_link),
        check!("list/filter-path-without-value", filter_no_value),
        check!("list/filter-value-anywhere", filter_value_anywhere),
        check!("list/filter-repeated-is-or", filter_repeated_or),
        check!("list/filter-parentheses-flip-to-or", filter_parentheses_or),
        check!(
            "list/filter-nested-parentheses-flip-back-to-and",
            filter_nested_parentheses
        ),
        check!("list/filter-id", filter_id),
        check!("list/filter-source", filter_source),
        check!("list/filter-space-for-plus-accepted", filter_space_for_plus),
        check!("list/filter-malformed-invalid-filter", filter_malformed),
        check!("list/filter-32-conditions-accepted", filter_32_conditions),
        check!(
            "list/filter-33-conditions-invalid-filter",
            filter_33_conditions
        ),
        check!(
            "list/filter-16-parameters-of-32-conditions-accepted",
            filter_16_parameters
        ),
        check!(
            "list/filter-17-parameters-invalid-parameter",
            filter_17_parameters
        ),
        check!("list/filter-8-parenthesis-levels-accepted", filter_8_levels),
        check!(
            "list/filter-9-parenthesis-levels-invalid-filter",
            filter_9_levels
        ),
        check!("list/filter-over-4-kib-invalid-filter", filter_too_long),
        check!(
            "list/filter-on-a-text-field-says-what-can-be-filtered",
            filter_text_field
        ),
        check!(
            "list/filter-outside-the-record-invalid-filter",
            filter_outside_record
        ),
        check!(
            "events/filter-on-a-text-field-invalid-filter",
            events_filter_text_field
        ),
    ]
}

/// A condition on a string field of the type the filter names can never
/// match (filters see links and tags): refused at its position, with the
/// field's kind and the type's filterable paths (PROTOCOL.md §7). The same
/// field written without its path, or a tag in single quotes, is named.
async fn filter_text_field(ctx: &Ctx) -> CheckResult {
    let ty = ctx.note_type().await?;
    ctx.note(&ty, json!({"title": "pinned thing"})).await?;
    let types = type_filter(&ty)?;
    let filter = format!("{types},$['content']['title']=\"pinned thing\"");
    let url = crate::context::with_query(ctx.records_url()?, &[("filter", &filter)]);
    let response = ctx.send(Call::get(url).signed(&ctx.full)).await?;
    let body = expect::problem_response(&response, INVALID_FILTER)?;
    let detail = str_at(&body, "/detail")?;
    let at = format!("at byte {}:", types.len() + 1);
    for expected in [
        at.as_str(),
        "`$['content']['title']` is a string",
        "`$['content']['label']` (a tag)",
        "`$['content']['person']` (an entity link)",
    ] {
        ensure!(
            detail.contains(expected),
            "the detail names {expected:?}: {detail}"
        );
    }
    for (typed, expected) in [
        ("title = 'pinned'", "names its path from `$`"),
        ("$['content']['label']='pinned'", "double quotes"),
    ] {
        let url = crate::context::with_query(ctx.records_url()?, &[("filter", typed)]);
        let response = ctx.send(Call::get(url).signed(&ctx.full)).await?;
        let body = expect::problem_response(&response, INVALID_FILTER)?;
        let detail = str_at(&body, "/detail")?;
        ensure!(detail.contains(expected), "{typed}: {detail}");
    }
    // A tag of the same type still filters.
    let tagged = filtered(ctx, &ty, "$['content']['label']=\"pinned\"").await?;
    ensure!(
        tagged.is_empty(),
        "no record is labelled pinned: {tagged:?}"
    );
    Ok(())
}

/// A path no record has (not the envelope's, not in the content) is
/// refused whatever the type.
async fn filter_outside_record(ctx: &Ctx) -> CheckResult {
    let url = crate::context::with_query(ctx.records_url()?, &[("filter", "$['title']=\"x\"")]);
    let response = ctx.send(Call::get(url).signed(&ctx.full)).await?;
    let body = expect::problem_response(&response, INVALID_FILTER)?;
    let detail = str_at(&body, "/detail")?;
    ensure!(
        detail.contains("no record has `$['title']`"),
        "the detail names the path: {detail}"
    );
    Ok(())
}

/// The event stream's filters are held to the same rule as the list's.
async fn events_filter_text_field(ctx: &Ctx) -> CheckResult {
    let ty = ctx.note_type().await?;
    let filter = format!("{},$['content']['title']=\"x\"", type_filter(&ty)?);
    let url = crate::context::with_query(ctx.events_url()?, &[("filter", &filter)]);
    let response = ctx.send(Call::get(url).signed(&ctx.full)).await?;
    let body = expect::problem_response(&response, INVALID_FILTER)?;
    let detail = str_at(&body, "/detail")?;
    ensure!(
        detail.contains("`$['content']['title']` is a string"),
        "the detail says what the field is: {detail}"
    );
    Ok(())
}

/// Lists one type's records with one more condition; returns the ids, sorted.
async fn filtered(ctx: &Ctx, ty: &Value, condition: &str) -> Result<Vec<String>, String> {
    let filter = format!("{},{condition}", type_filter(ty)?);
    Ok(sorted(ids(&ctx
        .list(&[("filter", &filter), ("page_size", "50")])
        .await?)?))
}

async fn filter_author(ctx: &Ctx) -> CheckResult {
    let ty = ctx.note_type().await?;
    let record = ctx.note(&ty, json!({"title": "mine"})).await?;
    let mine = filtered(ctx, &ty, &format!("$['author']={}", ctx.entity())).await?;
    ensure_eq!(mine, vec![id(&record)?], "records by the user");
    let others = filtered(ctx, &ty, "$['author']=someone-else.example").await?;
    ensure!(others.is_empty(), "records by another author: {others:?}");
    Ok(())
}

async fn filter_type(ctx: &Ctx) -> CheckResult {
    let (one, other) = (ctx.note_type().await?, ctx.note_type().await?);
    let record = ctx.note(&one, json!({"title": "one"})).await?;
    ctx.note(&other, json!({"title": "other"})).await?;
    let listed = ids(&ctx.list(&[("filter", &type_filter(&one)?)]).await?)?;
    ensure_eq!(listed, vec![id(&record)?], "records of the type");
    Ok(())
}

/// Three records of a fresh type: with tags [alpha, beta] and label "a", with
/// tags [beta] and label "b", and with neither (but a `ref` to the first).
async fn tagged(ctx: &Ctx) -> Result<(Value, [Value; 3]), String> {
    let ty = ctx.note_type().await?;
    let first = ctx
        .note(
            &ty,
            json!({"title": "1", "tags": ["alpha", "beta"], "label": "a"}),
        )
        .await?;
    let second = ctx
        .note(&ty, json!({"title": "2", "tags": ["beta"], "label": "b"}))
        .await?;
    let third = ctx
        .note(
            &ty,
            json!({"title": "3", "ref": record_link(&first)?, "pinned": version_link(&second)?}),
        )
        .await?;
    Ok((ty, [first, second, third]))
}

async fn filter_tag(ctx: &Ctx) -> CheckResult {
    let (ty, [first, ..]) = tagged(ctx).await?;
    let listed = filtered(ctx, &ty, "$['content']['tags'][*]=\"alpha\"").await?;
    ensure_eq!(listed, vec![id(&first)?], "records tagged alpha");
    Ok(())
}

async fn filter_record_link(ctx: &Ctx) -> CheckResult {
    let (ty, [first, _, third]) = tagged(ctx).await?;
    let listed = filtered(
        ctx,
        &ty,
        &format!("$['content']['ref']={}", record_value(&first)?),
    )
    .await?;
    ensure_eq!(listed, vec![id(&third)?], "records linking the first");
    Ok(())
}

async fn filter_record_value_on_version(ctx: &Ctx) -> CheckResult {
    let (ty, [_, second, third]) = tagged(ctx).await?;
    let listed = filtered(
        ctx,
        &ty,
        &format!("$['content']['pinned']={}", record_value(&second)?),
    )
    .await?;
    ensure_eq!(
        listed,
        vec![id(&third)?],
        "records with a version link to the second"
    );
    Ok(())
}

async fn filter_version_link(ctx: &Ctx) -> CheckResult {
    let (ty, [_, second, third]) = tagged(ctx).await?;
    let value = format!(
        "{}+{}",
        record_value(&second)?,
        str_at(&second, "/version/hash")?
    );
    let listed = filtered(ctx, &ty, &format!("$['content']['pinned']={value}")).await?;
    ensure_eq!(listed, vec![id(&third)?], "records linking that version");
    Ok(())
}

async fn filter_no_value(ctx: &Ctx) -> CheckResult {
    let (ty, [first, second, _]) = tagged(ctx).await?;
    let listed = filtered(ctx, &ty, "$['content']['ref']=").await?;
    ensure_eq!(
        listed,
        sorted(vec![id(&first)?, id(&second)?]),
        "records without ref"
    );
    Ok(())
}

async fn filter_value_anywhere(ctx: &Ctx) -> CheckResult {
    let (ty, [first, second, _]) = tagged(ctx).await?;
    let listed = filtered(ctx, &ty, "\"beta\"").await?;
    ensure_eq!(
        listed,
        sorted(vec![id(&first)?, id(&second)?]),
        "records with a beta link"
    );
    Ok(())
}

async fn filter_repeated_or(ctx: &Ctx) -> CheckResult {
    let (ty, [first, second, _]) = tagged(ctx).await?;
    let types = type_filter(&ty)?;
    let one = format!("{types},$['content']['label']=\"a\"");
    let two = format!("{types},$['content']['label']=\"b\"");
    let listed = sorted(ids(&ctx
        .list(&[("filter", &one), ("filter", &two)])
        .await?)?);
    ensure_eq!(
        listed,
        sorted(vec![id(&first)?, id(&second)?]),
        "records labelled a or b"
    );
    Ok(())
}

async fn filter_parentheses_or(ctx: &Ctx) -> CheckResult {
    let (ty, [first, second, _]) = tagged(ctx).await?;
    let listed = filtered(
        ctx,
        &ty,
        "($['content']['label']=\"a\",$['content']['label']=\"b\")",
    )
    .await?;
    ensure_eq!(
        listed,
        sorted(vec![id(&first)?, id(&second)?]),
        "records labelled a or b"
    );
    Ok(())
}

async fn filter_nested_parentheses(ctx: &Ctx) -> CheckResult {
    let (ty, [first, second, _]) = tagged(ctx).await?;
    // label b OR (alpha AND beta): the second by its label, the first by both tags.
    let condition = "($['content']['label']=\"b\",(\"alpha\",\"beta\"))";
    let listed = filtered(ctx, &ty, condition).await?;
    ensure_eq!(
        listed,
        sorted(vec![id(&first)?, id(&second)?]),
        "records matching"
    );
    let narrower = filtered(
        ctx,
        &ty,
        "($['content']['label']=\"x\",(\"alpha\",\"gamma\"))",
    )
    .await?;
    ensure!(narrower.is_empty(), "inner group read as OR: {narrower:?}");
    Ok(())
}

async fn filter_id(ctx: &Ctx) -> CheckResult {
    let (ty, [first, ..]) = tagged(ctx).await?;
    let listed = filtered(ctx, &ty, &format!("$['id']=\"{}\"", id(&first)?)).await?;
    ensure_eq!(listed, vec![id(&first)?], "records with that id");
    Ok(())
}

async fn filter_source(ctx: &Ctx) -> CheckResult {
    let (ty, records) = tagged(ctx).await?;
    let listed = filtered(ctx, &ty, "$['source']=\"self\"").await?;
    ensure_eq!(listed.len(), records.len(), "records with source self");
    let none = filtered(ctx, &ty, "$['source']=\"resolution\"").await?;
    ensure!(none.is_empty(), "records with source resolution: {none:?}");
    Ok(())
}

async fn filter_space_for_plus(ctx: &Ctx) -> CheckResult {
    let ty = ctx.note_type().await?;
    let record = ctx.note(&ty, json!({"title": "t"})).await?;
    let value = type_value(&ty)?.replace('+', "%20");
    let mut url = ctx.records_url()?;
    url.set_query(Some(&format!("filter=%24%5B%27type%27%5D%3D{value}")));
    let page = expect::json(&ctx.send(Call::get(url).signed(&ctx.full)).await?, 200)?;
    ensure_eq!(ids(&page)?, vec![id(&record)?], "records of the type");
    Ok(())
}

async fn filter_malformed(ctx: &Ctx) -> CheckResult {
    expect_list_problem(ctx, &[("filter", "($['author']=a.example")], INVALID_FILTER).await
}

fn conditions(count: usize) -> String {
    vec!["\"x\""; count].join(",")
}

async fn filter_32_conditions(ctx: &Ctx) -> CheckResult {
    ctx.list(&[("filter", &conditions(32))]).await.map(drop)
}

async fn filter_33_conditions(ctx: &Ctx) -> CheckResult {
    expect_list_problem(ctx, &[("filter", &conditions(33))], INVALID_FILTER).await
}

/// The most `filter` parameters a request may carry (PROTOCOL.md §13),
/// each as large as a filter may be.
async fn filter_16_parameters(ctx: &Ctx) -> CheckResult {
    let filter = conditions(32);
    let parameters = vec![("filter", filter.as_str()); 16];
    ctx.list(&parameters).await.map(drop)
}

async fn filter_17_parameters(ctx: &Ctx) -> CheckResult {
    let parameters = vec![("filter", "\"x\""); 17];
    expect_list_problem(ctx, &parameters, INVALID_PARAMETER).await
}

/// `"a",("b",(… "z"))` with `levels` nested pairs of parentheses.
pub fn nested(levels: usize) -> String {
    let mut filter = "\"x\"".to_string();
    for _ in 0..levels {
        filter = format!("\"x\",({filter})");
    }
    filter
}

async fn filter_8_levels(ctx: &Ctx) -> CheckResult {
    ctx.list(&[("filter", &nested(8))]).await.map(drop)
}

async fn filter_9_levels(ctx: &Ctx) -> CheckResult {
    expect_list_problem(ctx, &[("filter", &nested(9))], INVALID_FILTER).await
}

async fn filter_too_long(ctx: &Ctx) -> CheckResult {
    let filter = format!("$['author']={}.example", "a".repeat(4200));
    expect_list_problem(ctx, &[("filter", &filter)], INVALID_FILTER).await
}
