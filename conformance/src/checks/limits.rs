use super::Check;

pub fn checks() -> Vec<Check> {
    vec![]
}
