//! Records edited through a form built from their type's schema: one
//! control per top-level content field ([`Schema::form_fields`]), read back
//! into the record's content, with what cannot be read said beside its
//! field. The JSON editor stays, a link away, for permissions and for what
//! a form does not show.
//!
//! [`Schema::form_fields`]: crate::schema::Schema::form_fields

use serde_json::{Map, Number, Value};

use super::Form;
use crate::schema::{FormField, FormInput, TextRules};

/// The longest string a one-line input is kept for; longer (or unbounded)
/// strings get a text area (a tag is always one line).
const ONE_LINE_CHARS: u64 = 200;

/// The form name of a field's control.
pub fn control_name(field: &str) -> String {
    format!("field.{field}")
}

/// One field of the form as the page shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldView {
    /// The property's name, its label.
    pub name: String,
    /// The control's form name and id.
    pub control: String,
    /// `input`, `textarea` or `select`.
    pub element: &'static str,
    /// An input's `type`: `text`, `number`.
    pub input_type: &'static str,
    /// A number input's `step`: `1` or `any`.
    pub step: &'static str,
    /// The value shown.
    pub value: String,
    /// A select's options: `(value, label)`.
    pub options: Vec<(String, String)>,
    /// A string's most characters.
    pub max_length: Option<u64>,
    /// What the field takes, in words.
    pub help: String,
    /// Why what was typed could not be saved, if so.
    pub error: Option<String>,
    /// Whether a record must have it.
    pub required: bool,
}

/// The records a record-link field offers, by field name: `(value,
/// label)`, the value `{entity}+{record_id}` ([`record_choice`]).
pub type RecordChoices = Vec<(String, Vec<(String, String)>)>;

/// A record as a record-link field offers it: `({entity}+{record_id}, its
/// first text and id)`.
pub fn record_choice(record: &crate::model::Record) -> (String, String) {
    const MAX_CHARS: usize = 60;
    let text = (record.content())
        .and_then(|content| {
            content
                .as_map()
                .values()
                .find_map(Value::as_str)
                .map(str::to_owned)
        })
        .unwrap_or_default();
    let short: String = text.chars().take(MAX_CHARS).collect();
    let id = record.id.to_string();
    let label = match short.is_empty() {
        true => id.clone(),
        false => format!("{short} · {}", &id[..8]),
    };
    (format!("{}+{id}", record.author.entity), label)
}

/// The views of `fields`, showing `values` (by field name), `errors`, and
/// the records each record-link field offers.
pub fn field_views(
    fields: &[FormField],
    values: &[(String, String)],
    errors: &[(String, String)],
    records: &RecordChoices,
) -> Vec<FieldView> {
    fields
        .iter()
        .map(|field| {
            let value = (values.iter())
                .find(|(name, _)| *name == field.name)
                .map(|(_, value)| value.clone())
                .unwrap_or_default();
            let error = (errors.iter())
                .find(|(name, _)| *name == field.name)
                .map(|(_, message)| message.clone());
            let mut view = FieldView {
                name: field.name.clone(),
                control: control_name(&field.name),
                element: "input",
                input_type: "text",
                step: "1",
                value,
                options: Vec::new(),
                max_length: None,
                help: String::new(),
                error,
                required: !field.optional,
            };
            let unset = || (String::new(), "Not set".to_owned());
            match &field.input {
                FormInput::Text(rules) | FormInput::Tag(rules) => {
                    let tag = matches!(field.input, FormInput::Tag(_));
                    view.help = text_help(rules, tag);
                    view.max_length = rules.max_length;
                    if let Some(choices) = &rules.choices {
                        view.element = "select";
                        view.options = field.optional.then(unset).into_iter().collect();
                        view.options
                            .extend(choices.iter().map(|c| (c.clone(), c.clone())));
                    } else if !tag && rules.max_length.is_none_or(|max| max > ONE_LINE_CHARS) {
                        view.element = "textarea";
                    }
                }
                FormInput::Integer { min, max, choices } => {
                    view.help = bounds_help("A whole number", *min, *max);
                    view.input_type = "number";
                    if let Some(choices) = choices {
                        view.element = "select";
                        view.options = field.optional.then(unset).into_iter().collect();
                        view.options
                            .extend(choices.iter().map(|c| (c.to_string(), c.to_string())));
                    }
                }
                FormInput::Number { min, max } => {
                    view.help = bounds_help("A number", *min, *max);
                    view.input_type = "number";
                    view.step = "any";
                }
                FormInput::Boolean => {
                    view.element = "select";
                    view.options = field.optional.then(unset).into_iter().collect();
                    view.options.extend([
                        ("true".to_owned(), "Yes".to_owned()),
                        ("false".to_owned(), "No".to_owned()),
                    ]);
                    view.help = "Yes or no.".to_owned();
                }
                FormInput::Entity => {
                    view.help = "An entity's name, such as alice.example.".to_owned();
                }
                FormInput::Record { .. } => {
                    view.element = "select";
                    view.options = field.optional.then(unset).into_iter().collect();
                    let offered = (records.iter())
                        .find(|(name, _)| *name == field.name)
                        .map(|(_, choices)| choices.as_slice())
                        .unwrap_or_default();
                    view.options.extend(offered.iter().cloned());
                    // A record it links that is not among the offered keeps its place.
                    if !view.value.is_empty() && !view.options.iter().any(|(v, _)| *v == view.value)
                    {
                        view.options.push((view.value.clone(), view.value.clone()));
                    }
                    view.help = "A record of its type, picked from the newest.".to_owned();
                }
                FormInput::Lines { item, tags } => {
                    view.element = "textarea";
                    let what = match tags {
                        true => "Tags",
                        false => "Texts",
                    };
                    view.help = match item.max_length {
                        Some(max) => format!("{what}, one a line, each at most {max} characters."),
                        None => format!("{what}, one a line."),
                    };
                }
                FormInput::Json => {
                    view.element = "textarea";
                    view.help = "Its value as JSON (a link, a list, an object…).".to_owned();
                }
            }
            if field.optional {
                view.help
                    .push_str(" Optional: leave it empty to leave it out.");
            }
            view
        })
        .collect()
}

fn text_help(rules: &TextRules, tag: bool) -> String {
    let what = match tag {
        true => "A tag (filters and sorts can use it)",
        false => "Text",
    };
    match (rules.min_length, rules.max_length) {
        (Some(min), Some(max)) => format!("{what}, {min} to {max} characters."),
        (None, Some(max)) => format!("{what}, at most {max} characters."),
        (Some(min), None) => format!("{what}, at least {min} characters."),
        (None, None) => format!("{what}."),
    }
}

fn bounds_help<T: std::fmt::Display>(what: &str, min: Option<T>, max: Option<T>) -> String {
    match (min, max) {
        (Some(min), Some(max)) => format!("{what} from {min} to {max}."),
        (Some(min), None) => format!("{what}, at least {min}."),
        (None, Some(max)) => format!("{what}, at most {max}."),
        (None, None) => format!("{what}."),
    }
}

/// What each field of `content` shows, by field name.
pub fn values_of(fields: &[FormField], content: &Map<String, Value>) -> Vec<(String, String)> {
    fields
        .iter()
        .filter_map(|field| {
            let value = content.get(&field.name)?;
            let shown = match (&field.input, value) {
                (FormInput::Text(_) | FormInput::Tag(_), Value::String(text)) => text.clone(),
                (FormInput::Integer { .. } | FormInput::Number { .. }, Value::Number(n)) => {
                    n.to_string()
                }
                (FormInput::Boolean, Value::Bool(b)) => b.to_string(),
                (FormInput::Record { .. }, Value::Object(link)) => {
                    match (link.get("entity"), link.get("record_id")) {
                        (Some(Value::String(entity)), Some(Value::String(id))) => {
                            format!("{entity}+{id}")
                        }
                        _ => String::new(),
                    }
                }
                (FormInput::Lines { .. }, Value::Array(items))
                    if items
                        .iter()
                        .all(|item| item.as_str().is_some_and(|s| !s.contains('\n'))) =>
                {
                    let lines: Vec<&str> = items.iter().filter_map(Value::as_str).collect();
                    lines.join("\n")
                }
                // A list the lines cannot show as it is (an item on several
                // lines) is left empty: the JSON editor shows it.
                (FormInput::Entity, Value::Object(link)) => match link.get("entity") {
                    Some(Value::String(entity)) if link.len() == 1 => entity.clone(),
                    _ => serde_json::to_string(value).unwrap_or_default(),
                },
                _ => serde_json::to_string_pretty(value).unwrap_or_default(),
            };
            Some((field.name.clone(), shown))
        })
        .collect()
}

/// What the form's controls hold, by field name.
pub fn values_typed(fields: &[FormField], form: &Form) -> Vec<(String, String)> {
    fields
        .iter()
        .map(|field| {
            let typed = form.get(&control_name(&field.name)).unwrap_or_default();
            (field.name.clone(), typed.to_owned())
        })
        .collect()
}

/// The content the form's controls make, or what could not be read, by
/// field. An empty optional field is left out; everything else is left for
/// the type's schema to check.
pub fn content_from_form(
    fields: &[FormField],
    form: &Form,
) -> Result<Map<String, Value>, Vec<(String, String)>> {
    let mut content = Map::new();
    let mut errors = Vec::new();
    for field in fields {
        let typed = form.get(&control_name(&field.name)).unwrap_or_default();
        let trimmed = typed.trim();
        if trimmed.is_empty() && field.optional {
            continue;
        }
        let value = match &field.input {
            // Text is kept as typed (a browser sends CR LF for a new line).
            FormInput::Text(_) | FormInput::Tag(_) => {
                Ok(Value::String(typed.replace("\r\n", "\n")))
            }
            FormInput::Integer { .. } => trimmed
                .parse::<i64>()
                .map(Value::from)
                .map_err(|_| "This is not a whole number.".to_owned()),
            FormInput::Number { .. } => trimmed
                .parse::<f64>()
                .ok()
                .and_then(Number::from_f64)
                .map(Value::Number)
                .ok_or_else(|| "This is not a number.".to_owned()),
            FormInput::Boolean => match trimmed {
                "true" => Ok(Value::Bool(true)),
                "false" => Ok(Value::Bool(false)),
                _ => Err("Choose yes or no.".to_owned()),
            },
            FormInput::Entity => Ok(serde_json::json!({ "entity": trimmed })),
            FormInput::Record { .. } => match trimmed.split_once('+') {
                Some((entity, record_id)) => {
                    Ok(serde_json::json!({ "entity": entity, "record_id": record_id }))
                }
                None => Err("Pick a record.".to_owned()),
            },
            FormInput::Lines { .. } => Ok(Value::Array(
                typed
                    .lines()
                    .map(str::trim)
                    .filter(|line| !line.is_empty())
                    .map(|line| Value::String(line.to_owned()))
                    .collect(),
            )),
            FormInput::Json => {
                serde_json::from_str(trimmed).map_err(|error| format!("This is not JSON: {error}."))
            }
        };
        match value {
            Ok(value) => {
                content.insert(field.name.clone(), value);
            }
            Err(message) => errors.push((field.name.clone(), message)),
        }
    }
    match errors.is_empty() {
        true => Ok(content),
        false => Err(errors),
    }
}

/// The top-level content field a violation's path (`$['content']['name']…`)
/// is in, if any.
pub fn field_of_path(path: &str) -> Option<&str> {
    let rest = path.strip_prefix("$['content']['")?;
    let end = rest.find("']")?;
    Some(&rest[..end])
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::schema::Schema;

    fn schema() -> Schema {
        Schema::compile(&json!({
            "type": "object",
            "properties": {"content": {"type": "object", "properties": {
                "title": {"type": "string", "max_length": 100},
                "body": {"type": "string", "optional": true},
                "stars": {"type": "int", "min": 0, "max": 5, "optional": true},
                "done": {"type": "boolean"},
                "label": {"type": "tag_link", "enum": ["home", "work"], "optional": true},
                "person": {"type": "entity_link", "optional": true},
                "tags": {"type": "array", "items": {"type": "tag_link"}, "optional": true},
                "raw": {"type": "map", "values": {"type": "int"}, "optional": true}
            }}}
        }))
        .expect("compiles")
    }

    fn form(pairs: &[(&str, &str)]) -> Form {
        Form::of(pairs)
    }

    #[test]
    fn each_plain_field_is_a_control_and_the_rest_json() {
        let fields = schema().form_fields();
        let views = field_views(&fields, &[], &[], &Vec::new());
        let shape: Vec<(&str, &str)> = views.iter().map(|v| (v.name.as_str(), v.element)).collect();
        assert_eq!(
            shape,
            [
                ("title", "input"),
                ("body", "textarea"),
                ("stars", "input"),
                ("done", "select"),
                ("label", "select"),
                ("person", "input"),
                ("tags", "textarea"),
                ("raw", "textarea")
            ]
        );
        assert_eq!(views[0].max_length, Some(100));
        assert_eq!(
            views[2].help,
            "A whole number from 0 to 5. Optional: leave it empty to leave it out."
        );
    }

    #[test]
    fn a_form_reads_back_into_content_and_says_what_it_cannot_read() {
        let fields = schema().form_fields();
        let content = content_from_form(
            &fields,
            &form(&[
                ("field.title", "Groceries"),
                ("field.body", "milk\r\neggs"),
                ("field.stars", ""),
                ("field.done", "false"),
                ("field.label", "home"),
                ("field.person", " bob.example "),
                ("field.tags", "a\r\n\r\n b \n"),
                ("field.raw", r#"{"x": 1}"#),
            ]),
        )
        .expect("reads");
        assert_eq!(
            Value::Object(content.clone()),
            json!({"title": "Groceries", "body": "milk\neggs", "done": false, "label": "home",
                   "person": {"entity": "bob.example"}, "tags": ["a", "b"], "raw": {"x": 1}})
        );
        // And shows again what it read.
        let values = values_of(&fields, &content);
        assert!(values.contains(&("person".into(), "bob.example".into())));
        assert!(values.contains(&("done".into(), "false".into())));
        assert!(values.contains(&("tags".into(), "a\nb".into())));

        let errors = content_from_form(
            &fields,
            &form(&[
                ("field.title", "x"),
                ("field.stars", "2.5"),
                ("field.done", ""),
                ("field.raw", "["),
            ]),
        )
        .expect_err("refused");
        let names: Vec<&str> = errors.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(names, ["stars", "done", "raw"]);
    }

    #[test]
    fn a_record_link_of_a_type_is_picked_from_the_records_offered() {
        let schema = Schema::compile(&json!({
            "type": "object",
            "properties": {"content": {"type": "object", "properties": {
                "project": {"type": "record_link", "optional": true, "record_types": [
                    {"entity": "alice.example", "record_id": "0123456789abcdef0123456789abcdef"}
                ]},
                "any": {"type": "record_link", "optional": true}
            }}}
        }))
        .expect("compiles");
        let fields = schema.form_fields();
        assert!(matches!(fields[0].input, FormInput::Record { .. }));
        assert_eq!(
            fields[1].input,
            FormInput::Json,
            "a link to any record is JSON"
        );
        let offered: RecordChoices = vec![(
            "project".into(),
            vec![("alice.example+aa".into(), "Garden · aa".into())],
        )];
        let linked = "alice.example+bb".to_owned();
        let views = field_views(
            &fields,
            &[("project".into(), linked.clone())],
            &[],
            &offered,
        );
        let values: Vec<&str> = views[0].options.iter().map(|(v, _)| v.as_str()).collect();
        assert_eq!(
            values,
            ["", "alice.example+aa", linked.as_str()],
            "the linked record stays"
        );
        let content = content_from_form(&fields, &form(&[("field.project", "alice.example+aa")]))
            .expect("reads");
        assert_eq!(
            content["project"],
            json!({"entity": "alice.example", "record_id": "aa"})
        );
        let shown = values_of(&fields, &content);
        assert_eq!(
            shown,
            [("project".to_owned(), "alice.example+aa".to_owned())]
        );
    }

    #[test]
    fn a_violation_names_its_top_level_field() {
        assert_eq!(field_of_path("$['content']['title']"), Some("title"));
        assert_eq!(field_of_path("$['content']['tags'][2]"), Some("tags"));
        assert_eq!(field_of_path("$['permissions']"), None);
    }
}
