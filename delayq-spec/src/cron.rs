//! Cron patterns (croner's parser, as the runtime reads them) and IANA time zones (jiff's own
//! copy of the tz database, so the macros' host build and the runtime agree).

use croner::parser::{CronParser, Seconds, Year};
use croner::Cron;
use jiff::tz::TimeZone;

use crate::SpecError;

/// The fields of a 5-field pattern, by position, as errors name them.
pub const CRON_FIELDS_5: [&str; 5] = ["minute", "hour", "day of month", "month", "day of week"];
/// The fields of a 6-field pattern (seconds first).
pub const CRON_FIELDS_6: [&str; 6] = [
    "second",
    "minute",
    "hour",
    "day of month",
    "month",
    "day of week",
];

fn parser() -> CronParser {
    CronParser::builder()
        .seconds(Seconds::Optional)
        .year(Year::Disallowed)
        .build()
}

/// Reads a cron pattern: 5 fields, or 6 with seconds first; `MON`–`SUN`, `JAN`–`DEC`;
/// `@hourly`, `@daily`, `@weekly`, `@monthly`, `@yearly`.
///
/// # Errors
/// The field at fault (`cron hour`, `cron day of month`, or `cron` for the whole pattern) and
/// why; a pattern whose date fields match no date (`0 0 30 2 *`) is refused too.
pub fn cron(pattern: &str) -> Result<Cron, SpecError> {
    let trimmed = pattern.trim();
    let e = match parser().parse(trimmed) {
        Ok(cron) if !has_a_time_of_day(&cron) => {
            return Err(SpecError::new(
                "cron",
                format!("{trimmed:?} matches no time of day: a time field lists no value"),
            ))
        }
        Ok(cron) if matches_some_date(&cron) => return Ok(cron),
        Ok(_) => {
            return Err(SpecError::new(
                "cron day of month",
                format!("{trimmed:?} matches no date: its day of month never falls in its months (like 30 February)"),
            ))
        }
        Err(e) => e,
    };
    let fields: Vec<&str> = trimmed.split_whitespace().collect();
    let names: &[&str] = match fields.len() {
        5 => &CRON_FIELDS_5,
        6 => &CRON_FIELDS_6,
        n if !trimmed.starts_with('@') => {
            return Err(SpecError::new(
                "cron",
                format!("{trimmed:?} has {n} fields: give 5 (minute hour day-of-month month day-of-week) or 6 (seconds first)"),
            ))
        }
        _ => return Err(SpecError::new("cron", format!("{trimmed:?}: {e}"))),
    };
    // The first field that fails alone (the others `*`) is the one at fault.
    for (i, field) in fields.iter().enumerate() {
        let alone: Vec<&str> = (0..fields.len())
            .map(|j| if j == i { *field } else { "*" })
            .collect();
        if let Err(e) = parser().parse(&alone.join(" ")) {
            return Err(SpecError::new(
                format!("cron {}", names[i]),
                format!("{field:?} in {trimmed:?}: {e}"),
            ));
        }
    }
    Err(SpecError::new("cron", format!("{trimmed:?}: {e}")))
}

/// Whether any day of a whole Gregorian cycle (400 years, after which dates and weekdays
/// repeat) matches the pattern's date fields; `0 0 30 2 *` matches none. Stops at the first
/// day that matches (the first, for most patterns).
fn matches_some_date(cron: &Cron) -> bool {
    let mut day = jiff::civil::date(2000, 1, 1);
    (0..146_097).any(|_| {
        let (y, m, d) = (day.year(), day.month() as u32, day.day() as u32);
        let weekday =
            croner::Weekday::from_days_from_sunday(day.weekday().to_sunday_zero_offset() as u32);
        day = day.tomorrow().unwrap_or(day);
        let p = &cron.pattern;
        p.month_match(m).unwrap_or(false)
            && p.day_match(i32::from(y), m, d, weekday).unwrap_or(false)
    })
}

/// Whether the hour, minute and second fields each match some value: croner skips empty list
/// items, so `0 , * * *` parses with no hour at all.
fn has_a_time_of_day(cron: &Cron) -> bool {
    let p = &cron.pattern;
    let any = |n: u32, matches: &dyn Fn(u32) -> bool| (0..n).any(matches);
    any(24, &|h| p.hour_match(h).unwrap_or(false))
        && any(60, &|m| p.minute_match(m).unwrap_or(false))
        && any(60, &|s| p.second_match(s).unwrap_or(false))
}

/// An IANA time zone by name (`Europe/Berlin`, `UTC`).
///
/// # Errors
/// Field `tz`: the name is not one the tz database knows (names are matched exactly: no
/// surrounding spaces).
pub fn time_zone(name: &str) -> Result<TimeZone, SpecError> {
    TimeZone::get(name).map_err(|e| {
        SpecError::new(
            "tz",
            format!(
                "{name:?} is not an IANA time zone name (like \"Europe/Berlin\" or \"UTC\"): {e}"
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_pattern_or_zone_names_the_field() {
        let err = cron("0 25 * * *").unwrap_err().to_string();
        assert!(err.contains("hour") && err.contains("\"25\""), "{err}");
        let err = cron("0 9 * * FUNDAY").unwrap_err().to_string();
        assert!(err.contains("day of week"), "{err}");
        let err = cron("61 * * * * *").unwrap_err().to_string();
        assert!(err.contains("second"), "{err}");
        let err = cron("* * *").unwrap_err().to_string();
        assert!(err.contains("3 fields"), "{err}");
        let err = cron("0 0 30 2 *").unwrap_err().to_string();
        assert!(
            err.contains("day of month") && err.contains("no date"),
            "{err}"
        );
        assert!(
            cron("0 0 29 2 *").is_ok(),
            "29 February falls in leap years"
        );
        assert!(cron(" @daily ").is_ok());
        // croner skips empty list items: these parse with no hour or no second at all.
        for no_time in ["0 , * * *", ", * * * * *", "0 0 , * * *"] {
            let err = cron(no_time).unwrap_err().to_string();
            assert!(err.contains("no time of day"), "{no_time}: {err}");
        }
        let err = time_zone("Europe/Atlantis").unwrap_err().to_string();
        assert!(
            err.contains("tz") && err.contains("Europe/Atlantis"),
            "{err}"
        );
        assert!(time_zone("Europe/Kyiv").is_ok());
    }
}
