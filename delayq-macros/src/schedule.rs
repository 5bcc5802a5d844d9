//! `#[scheduled]`: its options checked (the cron pattern and time zone with the parser and tz
//! database the runtime uses), and its registration: the schedule and the delay listener
//! that runs its ticks on the topic of the schedule's name.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{ItemFn, LitStr};

use crate::attr::{attribute_span, int, string, Args, Spec};
use crate::expand::{function_path, given_list, listener_options, type_checks};
use crate::validate::{attempts_and_lease, handling, Handling};
use crate::values::{duration, name, refused, required};
use delayq_spec::defaults::{
    MIN_EVERY_MS, MIN_MISFIRE_AFTER_MS, MISFIRE_AFTER_MS as DEFAULT_MISFIRE_AFTER_MS,
    SCHEDULE_CONCURRENCY as DEFAULT_SCHEDULE_CONCURRENCY,
};

/// The options of `#[scheduled]`.
pub(crate) const SCHEDULE_OPTIONS: &[Spec] = &[
    string("name"),
    string("cron"),
    string("every"),
    string("tz"),
    string("catch_up"),
    string("misfire_after"),
    int("concurrency"),
    int("max_attempts"),
    string("ack_timeout"),
    string("backoff"),
    string("timeout"),
];

/// A validated `#[scheduled]` fn.
pub(crate) struct Scheduled {
    name: String,
    cron: Option<String>,
    every_ms: u64,
    tz: String,
    catch_up: String,
    misfire_after_ms: u64,
    max_attempts: u32,
    ack_timeout_ms: u64,
    tick_type: syn::Type,
    handling: Handling,
}

/// The pattern as the runtime reads it; an error names the field at fault.
fn cron(lit: &LitStr) -> syn::Result<String> {
    let pattern = lit.value();
    delayq_spec::cron(&pattern).map_err(|e| refused(lit.span(), &e))?;
    Ok(pattern.trim().to_string())
}

pub(crate) fn scheduled(args: Args, function: &ItemFn) -> syn::Result<Scheduled> {
    let example = "#[scheduled(name = \"daily-report\", cron = \"0 9 * * *\")]";
    let name = name(
        required(args.str("name"), "name", example)?,
        "schedule name",
    )?;
    let (cron, every_ms) = match (args.str("cron"), args.str("every")) {
        (Some(_), Some(every)) => {
            return Err(syn::Error::new(
                every.span(),
                "give either `cron` or `every`, not both",
            ))
        }
        (None, None) => {
            return Err(syn::Error::new(
                attribute_span(),
                "missing `cron` or `every`: write cron = \"0 9 * * MON-FRI\" or every = \"5m\"",
            ))
        }
        (Some(lit), None) => (Some(cron(lit)?), 0),
        (None, Some(lit)) => {
            let ms = duration(lit, "every")?;
            if ms < MIN_EVERY_MS {
                return Err(syn::Error::new(
                    lit.span(),
                    format!("`every` must be at least {MIN_EVERY_MS}ms"),
                ));
            }
            (None, ms)
        }
    };
    let tz = match args.str("tz") {
        None => delayq_spec::defaults::TZ.to_string(),
        Some(lit) => {
            let tz = lit.value();
            delayq_spec::time_zone(&tz).map_err(|e| refused(lit.span(), &e))?;
            tz
        }
    };
    let catch_up = match args.str("catch_up") {
        None => delayq_spec::defaults::CATCH_UP.to_string(),
        Some(lit) => match lit.value().as_str() {
            v @ ("last" | "none" | "all") => v.to_string(),
            _ => {
                return Err(syn::Error::new(
                    lit.span(),
                    "`catch_up` is \"last\" (the latest missed tick runs once, the default), \"none\" or \"all\"",
                ))
            }
        },
    };
    let misfire_after_ms = match args.str("misfire_after") {
        None => DEFAULT_MISFIRE_AFTER_MS,
        Some(lit) => {
            let ms = duration(lit, "misfire_after")?;
            if ms < MIN_MISFIRE_AFTER_MS {
                return Err(syn::Error::new(
                    lit.span(),
                    format!("`misfire_after` must be at least {MIN_MISFIRE_AFTER_MS}ms (the default is 60s)"),
                ));
            }
            ms
        }
    };
    let handling = handling(
        &args,
        function,
        "scheduled",
        "`tick: Tick`, then optionally `ack: Ack` for manual ack",
        DEFAULT_SCHEDULE_CONCURRENCY,
    )?;
    let (max_attempts, ack_timeout_ms) = attempts_and_lease(&args)?;
    let tick_type = match function.sig.inputs.first() {
        Some(syn::FnArg::Typed(t)) => (*t.ty).clone(),
        _ => unreachable!("handling() checked the parameters"),
    };
    Ok(Scheduled {
        name,
        cron,
        every_ms,
        tz,
        catch_up,
        misfire_after_ms,
        max_attempts,
        ack_timeout_ms,
        tick_type,
        handling,
    })
}

pub(crate) fn registration(
    s: &Scheduled,
    function: &ItemFn,
    given: &[&'static str],
) -> TokenStream {
    let given = given_list(given);
    let ident = &function.sig.ident;
    let h = &s.handling;
    let tick = &s.tick_type;
    let tick_check = quote_spanned! {tick.span()=>
        const _: fn(::delayq_runtime::__private::AssertTick<#tick>) = |_| {};
    };
    let checks = type_checks(h.ack_type.as_ref(), h.return_type.as_ref(), false);
    let path = function_path(function);
    let options = listener_options(
        h,
        s.max_attempts,
        s.ack_timeout_ms,
        &crate::validate::Flow::default(),
    );
    let Scheduled {
        name,
        every_ms,
        tz,
        catch_up,
        misfire_after_ms,
        ..
    } = s;
    let cron = match &s.cron {
        Some(c) => quote!(::core::option::Option::Some(#c)),
        None => quote!(::core::option::Option::None),
    };
    quote! {
        #function

        #tick_check
        #checks

        ::delayq_runtime::__private::inventory::submit! {
            ::delayq_runtime::__private::ScheduleRegistration {
                name: #name,
                cron: #cron,
                every_ms: #every_ms,
                tz: #tz,
                catch_up: #catch_up,
                misfire_after_ms: #misfire_after_ms,
                given: #given,
                listener: ::delayq_runtime::__private::ListenerRegistration {
                    topic: #name,
                    function: #path,
                    options: #options,
                    given: #given,
                    handler: || ::delayq_runtime::__private::erase(#ident),
                },
            }
        }
    }
}
