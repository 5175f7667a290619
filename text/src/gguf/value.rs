//! [`Value`]: one GGUF metadata value, with typed accessors.

/// A metadata value. Integer types of every width fold into [`Value::U64`] or
/// [`Value::I64`], floats into [`Value::F64`].
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// Any unsigned integer type.
    U64(u64),
    /// Any signed integer type.
    I64(i64),
    /// `f32` or `f64`.
    F64(f64),
    /// Boolean.
    Bool(bool),
    /// UTF-8 string.
    Str(String),
    /// Array of values.
    Array(Vec<Value>),
}

impl Value {
    /// As a non-negative integer.
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Value::U64(v) => Some(*v),
            Value::I64(v) => u64::try_from(*v).ok(),
            _ => None,
        }
    }

    /// As a float (integers convert).
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::F64(v) => Some(*v),
            Value::U64(v) => Some(*v as f64),
            Value::I64(v) => Some(*v as f64),
            _ => None,
        }
    }

    /// As a string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// As a boolean.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// As an array.
    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Value;

    #[test]
    fn integers_convert_where_the_value_fits() {
        assert_eq!(Value::I64(7).as_u64(), Some(7));
        assert_eq!(Value::I64(-1).as_u64(), None);
        assert_eq!(Value::U64(3).as_f64(), Some(3.0));
        assert_eq!(Value::Str("x".into()).as_u64(), None);
        assert_eq!(Value::Bool(true).as_str(), None);
        assert_eq!(Value::Array(vec![]).as_array(), Some(&[][..]));
    }
}
