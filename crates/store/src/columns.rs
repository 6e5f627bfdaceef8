//! `Columns`: a run's raw per-request records as named, equal-length `i64` columns.
//!
//! The store knows nothing of what a column means (intended send time, connection,
//! outcome...): the load generator names them and the report reads them back by name.

use crate::StoreError;

/// A set of named `i64` columns, all `len` long, in insertion order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Columns {
    /// Number of records (rows); every column holds exactly this many values.
    pub len: usize,
    /// `(name, values)` pairs in the order they were pushed. Prefer [`Columns::push_column`]
    /// to editing this directly: it keeps the length and unique-name invariants.
    pub cols: Vec<(String, Vec<i64>)>,
}

impl Columns {
    /// An empty set for `len` records.
    pub fn new(len: usize) -> Self {
        Columns {
            len,
            cols: Vec::new(),
        }
    }

    /// Appends a column; it must hold exactly `len` values and its name must be new.
    pub fn push_column(&mut self, name: &str, v: Vec<i64>) -> Result<(), StoreError> {
        if v.len() != self.len {
            return Err(StoreError::ColumnLength {
                name: name.to_owned(),
                expected: self.len,
                got: v.len(),
            });
        }
        if self.get(name).is_some() {
            return Err(StoreError::DuplicateColumn(name.to_owned()));
        }
        self.cols.push((name.to_owned(), v));
        Ok(())
    }

    /// The values of the column called `name`, if there is one.
    pub fn get(&self, name: &str) -> Option<&[i64]> {
        self.cols
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_slice())
    }

    /// The column names, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.cols.iter().map(|(n, _)| n.as_str())
    }

    /// Checks the invariants `push_column` keeps, for sets built by hand through the public
    /// fields: every column `len` long, no name twice.
    pub fn validate(&self) -> Result<(), StoreError> {
        for (i, (name, v)) in self.cols.iter().enumerate() {
            if v.len() != self.len {
                return Err(StoreError::ColumnLength {
                    name: name.clone(),
                    expected: self.len,
                    got: v.len(),
                });
            }
            if self.cols[..i].iter().any(|(n, _)| n == name) {
                return Err(StoreError::DuplicateColumn(name.clone()));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_checks_length_and_names() {
        let mut c = Columns::new(3);
        c.push_column("a", vec![1, 2, 3]).unwrap();
        assert!(matches!(
            c.push_column("b", vec![1, 2]),
            Err(StoreError::ColumnLength {
                expected: 3,
                got: 2,
                ..
            })
        ));
        assert!(matches!(
            c.push_column("a", vec![4, 5, 6]),
            Err(StoreError::DuplicateColumn(n)) if n == "a"
        ));
        assert_eq!(c.get("a"), Some(&[1, 2, 3][..]));
        assert_eq!(c.get("b"), None);
        assert_eq!(c.names().collect::<Vec<_>>(), ["a"]);
        c.validate().unwrap();
    }

    #[test]
    fn validate_catches_hand_built_sets() {
        let bad_len = Columns {
            len: 2,
            cols: vec![("a".into(), vec![1])],
        };
        assert!(matches!(
            bad_len.validate(),
            Err(StoreError::ColumnLength { .. })
        ));
        let dup = Columns {
            len: 1,
            cols: vec![("a".into(), vec![1]), ("a".into(), vec![2])],
        };
        assert!(matches!(
            dup.validate(),
            Err(StoreError::DuplicateColumn(_))
        ));
    }
}
