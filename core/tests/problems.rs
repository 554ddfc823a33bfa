//! The problem catalogue against PROTOCOL.md §11, read from ../shared.

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

include!("support/shared_file.rs");

use std::collections::BTreeSet;

use folio_core::problem::{Problem, ProblemType, default_docs_url};
use serde_json::{Value, json};

/// `(type path, code)` for every row of the table in PROTOCOL.md §11,
/// and of the table of federation's types that extend it
/// (docs/federation.md §7).
fn documented_types() -> BTreeSet<(String, String)> {
    let mut documented = table_types(&shared_file!("PROTOCOL.md"), "## 11. Errors");
    documented.extend(table_types(
        include_str!("../../docs/federation.md"),
        "## 7. Problem types",
    ));
    documented
}

/// The `(type path, code)` rows of the table under `heading`.
fn table_types(document: &str, heading: &str) -> BTreeSet<(String, String)> {
    let section = document
        .split(heading)
        .nth(1)
        .expect("the section")
        .split("\n## ")
        .next()
        .unwrap();
    let quoted = |cell: &str| -> Vec<String> {
        cell.split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_owned)
            .collect()
    };
    let mut documented = BTreeSet::new();
    for row in section.lines().filter(|line| line.starts_with("| `")) {
        let cells: Vec<&str> = row.split('|').collect();
        let types: Vec<String> = quoted(cells[1])
            .into_iter()
            .filter(|t| t.contains('/'))
            .collect();
        let codes = quoted(cells[2]);
        for (i, type_path) in types.iter().enumerate() {
            let code = if cells[2].trim() == "same words" {
                let slug = type_path.split_once('-').expect("status-slug").1;
                slug.replace('-', "_")
            } else {
                // One code may stand for every type of its row.
                codes.get(i).or(codes.last()).expect("a code").clone()
            };
            documented.insert((type_path.clone(), code));
        }
    }
    documented
}

#[test]
fn the_catalogue_is_exactly_protocol_section_11() {
    let ours: BTreeSet<(String, String)> = ProblemType::ALL
        .iter()
        .map(|t| (t.type_path().to_owned(), t.code().to_owned()))
        .collect();
    assert_eq!(
        ours.len(),
        ProblemType::ALL.len(),
        "no type path is listed twice"
    );
    assert_eq!(ours, documented_types());
}

#[test]
fn each_type_path_carries_its_status() {
    for kind in ProblemType::ALL {
        let status = kind
            .type_path()
            .split('/')
            .nth(1)
            .unwrap()
            .split('-')
            .next()
            .unwrap();
        assert_eq!(status, kind.status().to_string(), "{kind:?}");
        assert!(!kind.title().is_empty());
    }
}

#[test]
fn problems_render_as_problem_json() {
    let problem = Problem::new(ProblemType::VersionConflict).with_detail("latest: abc");
    let body: Value =
        serde_json::from_str(&problem.to_json("https://alice.example/docs/")).unwrap();
    assert_eq!(
        body,
        json!({
            "type": "https://alice.example/docs/error-types/record/409-version-conflict",
            "status": 409,
            "title": ProblemType::VersionConflict.title(),
            "code": "version_conflict",
            "detail": "latest: abc"
        })
    );
    assert_eq!(
        default_docs_url("https://alice.example/"),
        "https://alice.example/docs"
    );
    let bare: Value =
        serde_json::from_str(&Problem::new(ProblemType::NotFound).to_json("https://x/docs"))
            .unwrap();
    assert!(bare.get("detail").is_none());
}

#[test]
fn json_endpoints_take_application_json_with_any_parameters() {
    use folio_core::service::http::check_json_content_type;
    for accepted in [
        "application/json",
        "application/json; charset=utf-8",
        "Application/JSON;charset=UTF-8",
    ] {
        assert!(
            check_json_content_type(Some(accepted), true).is_ok(),
            "{accepted}"
        );
    }
}

#[test]
fn a_request_without_a_body_needs_no_content_type() {
    use folio_core::service::http::check_json_content_type;
    assert!(check_json_content_type(None, false).is_ok());
    assert!(check_json_content_type(Some("text/plain"), false).is_ok());
}

#[test]
fn any_other_type_on_a_json_body_is_unsupported_media_type() {
    use folio_core::service::http::check_json_content_type;
    for refused in [
        Some("text/plain"),
        Some("application/jsonx"),
        Some("json"),
        None,
    ] {
        let problem = check_json_content_type(refused, true).expect_err("refused");
        assert_eq!(
            problem.kind,
            ProblemType::UnsupportedMediaType,
            "{refused:?}"
        );
        assert_eq!(problem.status(), 415);
    }
}
