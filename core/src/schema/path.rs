//! JSON paths in bracket form (`$['content']['images'][2]`), as schema faults
//! and violations report them.

use std::fmt;

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
                    write!(f, "['{}']", key.replace('\\', "\\\\").replace('\'', "\\'"))?
                }
                Segment::Index(index) => write!(f, "[{index}]")?,
            }
        }
        Ok(())
    }
}
