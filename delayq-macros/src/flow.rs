//! A `#[delay_listener]`'s flow control: `rate` (with `burst`), `dead_max` and `dead_ttl`,
//! checked with `delayq-spec`'s rules on their spans.

use crate::attr::Args;
use crate::values::{bounded, duration, refused};

pub(crate) use delayq_spec::Flow;

/// `rate`, `burst`, `rate_per_key`, `dead_max` and `dead_ttl` of a `#[delay_listener]`.
pub(crate) fn flow(args: &Args) -> syn::Result<Flow> {
    use delayq_spec::defaults::{
        MAX_DEAD_MAX, MAX_RESULTS_MAX, MIN_DEAD_TTL_MS, MIN_RESULT_TTL_MS,
    };
    let mut rate = match args.str("rate") {
        Some(lit) => {
            Some(delayq_spec::Rate::parse(&lit.value()).map_err(|e| refused(lit.span(), &e))?)
        }
        None => None,
    };
    if let Some(lit) = args.int("burst") {
        let Some(r) = rate else {
            return Err(syn::Error::new(
                lit.span(),
                "`burst` needs a `rate`: write rate = \"100/s\", burst = 20",
            ));
        };
        let burst = lit
            .base10_parse::<u64>()
            .map_err(|_| syn::Error::new(lit.span(), "`burst` must be a whole number"))?;
        rate = Some(r.with_burst(burst).map_err(|e| refused(lit.span(), &e))?);
    }
    let rate_per_key = match args.str("rate_per_key") {
        Some(lit) => {
            Some(delayq_spec::Rate::parse(&lit.value()).map_err(|e| refused(lit.span(), &e))?)
        }
        None => None,
    };
    let mut flow = Flow {
        rate,
        rate_per_key,
        ..Flow::default()
    };
    if let Some(lit) = args.int("dead_max") {
        flow.dead_max = bounded(lit, "dead_max", MAX_DEAD_MAX)?;
    }
    if let Some(lit) = args.str("dead_ttl") {
        flow.dead_ttl_ms = duration(lit, "dead_ttl")?;
        if flow.dead_ttl_ms < MIN_DEAD_TTL_MS {
            return Err(syn::Error::new(
                lit.span(),
                format!(
                    "dead_ttl must be at least {}",
                    delayq_spec::duration::format_ms(MIN_DEAD_TTL_MS)
                ),
            ));
        }
    }
    if let Some(lit) = args.int("results_max") {
        flow.results_max = bounded(lit, "results_max", MAX_RESULTS_MAX)?;
    }
    if let Some(lit) = args.str("result_ttl") {
        flow.result_ttl_ms = duration(lit, "result_ttl")?;
        if flow.result_ttl_ms < MIN_RESULT_TTL_MS {
            return Err(syn::Error::new(
                lit.span(),
                format!(
                    "result_ttl must be at least {}",
                    delayq_spec::duration::format_ms(MIN_RESULT_TTL_MS)
                ),
            ));
        }
    }
    Ok(flow)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::DELAY_OPTIONS;

    fn checked(attr: &str) -> Result<Flow, String> {
        let args = Args::parse(attr.parse().unwrap(), DELAY_OPTIONS).map_err(|e| e.to_string())?;
        flow(&args).map_err(|e| e.to_string())
    }

    // One refusal is a UI test (`burst_without_rate`); these are the rest, without building a
    // crate each.
    #[test]
    fn flow_options_are_checked_with_the_runtimes_rules() {
        let ok =
            checked(r#"topic = "t", rate = "100/m", burst = 7, dead_max = 50, dead_ttl = "2h""#)
                .unwrap();
        let r = ok.rate.unwrap();
        assert_eq!((r.count, r.period_ms, r.burst), (100, 60_000, 7));
        assert_eq!((ok.dead_max, ok.dead_ttl_ms), (50, 7_200_000));
        let d = checked(r#"topic = "t""#).unwrap();
        assert!(d.rate.is_none() && d.rate_per_key.is_none());
        let k = checked(r#"topic = "t", rate_per_key = "5/s""#)
            .unwrap()
            .rate_per_key
            .unwrap();
        assert_eq!((k.count, k.period_ms, k.burst), (5, 1_000, 1));
        assert_eq!((d.dead_max, d.dead_ttl_ms), (10_000, 2_592_000_000));
        for (attr, says) in [
            (
                r#"topic = "t", rate = "100/day""#,
                "invalid rate: expected N/s, N/m or N/h",
            ),
            (
                r#"topic = "t", rate = "10/s", burst = 11"#,
                "from 1 to the rate's 10",
            ),
            (
                r#"topic = "t", rate_per_key = "5/fortnight""#,
                "invalid rate: expected N/s, N/m or N/h",
            ),
            (
                r#"topic = "t", dead_ttl = "10ms""#,
                "dead_ttl must be at least 1s",
            ),
            (
                r#"topic = "t", dead_max = 0"#,
                "`dead_max` must be between 1 and 100000000",
            ),
        ] {
            let e = checked(attr).unwrap_err();
            assert!(e.contains(says), "{attr}: {e}");
        }
    }
}
