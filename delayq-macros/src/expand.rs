//! Generates the registrations: the function stays as written, and an `inventory` entry points
//! the runtime at it. No parameter tokens decide the ack mode; the handler traits do.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::ItemFn;

use crate::validate::{Flow, Handling, LeaderTask, Listener, StreamListener};
use crate::values::Backoff;

fn backoff(backoff: &Backoff) -> TokenStream {
    match *backoff {
        Backoff::Exponential { base_ms, max_ms } => {
            quote!(::delayq_runtime::__private::Backoff::Exponential { base_ms: #base_ms, max_ms: #max_ms })
        }
        Backoff::Fixed { ms } => quote!(::delayq_runtime::__private::Backoff::Fixed { ms: #ms }),
    }
}

/// Checks the compiler makes on the offending parameter's or return type's span: that a
/// second parameter is `Ack` (through any alias or re-export; for a delay listener, `Ack` or
/// `Dependencies`, a flow step's), and the return type.
pub(crate) fn type_checks(
    ack_type: Option<&syn::Type>,
    return_type: Option<&syn::Type>,
    delay: bool,
) -> TokenStream {
    let ack_check = ack_type.map(|ty| {
        if delay {
            // A delay listener's second parameter: `Ack`, or `Dependencies` (a flow step's).
            quote_spanned! {ty.span()=>
                const _: fn(::delayq_runtime::__private::AssertDelaySecond<#ty>) = |_| {};
            }
        } else {
            quote_spanned! {ty.span()=>
                const _: fn(::delayq_runtime::__private::AssertAck<#ty>) = |_| {};
            }
        }
    });
    let return_check = return_type.map(|ty| {
        quote_spanned! {ty.span()=>
            const _: fn(::delayq_runtime::__private::AssertReturn<#ty>) = |_| {};
        }
    });
    quote!(#ack_check #return_check)
}

/// The names of the options the attribute wrote, as a `&'static [&'static str]`.
pub(crate) fn given_list(given: &[&'static str]) -> TokenStream {
    quote!(&[#(#given),*])
}

pub(crate) fn function_path(function: &ItemFn) -> TokenStream {
    let name = &function.sig.ident;
    quote!(::core::concat!(
        ::core::module_path!(),
        "::",
        ::core::stringify!(#name)
    ))
}

pub(crate) fn listener_options(
    handling: &Handling,
    max_attempts: u32,
    lease_ms: u64,
    flow: &Flow,
) -> TokenStream {
    let rate_tokens = |rate: Option<delayq_spec::Rate>| match rate {
        Some(delayq_spec::Rate {
            count,
            period_ms,
            burst,
        }) => quote!(::core::option::Option::Some(::delayq_runtime::__private::Rate {
            count: #count,
            period_ms: #period_ms,
            burst: #burst,
        })),
        None => quote!(::core::option::Option::None),
    };
    let rate = rate_tokens(flow.rate);
    let rate_per_key = rate_tokens(flow.rate_per_key);
    let (dead_max, dead_ttl_ms) = (flow.dead_max, flow.dead_ttl_ms);
    let (result_ttl_ms, results_max) = (flow.result_ttl_ms, flow.results_max);
    let concurrency = handling.concurrency;
    let backoff = backoff(&handling.backoff);
    let timeout = match handling.timeout_ms {
        Some(ms) => quote!(::core::option::Option::Some(#ms)),
        None => quote!(::core::option::Option::None),
    };
    quote! {
        ::delayq_runtime::__private::ListenerOptions {
            concurrency: #concurrency,
            max_attempts: #max_attempts,
            ack_timeout_ms: #lease_ms,
            backoff: #backoff,
            timeout_ms: #timeout,
            flow: ::delayq_runtime::__private::Flow {
                rate: #rate,
                rate_per_key: #rate_per_key,
                dead_max: #dead_max,
                dead_ttl_ms: #dead_ttl_ms,
                result_ttl_ms: #result_ttl_ms,
                results_max: #results_max,
            },
        }
    }
}

pub(crate) fn registration(
    listener: &Listener,
    function: &ItemFn,
    given: &[&'static str],
) -> TokenStream {
    let given = given_list(given);
    let name = &function.sig.ident;
    let topic = &listener.topic;
    let h = &listener.handling;
    let checks = type_checks(h.ack_type.as_ref(), h.return_type.as_ref(), true);
    let path = function_path(function);
    let options = listener_options(
        h,
        listener.max_attempts,
        listener.ack_timeout_ms,
        &listener.flow,
    );
    quote! {
        #function

        #checks

        ::delayq_runtime::__private::inventory::submit! {
            ::delayq_runtime::__private::ListenerRegistration {
                topic: #topic,
                function: #path,
                options: #options,
                given: #given,
                handler: || ::delayq_runtime::__private::erase(#name),
            }
        }
    }
}

pub(crate) fn stream_registration(
    listener: &StreamListener,
    function: &ItemFn,
    given: &[&'static str],
) -> TokenStream {
    let given = given_list(given);
    let name = &function.sig.ident;
    let StreamListener {
        stream,
        group,
        from_start,
        batch,
        ..
    } = listener;
    let h = &listener.handling;
    let checks = type_checks(h.ack_type.as_ref(), h.return_type.as_ref(), false);
    let path = function_path(function);
    // For a stream, "attempts" are deliveries and the lease is min_idle.
    let options = listener_options(
        h,
        listener.max_deliveries,
        listener.min_idle_ms,
        &listener.flow,
    );
    quote! {
        #function

        #checks

        ::delayq_runtime::__private::inventory::submit! {
            ::delayq_runtime::__private::StreamListenerRegistration {
                stream: #stream,
                group: #group,
                from_start: #from_start,
                batch: #batch,
                function: #path,
                options: #options,
                given: #given,
                handler: || ::delayq_runtime::__private::erase_stream(#name),
            }
        }
    }
}

pub(crate) fn leader_registration(
    task: &LeaderTask,
    function: &ItemFn,
    given: &[&'static str],
) -> TokenStream {
    let given = given_list(given);
    let name = &function.sig.ident;
    let LeaderTask {
        name: task_name,
        every_ms,
        ttl_ms,
        ..
    } = task;
    let param = &task.param_type;
    let param_check = quote_spanned! {param.span()=>
        const _: fn(::delayq_runtime::__private::AssertLeadership<#param>) = |_| {};
    };
    let checks = type_checks(None, task.return_type.as_ref(), false);
    let path = function_path(function);
    quote! {
        #function

        #param_check
        #checks

        ::delayq_runtime::__private::inventory::submit! {
            ::delayq_runtime::__private::LeaderTaskRegistration {
                name: #task_name,
                function: #path,
                every_ms: #every_ms,
                ttl_ms: #ttl_ms,
                given: #given,
                task: || ::delayq_runtime::__private::erase_leader(#name),
            }
        }
    }
}
