//! [`Pairs`]: a template map built in order, as a Python dict keeps its keys.

use minijinja::Value;

/// A map under construction, in insertion order (a second insert of a key replaces it).
#[derive(Clone, Default)]
pub(crate) struct Pairs(Vec<(Value, Value)>);

impl Pairs {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    pub(crate) fn insert(&mut self, k: Value, v: Value) {
        match self.0.iter_mut().find(|(key, _)| *key == k) {
            Some(slot) => slot.1 = v,
            None => self.0.push((k, v)),
        }
    }

    pub(crate) fn insert_absent(&mut self, k: Value, v: Value) {
        if !self.0.iter().any(|(key, _)| *key == k) {
            self.0.push((k, v));
        }
    }

    pub(crate) fn into_value(self) -> Value {
        Value::from_iter(self.0)
    }
}
