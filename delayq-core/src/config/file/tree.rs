//! The file as a TOML tree that keeps the span of every key and value, so a problem can name
//! its line.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use toml::Spanned;

use crate::config::value::{ConfigValue, Raw};

/// A TOML item with the span of each key and value.
pub(super) enum Node {
    Table(Vec<(Spanned<String>, Spanned<Node>)>),
    Value(Raw),
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(NodeVisitor)
    }
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = Node;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a TOML value or table")
    }
    fn visit_bool<E: de::Error>(self, b: bool) -> Result<Node, E> {
        Ok(Node::Value(Raw::Typed(ConfigValue::Bool(b))))
    }
    fn visit_i64<E: de::Error>(self, n: i64) -> Result<Node, E> {
        Ok(Node::Value(Raw::Typed(ConfigValue::Int(n))))
    }
    fn visit_u64<E: de::Error>(self, n: u64) -> Result<Node, E> {
        Ok(Node::Value(Raw::Typed(n.into())))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Node, E> {
        Ok(Node::Value(Raw::Other("decimal number")))
    }
    fn visit_str<E: de::Error>(self, s: &str) -> Result<Node, E> {
        Ok(Node::Value(Raw::Typed(ConfigValue::Text(s.to_string()))))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Node::Value(Raw::Other("array")))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
        let mut entries = Vec::new();
        while let Some(key) = map.next_key::<Spanned<String>>()? {
            let value = map.next_value::<Spanned<Node>>()?;
            entries.push((key, value));
        }
        Ok(Node::Table(entries))
    }
}
