//! Generates the registration: the function stays as written, and an `inventory` entry points
//! the runtime at it. No parameter tokens decide the ack mode; the handler traits do.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::ItemFn;

use crate::validate::{Backoff, Listener};

pub(crate) fn registration(listener: &Listener, function: &ItemFn) -> TokenStream {
    let name = &function.sig.ident;
    let Listener {
        topic,
        concurrency,
        max_attempts,
        ack_timeout_ms,
        ..
    } = listener;
    let backoff = match listener.backoff {
        Backoff::Exponential { base_ms, max_ms } => {
            quote!(::delayq_runtime::__private::Backoff::Exponential { base_ms: #base_ms, max_ms: #max_ms })
        }
        Backoff::Fixed { ms } => quote!(::delayq_runtime::__private::Backoff::Fixed { ms: #ms }),
    };
    // A second parameter must be `Ack` (through any alias or re-export): let the compiler say
    // so on that parameter's span.
    let ack_check = listener.ack_type.as_ref().map(|ty| {
        quote_spanned! {ty.span()=>
            const _: fn(::delayq_runtime::__private::AssertAck<#ty>) = |_| {};
        }
    });
    let return_check = listener.return_type.as_ref().map(|ty| {
        quote_spanned! {ty.span()=>
            const _: fn(::delayq_runtime::__private::AssertReturn<#ty>) = |_| {};
        }
    });
    quote! {
        #function

        #ack_check

        #return_check

        ::delayq_runtime::__private::inventory::submit! {
            ::delayq_runtime::__private::ListenerRegistration {
                topic: #topic,
                function: ::core::concat!(::core::module_path!(), "::", ::core::stringify!(#name)),
                options: ::delayq_runtime::__private::ListenerOptions {
                    concurrency: #concurrency,
                    max_attempts: #max_attempts,
                    ack_timeout_ms: #ack_timeout_ms,
                    backoff: #backoff,
                },
                handler: || ::delayq_runtime::__private::erase(#name),
            }
        }
    }
}
