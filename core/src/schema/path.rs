//! JSON paths in bracket form (`$['content']['images'][2]`), as schema faults
//! and violations report them.

use std::fmt::{self, Write};

#[derive(Debug, Clone, Copy)]
enum Segment<'a> {
    Key(&'a str),
    Index(usize),
}

/// A path being walked: segments are pushed on the way down and popped on the
/// way up, borrowing the keys, and it is written out only when something is
/// reported.
#[derive(Debug, Clone, Default)]
pub(crate) struct JsonPath<'a>(Vec<Segment<'a>>);

impl<'a> JsonPath<'a> {
    pub(crate) fn root() -> Self {
        Self::default()
    }

    /// The path of the keys given, from the root.
    pub(crate) fn of_keys(keys: &[&'a str]) -> Self {
        Self(keys.iter().map(|key| Segment::Key(key)).collect())
    }

    pub(crate) fn push_key(&mut self, key: &'a str) {
        self.0.push(Segment::Key(key));
    }

    pub(crate) fn push_index(&mut self, index: usize) {
        self.0.push(Segment::Index(index));
    }

    pub(crate) fn pop(&mut self) {
        self.0.pop();
    }
}

impl fmt::Display for JsonPath<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("$")?;
        for segment in &self.0 {
            match segment {
                Segment::Key(key) => {
                    // Escapes `'` and `\` without allocating: violation paths
                    // are written for every union branch that fails.
                    f.write_str("['")?;
                    for part in key.split_inclusive(['\'', '\\']) {
                        match part.strip_suffix(['\'', '\\']) {
                            Some(text) => {
                                f.write_str(text)?;
                                f.write_char('\\')?;
                                f.write_str(&part[text.len()..])?;
                            }
                            None => f.write_str(part)?,
                        }
                    }
                    f.write_str("']")?;
                }
                Segment::Index(index) => write!(f, "[{index}]")?,
            }
        }
        Ok(())
    }
}
