//! Properties over generated inputs: round trips hold, and no input, however
//! hostile, makes the parsers panic. Native only (proptest).

use folio_core::auth::BearerToken;
use folio_core::canonical::to_canonical_json;
use folio_core::dialect::Dialect;
use folio_core::model::{RecordDate, RecordId, VersionHash};
use proptest::prelude::*;
use serde_json::Value;

/// 0000-01-01T00:00:00Z to 9999-12-31T23:59:59.9999999Z, in 100 ns ticks.
const TICKS: std::ops::RangeInclusive<i64> =
    -621_672_192_000_000_000..=2_534_023_008_000_000_000 - 1;

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        any::<String>().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            prop::collection::btree_map(any::<String>(), inner, 0..8)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn dates_round_trip_through_their_wire_form(ticks in TICKS) {
        let date = RecordDate::from_unix_ticks(ticks).unwrap();
        let wire = date.to_string();
        prop_assert_eq!(wire.len(), 28);
        prop_assert_eq!(wire.parse::<RecordDate>().unwrap(), date);
        let millis = date.millis_form().to_string();
        prop_assert_eq!(millis.parse::<RecordDate>().unwrap(), date.truncated_to_millis());
    }

    #[test]
    fn date_parsing_never_panics(text in "\\PC{0,40}") {
        let _ = text.parse::<RecordDate>();
    }

    #[test]
    fn ids_round_trip_through_hex(bytes in any::<[u8; 16]>(), hash in any::<[u8; 32]>()) {
        let id = RecordId::from_bytes(bytes);
        prop_assert_eq!(id.to_string().parse::<RecordId>().unwrap(), id);
        let hash = VersionHash::from_bytes(hash);
        prop_assert_eq!(hash.to_string().parse::<VersionHash>().unwrap(), hash);
    }

    #[test]
    fn canonical_json_is_a_fixed_point(value in json_value()) {
        let canonical = to_canonical_json(&value);
        let reparsed: Value = serde_json::from_str(&canonical).unwrap();
        prop_assert_eq!(to_canonical_json(&reparsed), canonical);
    }

    #[test]
    fn authorization_parsing_never_panics(text in "\\PC{0,200}") {
        let _ = Dialect::Svc.parse_authorization(&text);
        let _ = Dialect::Svc.parse_authorization(&format!("SVC {text}"));
    }

    #[test]
    fn authorization_parsing_survives_near_valid_headers(
        params in prop::collection::vec(("[a-zA-Z]{0,10}", "[ -~]{0,20}"), 0..8),
        separator in "[ ,\t]{0,3}",
    ) {
        let body: Vec<String> = params.iter().map(|(name, value)| format!("{name}=\"{value}\"")).collect();
        let _ = Dialect::Svc.parse_authorization(&format!("SVC {}", body.join(&separator)));
    }

    #[test]
    fn bearer_parsing_never_panics(token in "\\PC{0,200}", query in "[ -~]{0,100}") {
        let _ = BearerToken::parse(&token);
        let _ = BearerToken::from_target(&format!("/x?{query}"));
    }
}
