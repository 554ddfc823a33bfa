//! Search over records' text (a Folio extension, `docs/search.md`): a
//! list's `search` parameter finds the records holding every word in their
//! strings and tags, ranked or in the list's sort, with filters and
//! permissions, and follows every write.
//!
//! Each check makes its own type and searches for a word made from that
//! type's id, so that records of other checks never match.

use serde_json::{Value, json};

use super::list::expect_list_problem;
use super::records::delete;
use super::{Check, CheckResult, check};
use crate::client::Call;
use crate::context::{Ctx, ids, type_filter, with_query};
use crate::expect::{self, INVALID_PARAMETER, ensure, ensure_eq, str_at};

pub fn checks() -> Vec<Check> {
    vec![
        check!("search/ranked-by-bm25-in-one-page", ranked),
        check!("search/every-word-must-match", every_word),
        check!("search/case-and-accents-do-not-matter", folded),
        check!("search/with-a-sort-pages-in-that-order", sorted_pages),
        check!("search/combines-with-filters", with_filters),
        check!("search/tags-are-text-links-are-not", tags_and_links),
        check!("search/an-update-replaces-the-words", update_replaces),
        check!("search/deleted-records-are-not-found", deleted),
        check!("search/a-stranger-finds-only-public-records", stranger),
        check!("search/no-word-invalid-parameter", no_word),
        check!("search/with-distinct-invalid-parameter", with_distinct),
        check!(
            "search/ranked-with-page-start-invalid-parameter",
            ranked_page_start
        ),
        check!("search/on-events-invalid-parameter", on_events),
    ]
}

/// A fresh note type and a word nothing else in the store holds.
async fn fresh(ctx: &Ctx) -> Result<(Value, String), String> {
    let ty = ctx.note_type().await?;
    let word = format!("w{}", &str_at(&ty, "/record_id")?[..12]);
    Ok((ty, word))
}

async fn note(ctx: &Ctx, ty: &Value, title: &str) -> Result<String, String> {
    Ok(str_at(&ctx.note(ty, json!({"title": title})).await?, "/id")?.to_string())
}

async fn search(ctx: &Ctx, words: &str, more: &[(&str, &str)]) -> Result<Value, String> {
    let mut parameters = vec![("search", words)];
    parameters.extend_from_slice(more);
    ctx.list(&parameters).await
}

async fn ranked(ctx: &Ctx) -> CheckResult {
    let (ty, w) = fresh(ctx).await?;
    let long = note(ctx, &ty, &format!("a long title that mentions {w} once")).await?;
    let short = note(ctx, &ty, &format!("{w} now")).await?;
    let twice = note(ctx, &ty, &format!("{w} and {w} again")).await?;
    let page = search(ctx, &w, &[]).await?;
    ensure_eq!(
        ids(&page)?,
        vec![twice.clone(), short.clone(), long.clone()],
        "by BM25: the word twice in four words, once in two, once in seven"
    );
    // Its best matches, one page: no next page, whatever the page size.
    let page = search(ctx, &w, &[("page_size", "2")]).await?;
    ensure_eq!(ids(&page)?, vec![twice, short], "the two best");
    ensure!(
        page.get("next_page").is_none_or(Value::is_null),
        "a ranked search is one page, yet next_page is {}",
        page["next_page"]
    );
    Ok(())
}

async fn every_word(ctx: &Ctx) -> CheckResult {
    let (ty, w) = fresh(ctx).await?;
    let both = note(ctx, &ty, &format!("{w} shopping list")).await?;
    note(ctx, &ty, &format!("{w} reading list")).await?;
    ensure_eq!(
        ids(&search(ctx, &format!("shopping {w}"), &[]).await?)?,
        vec![both],
        "the one record holding both words"
    );
    ensure_eq!(
        ids(&search(ctx, &format!("{w} nowherewordzz"), &[]).await?)?,
        Vec::<String>::new(),
        "no record holds a word nothing has"
    );
    Ok(())
}

async fn folded(ctx: &Ctx) -> CheckResult {
    let (ty, w) = fresh(ctx).await?;
    let id = note(ctx, &ty, &format!("Café {w}")).await?;
    ensure_eq!(
        ids(&search(ctx, &format!("CAFE {}", w.to_uppercase()), &[]).await?)?,
        vec![id],
        "Café found as CAFE"
    );
    Ok(())
}

async fn sorted_pages(ctx: &Ctx) -> CheckResult {
    let (ty, w) = fresh(ctx).await?;
    let mut created = Vec::new();
    for n in 0..3 {
        created.push(note(ctx, &ty, &format!("{w} {n}")).await?);
    }
    let sort = ("sort", "$['received_at']+asc");
    let mut page = search(ctx, &w, &[sort, ("page_size", "2")]).await?;
    let mut all = ids(&page)?;
    for _ in 0..5 {
        let Some(next) = page["next_page"].as_str() else {
            break;
        };
        let url = url::Url::parse(&format!("{}{next}", ctx.records_url()?))
            .map_err(|error| format!("records URL + next_page: {error}"))?;
        page = expect::json(&ctx.send(Call::get(url).signed(&ctx.full)).await?, 200)?;
        all.extend(ids(&page)?);
    }
    ensure_eq!(all, created, "every match, oldest first, over two pages");
    Ok(())
}

async fn with_filters(ctx: &Ctx) -> CheckResult {
    let (ty, w) = fresh(ctx).await?;
    let other = ctx.note_type().await?;
    let mine = note(ctx, &ty, &format!("{w} here")).await?;
    note(ctx, &other, &format!("{w} elsewhere")).await?;
    ensure_eq!(
        ids(&search(ctx, &w, &[("filter", &type_filter(&ty)?)]).await?)?,
        vec![mine],
        "only the filtered type's record"
    );
    Ok(())
}

async fn tags_and_links(ctx: &Ctx) -> CheckResult {
    let (ty, w) = fresh(ctx).await?;
    let tagged = ctx
        .note(&ty, json!({"title": "untitled", "label": w}))
        .await?;
    let linked = ctx
        .note(
            &ty,
            json!({"title": format!("{w} call"), "person": {"entity": ctx.entity()}}),
        )
        .await?;
    ensure_eq!(
        ids(&search(ctx, &w, &[("sort", "$['received_at']+asc")]).await?)?,
        vec![
            str_at(&tagged, "/id")?.to_string(),
            str_at(&linked, "/id")?.to_string()
        ],
        "a tag is text"
    );
    // The entity link's name is not text: searching it and the word
    // finds nothing beyond what the word alone does.
    let entity_word = ctx
        .entity()
        .split('.')
        .next()
        .unwrap_or_default()
        .to_owned();
    let found = ids(&search(ctx, &format!("{w} {entity_word}"), &[]).await?)?;
    ensure!(
        !found.contains(&str_at(&linked, "/id")?.to_string()),
        "the linked entity's name {entity_word:?} was read as text"
    );
    Ok(())
}

async fn update_replaces(ctx: &Ctx) -> CheckResult {
    let (ty, w) = fresh(ctx).await?;
    let id = note(ctx, &ty, &format!("{w} draftword")).await?;
    let call = Call::put(ctx.record_url(&id)?)
        .json(&json!({"content": {"title": format!("{w} finalword")}}))
        .signed(&ctx.full);
    expect::status(&ctx.send(call).await?, 200)?;
    ensure_eq!(
        ids(&search(ctx, &format!("{w} draftword"), &[]).await?)?,
        Vec::<String>::new(),
        "the replaced version's word"
    );
    ensure_eq!(
        ids(&search(ctx, &format!("{w} finalword"), &[]).await?)?,
        vec![id],
        "the latest version's word"
    );
    Ok(())
}

async fn deleted(ctx: &Ctx) -> CheckResult {
    let (ty, w) = fresh(ctx).await?;
    let id = note(ctx, &ty, &format!("{w} gone")).await?;
    expect::status(&delete(ctx, &id, None).await?, 200)?;
    ensure_eq!(
        ids(&search(ctx, &w, &[("include_deleted", "true")]).await?)?,
        Vec::<String>::new(),
        "a tombstone has no text"
    );
    Ok(())
}

async fn stranger(ctx: &Ctx) -> CheckResult {
    let (ty, w) = fresh(ctx).await?;
    let public = ctx
        .public_note(&ty, json!({"title": format!("{w} open")}))
        .await?;
    note(ctx, &ty, &format!("{w} closed")).await?;
    let url = with_query(ctx.records_url()?, &[("search", &w)]);
    let page = expect::json(&ctx.send(Call::get(url)).await?, 200)?;
    ensure_eq!(
        ids(&page)?,
        vec![str_at(&public, "/id")?.to_string()],
        "an unsigned search finds the public record alone"
    );
    Ok(())
}

async fn no_word(ctx: &Ctx) -> CheckResult {
    expect_list_problem(ctx, &[("search", " ?! ")], INVALID_PARAMETER).await
}

async fn with_distinct(ctx: &Ctx) -> CheckResult {
    expect_list_problem(
        ctx,
        &[("search", "word"), ("distinct", "$['content']['label']")],
        INVALID_PARAMETER,
    )
    .await
}

async fn ranked_page_start(ctx: &Ctx) -> CheckResult {
    expect_list_problem(
        ctx,
        &[
            ("search", "word"),
            ("page_start", "\"2024-01-01T00:00:00.0000000Z\""),
        ],
        INVALID_PARAMETER,
    )
    .await
}

async fn on_events(ctx: &Ctx) -> CheckResult {
    let url = with_query(ctx.events_url()?, &[("search", "word")]);
    expect::problem_response(
        &ctx.send(Call::get(url).signed(&ctx.full)).await?,
        INVALID_PARAMETER,
    )
    .map(drop)
}
