//! "Did you mean": the nearest valid name to a typo.

/// The candidate nearest to `typo` by edit distance (ignoring case), if one is near enough to be
/// a likely typo (at most a third of its length away, and at least one edit allowed).
pub fn nearest<'a>(typo: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let typo_lower = typo.to_ascii_lowercase();
    let limit = (typo.chars().count() / 3).max(2);
    candidates
        .into_iter()
        .map(|c| (strsim::levenshtein(&typo_lower, &c.to_ascii_lowercase()), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, c)| (*d, *c))
        .map(|(_, c)| c)
}

/// `; did you mean "x"?`, or nothing.
pub(crate) fn did_you_mean<'a>(
    typo: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> String {
    match nearest(typo, candidates) {
        Some(c) => format!("; did you mean {c:?}?"),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::nearest;

    #[test]
    fn finds_the_nearest_name() {
        let names = [
            "concurrency",
            "max_attempts",
            "ack_timeout",
            "backoff",
            "enabled",
        ];
        assert_eq!(nearest("concurency", names), Some("concurrency"));
        assert_eq!(nearest("max_atempts", names), Some("max_attempts"));
        assert_eq!(nearest("ENABLED", names), Some("enabled"));
        assert_eq!(nearest("colour", names), None);
    }
}
