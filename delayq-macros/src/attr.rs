//! Parses attribute arguments into a typed table; each value keeps its span for errors. The
//! three attributes share it: each lists the options it takes and their kinds.

use proc_macro2::{Span, TokenStream};
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::{Expr, ExprLit, Lit, MetaNameValue, Token};

/// What an option takes.
#[derive(Clone, Copy)]
pub(crate) enum Kind {
    Str,
    Int,
}

/// One option an attribute takes.
pub(crate) struct Spec {
    pub name: &'static str,
    pub kind: Kind,
}

pub(crate) const fn string(name: &'static str) -> Spec {
    Spec {
        name,
        kind: Kind::Str,
    }
}

pub(crate) const fn int(name: &'static str) -> Spec {
    Spec {
        name,
        kind: Kind::Int,
    }
}

enum Value {
    Str(syn::LitStr),
    Int(syn::LitInt),
}

/// The arguments as given, each with the span of its value.
pub(crate) struct Args {
    values: Vec<(&'static str, Value)>,
}

/// The value without the invisible group `macro_rules!` wraps a `$x:literal` in, so that
/// listeners declared by a user's macro parse as if written out.
fn ungrouped(value: &Expr) -> &Expr {
    match value {
        Expr::Group(g) => ungrouped(&g.expr),
        other => other,
    }
}

fn value(expr: &Expr, spec: &Spec) -> syn::Result<Value> {
    let name = spec.name;
    match (ungrouped(expr), spec.kind) {
        (
            Expr::Lit(ExprLit {
                lit: Lit::Str(s), ..
            }),
            Kind::Str,
        ) => Ok(Value::Str(s.clone())),
        (
            Expr::Lit(ExprLit {
                lit: Lit::Int(i), ..
            }),
            Kind::Int,
        ) => Ok(Value::Int(i.clone())),
        (other, Kind::Str) => Err(syn::Error::new_spanned(
            other,
            format!("`{name}` takes a string literal, e.g. {name} = \"...\""),
        )),
        (other, Kind::Int) => Err(syn::Error::new_spanned(
            other,
            format!("`{name}` takes an integer literal, e.g. {name} = 8"),
        )),
    }
}

impl Args {
    /// Parses `tokens` as `name = literal, …` with the options of `specs`.
    pub(crate) fn parse(tokens: TokenStream, specs: &[Spec]) -> syn::Result<Self> {
        let pairs = Punctuated::<MetaNameValue, Token![,]>::parse_terminated.parse2(tokens)?;
        let mut values: Vec<(&'static str, Value)> = Vec::new();
        for pair in &pairs {
            let name = pair
                .path
                .get_ident()
                .map(ToString::to_string)
                .unwrap_or_default();
            let Some(spec) = specs.iter().find(|s| s.name == name) else {
                let names: Vec<&str> = specs.iter().map(|s| s.name).collect();
                return Err(syn::Error::new_spanned(
                    &pair.path,
                    format!("unknown attribute; expected one of: {}", names.join(", ")),
                ));
            };
            if values.iter().any(|(n, _)| *n == spec.name) {
                return Err(syn::Error::new_spanned(
                    &pair.path,
                    format!("`{name}` is given twice"),
                ));
            }
            values.push((spec.name, value(&pair.value, spec)?));
        }
        Ok(Args { values })
    }

    /// The options written in the attribute, in order (the runtime reports their values as
    /// coming from the attribute, the others as defaults).
    pub(crate) fn given(&self) -> Vec<&'static str> {
        self.values.iter().map(|(n, _)| *n).collect()
    }

    /// The string option `name`, if given.
    pub(crate) fn str(&self, name: &str) -> Option<&syn::LitStr> {
        self.values.iter().find_map(|(n, v)| match v {
            Value::Str(s) if *n == name => Some(s),
            _ => None,
        })
    }

    /// The integer option `name`, if given.
    pub(crate) fn int(&self, name: &str) -> Option<&syn::LitInt> {
        self.values.iter().find_map(|(n, v)| match v {
            Value::Int(i) if *n == name => Some(i),
            _ => None,
        })
    }
}

/// Where an error about a missing argument points: the attribute itself.
pub(crate) fn attribute_span() -> Span {
    Span::call_site()
}
