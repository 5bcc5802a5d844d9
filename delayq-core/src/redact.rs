//! Hiding the secrets of a Redis URL (passwords in userinfo and in the query) before it is
//! shown in an error message or a log.

/// Returns `url` with every secret in it replaced by `***`, for error messages and logs: the
/// userinfo of each URL of a list (cluster seeds, sentinels) up to its last `@` — so a
/// password holding an unencoded `/`, `@` or `,` is hidden whole — and the value of a `pass`
/// or `password` query parameter (`redis+unix:///run/redis.sock?pass=…`). A user name stays.
pub fn redact_url(url: &str) -> String {
    let mut out = String::with_capacity(url.len());
    let starts: Vec<usize> = url.match_indices("://").map(|(i, _)| i + 3).collect();
    if starts.is_empty() {
        out.push_str(&redact_userinfo(url));
    } else {
        out.push_str(&url[..starts[0]]);
        for (n, &from) in starts.iter().enumerate() {
            let to = match starts.get(n + 1) {
                // The next URL's scheme (`,rediss`) is not part of this one.
                Some(next) => {
                    let scheme = url[..next - 3]
                        .trim_end_matches(|c: char| c.is_ascii_alphanumeric() || "+.-".contains(c));
                    scheme.len().max(from)
                }
                None => url.len(),
            };
            out.push_str(&redact_userinfo(&url[from..to]));
            out.push_str(&url[to..starts.get(n + 1).copied().unwrap_or(url.len())]);
        }
    }
    redact_query(&out)
}

/// `user:pass@rest` → `user:***@rest`; `token@rest` → `***@rest`. A unix socket's URL
/// (`redis+unix:///path?pass=…`) has no userinfo: its `@` can only be in the query.
fn redact_userinfo(body: &str) -> String {
    if body.starts_with('/') {
        return body.to_string();
    }
    let Some(at) = body.rfind('@') else {
        return body.to_string();
    };
    let (info, rest) = body.split_at(at);
    match info.split_once(':') {
        Some((user, _)) if !user.contains([',', '/']) => format!("{user}:***{rest}"),
        _ => format!("***{rest}"),
    }
}

/// `%70ass` → `pass`: a key as the client library reads it.
fn percent_decoded(key: &str) -> String {
    let bytes = key.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (
            bytes[i],
            bytes.get(i + 1).copied(),
            bytes.get(i + 2).copied(),
        ) {
            (b'%', Some(h), Some(l)) if hex(h).is_some() && hex(l).is_some() => {
                out.push((hex(h).unwrap_or(0) * 16 + hex(l).unwrap_or(0)) as u8);
                i += 3;
            }
            (b, ..) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Where a query value ends: at `&` or `#`, or where the next URL of a list starts
/// (`,redis://…`); a `,` or `@` inside is the value's (the client library reads it so).
fn value_end(rest: &str) -> usize {
    let mut end = rest.find(['&', '#']).unwrap_or(rest.len());
    for (i, _) in rest[..end].match_indices(',') {
        let next = rest[i + 1..].trim_start();
        let scheme = next.find("://").is_some_and(|s| {
            next[..s]
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c))
        });
        if scheme {
            end = i;
            break;
        }
    }
    end
}

/// The value of each `pass=` / `password=` query parameter (any case, percent-encoded or
/// not) → `***`.
fn redact_query(url: &str) -> String {
    let mut out = String::with_capacity(url.len());
    let mut rest = url;
    while let Some(q) = rest.find(['?', '&']) {
        out.push_str(&rest[..=q]);
        rest = &rest[q + 1..];
        let (param, tail) = rest.split_at(value_end(rest));
        match param.split_once('=') {
            Some((key, _))
                if ["pass", "password"]
                    .iter()
                    .any(|k| percent_decoded(key).eq_ignore_ascii_case(k)) =>
            {
                out.push_str(key);
                out.push_str("=***");
            }
            _ => out.push_str(param),
        }
        rest = tail;
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::redact_url;

    #[test]
    fn redacts_passwords_only() {
        assert_eq!(
            redact_url("redis://127.0.0.1:6379"),
            "redis://127.0.0.1:6379"
        );
        assert_eq!(
            redact_url("redis://app:s3cret@h:1/2"),
            "redis://app:***@h:1/2"
        );
        assert_eq!(redact_url("rediss://:s3cret@h:1"), "rediss://:***@h:1");
        assert_eq!(redact_url("redis://token@h"), "redis://***@h");
    }

    /// Every URL form the connection layer accepts, with a secret in every place one can
    /// stand: none shows, and what is not secret stays readable.
    #[test]
    fn hides_every_secret_of_every_form() {
        let table = [
            ("redis://:S1@h:6379", "redis://:***@h:6379"),
            ("rediss://app:S1@h:6380/0", "rediss://app:***@h:6380/0"),
            ("redis://:S1/S2@h:6379/0", "redis://:***@h:6379/0"),
            ("redis://app:S1@S2@h:6379", "redis://app:***@h:6379"),
            ("redis://app:S1,S2@h:6379", "redis://app:***@h:6379"),
            ("redis://app:S1%2FS2@h", "redis://app:***@h"),
            (
                "redis://:S1@10.0.0.1:7000,redis://:S2@10.0.0.2:7000",
                "redis://:***@10.0.0.1:7000,redis://:***@10.0.0.2:7000",
            ),
            (
                "redis://:S1@a:7000, rediss://app:S2@b:7000 ,redis://c:7000",
                "redis://:***@a:7000, rediss://app:***@b:7000 ,redis://c:7000",
            ),
            (
                "redis+sentinel://app:S1@h1:26379,h2:26380/mymaster",
                "redis+sentinel://app:***@h1:26379,h2:26380/mymaster",
            ),
            (
                "rediss+sentinel://:S1@h1:26379/mymaster",
                "rediss+sentinel://:***@h1:26379/mymaster",
            ),
            (
                "redis+sentinel://h1:26379,app:S1@h2:26380/m",
                "redis+sentinel://h1:***@h2:26380/m",
            ),
            (
                "redis+unix:///run/redis.sock?db=1&pass=S1",
                "redis+unix:///run/redis.sock?db=1&pass=***",
            ),
            (
                "unix:///run/redis.sock?user=app&password=S1&db=2",
                "unix:///run/redis.sock?user=app&password=***&db=2",
            ),
            (
                "redis://h:6379/0?PASSWORD=S1",
                "redis://h:6379/0?PASSWORD=***",
            ),
            (
                "redis+unix:///run/redis.sock?pass=S1,S2",
                "redis+unix:///run/redis.sock?pass=***",
            ),
            (
                "redis+unix:///run/redis.sock?db=1&pass=S1@S2",
                "redis+unix:///run/redis.sock?db=1&pass=***",
            ),
            (
                "redis+unix:///run/redis.sock?%70ass=S1",
                "redis+unix:///run/redis.sock?%70ass=***",
            ),
            (
                "redis://h:1/0?password=S1,redis://:S2@h2:2",
                "redis://h:1/0?password=***,redis://:***@h2:2",
            ),
            ("app:S1@h:6379", "app:***@h:6379"),
        ];
        for (url, want) in table {
            let got = redact_url(url);
            assert_eq!(got, want, "{url}");
            assert!(!got.contains("S1") && !got.contains("S2"), "{url} -> {got}");
        }
    }
}
