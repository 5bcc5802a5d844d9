//! Parses the attribute arguments into a typed struct; each value keeps its span for errors.

use proc_macro2::{Span, TokenStream};
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::{Expr, ExprLit, Lit, MetaNameValue, Token};

/// The raw arguments of `#[delay_listener(...)]`, each with the span of its value.
#[derive(Default)]
pub(crate) struct ListenerArgs {
    pub topic: Option<syn::LitStr>,
    pub concurrency: Option<syn::LitInt>,
    pub max_attempts: Option<syn::LitInt>,
    pub ack_timeout: Option<syn::LitStr>,
    pub backoff: Option<syn::LitStr>,
}

/// The value without the invisible group `macro_rules!` wraps a `$x:literal` in, so that
/// listeners declared by a user's macro parse as if written out.
fn ungrouped(value: &Expr) -> &Expr {
    match value {
        Expr::Group(g) => ungrouped(&g.expr),
        other => other,
    }
}

fn string(value: &Expr, name: &str) -> syn::Result<syn::LitStr> {
    match ungrouped(value) {
        Expr::Lit(ExprLit {
            lit: Lit::Str(s), ..
        }) => Ok(s.clone()),
        other => Err(syn::Error::new_spanned(
            other,
            format!("`{name}` takes a string literal, e.g. {name} = \"...\""),
        )),
    }
}

fn integer(value: &Expr, name: &str) -> syn::Result<syn::LitInt> {
    match ungrouped(value) {
        Expr::Lit(ExprLit {
            lit: Lit::Int(i), ..
        }) => Ok(i.clone()),
        other => Err(syn::Error::new_spanned(
            other,
            format!("`{name}` takes an integer literal, e.g. {name} = 8"),
        )),
    }
}

fn set<T>(slot: &mut Option<T>, value: T, pair: &MetaNameValue, name: &str) -> syn::Result<()> {
    if slot.is_some() {
        return Err(syn::Error::new_spanned(
            &pair.path,
            format!("`{name}` is given twice"),
        ));
    }
    *slot = Some(value);
    Ok(())
}

impl ListenerArgs {
    pub(crate) fn parse(tokens: TokenStream) -> syn::Result<Self> {
        let pairs = Punctuated::<MetaNameValue, Token![,]>::parse_terminated.parse2(tokens)?;
        let mut args = ListenerArgs::default();
        for pair in &pairs {
            let name = pair
                .path
                .get_ident()
                .map(ToString::to_string)
                .unwrap_or_default();
            let v = &pair.value;
            match name.as_str() {
                "topic" => set(&mut args.topic, string(v, "topic")?, pair, "topic")?,
                "concurrency" => set(&mut args.concurrency, integer(v, "concurrency")?, pair, "concurrency")?,
                "max_attempts" => set(&mut args.max_attempts, integer(v, "max_attempts")?, pair, "max_attempts")?,
                "ack_timeout" => set(&mut args.ack_timeout, string(v, "ack_timeout")?, pair, "ack_timeout")?,
                "backoff" => set(&mut args.backoff, string(v, "backoff")?, pair, "backoff")?,
                _ => {
                    return Err(syn::Error::new_spanned(
                        &pair.path,
                        "unknown attribute; expected one of: topic, concurrency, max_attempts, ack_timeout, backoff",
                    ))
                }
            }
        }
        Ok(args)
    }
}

/// Where an error about a missing argument points: the attribute itself.
pub(crate) fn attribute_span() -> Span {
    Span::call_site()
}
