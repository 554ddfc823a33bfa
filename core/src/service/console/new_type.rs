//! The console's New-type form: a name and a few fields, each a kind a
//! person picks by what it holds, made into a Type record's content whose
//! schema the page shows before it is saved. Saved as `folio type add`
//! does ([`crate::write::TypeAddition`]): the same content again is the type
//! already there, changed content a new version of the type of that name.

use serde_json::{Map, Value, json};

use super::Form;
use crate::schema::RecordType;

/// How many fields the form offers at once; a type with more gets them as
/// a new version, or is written as JSON.
pub const NEW_TYPE_FIELDS: usize = 8;

/// The kinds a field may be: `(value, label)`, the first the default.
pub const FIELD_KINDS: [(&str, &str); 10] = [
    ("text", "Text (one line, up to 200 characters)"),
    ("long_text", "Long text"),
    ("tag", "Tag (filters and sorts can use it)"),
    ("int", "Whole number"),
    ("number", "Number"),
    ("boolean", "Yes or no"),
    ("entity", "A person (an entity)"),
    ("record", "A link to a record"),
    ("tags", "A list of tags"),
    ("file", "A file (a blob)"),
];

/// One field row of the form, as typed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldRow {
    /// The field's name; empty rows are left out.
    pub name: String,
    /// One of [`FIELD_KINDS`]' values.
    pub kind: String,
    /// Whether a record may leave it out.
    pub optional: bool,
}

/// The New-type form, as typed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewTypeForm {
    /// The type's name.
    pub name: String,
    /// [`NEW_TYPE_FIELDS`] rows.
    pub rows: Vec<FieldRow>,
}

impl NewTypeForm {
    /// An empty form, its first field a title.
    pub fn empty() -> Self {
        let mut rows = vec![FieldRow::default(); NEW_TYPE_FIELDS];
        rows[0].name = "title".to_owned();
        for row in &mut rows {
            row.kind = FIELD_KINDS[0].0.to_owned();
        }
        NewTypeForm {
            name: String::new(),
            rows,
        }
    }

    /// The form a post holds (`type_name`, `field_name.N`, `field_kind.N`,
    /// `field_optional.N`).
    pub fn from_form(form: &Form) -> Self {
        let rows = (0..NEW_TYPE_FIELDS)
            .map(|at| FieldRow {
                name: form
                    .get(&format!("field_name.{at}"))
                    .unwrap_or_default()
                    .trim()
                    .to_owned(),
                kind: form
                    .get(&format!("field_kind.{at}"))
                    .filter(|kind| FIELD_KINDS.iter().any(|(value, _)| value == kind))
                    .unwrap_or(FIELD_KINDS[0].0)
                    .to_owned(),
                optional: form.get(&format!("field_optional.{at}")) == Some("true"),
            })
            .collect();
        NewTypeForm {
            name: form.get("type_name").unwrap_or_default().trim().to_owned(),
            rows,
        }
    }

    /// The Type record's content the form makes, checked as a schema
    /// compiles; or what is wrong, in words.
    pub fn content(&self) -> Result<Value, String> {
        if self.name.is_empty() {
            return Err("Give the type a name, such as note or recipe.".to_owned());
        }
        let mut properties = Map::new();
        for row in self.rows.iter().filter(|row| !row.name.is_empty()) {
            if properties.contains_key(&row.name) {
                return Err(format!("Two fields are named `{}`.", row.name));
            }
            let mut schema = match row.kind.as_str() {
                "long_text" => json!({"type": "string"}),
                "tag" => json!({"type": "tag_link"}),
                "int" => json!({"type": "int"}),
                "number" => json!({"type": "number"}),
                "boolean" => json!({"type": "boolean"}),
                "entity" => json!({"type": "entity_link"}),
                "record" => json!({"type": "record_link"}),
                "tags" => json!({"type": "array", "items": {"type": "tag_link"}}),
                "file" => json!({"type": "blob_link"}),
                _ => json!({"type": "string", "max_length": 200}),
            };
            if row.optional {
                schema["optional"] = Value::Bool(true);
            }
            properties.insert(row.name.clone(), schema);
        }
        if properties.is_empty() {
            return Err("Give the type at least one field.".to_owned());
        }
        let content = json!({
            "name": self.name,
            "schema": {
                "type": "object",
                "properties": {"content": {"type": "object", "properties": properties}}
            }
        });
        RecordType::from_content(&content).map_err(|fault| fault.to_string())?;
        Ok(content)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(pairs: &[(&str, &str)]) -> Form {
        Form::of(pairs)
    }

    #[test]
    fn a_name_and_its_fields_make_a_type_that_compiles() {
        let typed = NewTypeForm::from_form(&form(&[
            ("type_name", " recipe "),
            ("field_name.0", "title"),
            ("field_kind.0", "text"),
            ("field_name.1", "servings"),
            ("field_kind.1", "int"),
            ("field_optional.1", "true"),
            ("field_name.3", "labels"),
            ("field_kind.3", "tags"),
            ("field_kind.4", "boolean"),
        ]));
        let content = typed.content().expect("compiles");
        assert_eq!(content["name"], "recipe");
        let properties = &content["schema"]["properties"]["content"]["properties"];
        assert_eq!(
            properties,
            &json!({
                "title": {"type": "string", "max_length": 200},
                "servings": {"type": "int", "optional": true},
                "labels": {"type": "array", "items": {"type": "tag_link"}}
            })
        );
    }

    #[test]
    fn what_cannot_make_a_type_is_said() {
        let unnamed = NewTypeForm::from_form(&form(&[("field_name.0", "title")]));
        assert!(unnamed.content().unwrap_err().contains("name"));
        let empty = NewTypeForm::from_form(&form(&[("type_name", "note")]));
        assert!(empty.content().unwrap_err().contains("at least one field"));
        let twice = NewTypeForm::from_form(&form(&[
            ("type_name", "note"),
            ("field_name.0", "a"),
            ("field_name.1", "a"),
        ]));
        assert!(twice.content().unwrap_err().contains("Two fields"));
        // An unknown kind is the first.
        let odd = NewTypeForm::from_form(&form(&[
            ("type_name", "note"),
            ("field_name.0", "a"),
            ("field_kind.0", "spaceship"),
        ]));
        assert_eq!(odd.rows[0].kind, "text");
    }
}
