//! Typed errors. Each message says what went wrong and what to do next.

use crate::env::UrlOrigin;

/// Everything delayq can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The Redis URL does not parse.
    #[error("invalid Redis URL {url:?}: {reason}; expected redis://[user:password@]host:port[/db] or rediss:// for TLS")]
    InvalidUrl {
        /// The URL, with any password replaced by `***`.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Redis could not be reached.
    #[error("cannot connect to Redis at {url} ({origin}): {source}; is Redis running there? {}", origin.remedy())]
    Connect {
        /// The URL, with any password replaced by `***`.
        url: String,
        /// Where the URL came from.
        origin: UrlOrigin,
        /// What the client reported.
        source: redis::RedisError,
    },
    /// The Redis server is older than delayq's scripts need.
    #[error("Redis at {url} is version {found}; delayq needs Redis {minimum} or newer (its scripts use ZMSCORE and ZADD GT). Upgrade Redis")]
    RedisTooOld {
        /// The URL, with any password replaced by `***`.
        url: String,
        /// The version the server reported.
        found: String,
        /// The oldest version delayq runs on.
        minimum: String,
    },
    /// The CA file named by `DELAYQ_REDIS_CA_FILE` cannot be read.
    #[error("cannot read the CA file {} named by DELAYQ_REDIS_CA_FILE: {source}", path.display())]
    CaFile {
        /// The path as given.
        path: std::path::PathBuf,
        /// Why it cannot be read.
        source: std::io::Error,
    },
    /// The TLS handshake failed, typically because the server's certificate is not trusted.
    #[error("TLS with Redis at {url} failed: {source}; if the server's certificate comes from a private CA, set DELAYQ_REDIS_CA_FILE to that CA's PEM file")]
    Tls {
        /// The URL, with any password replaced by `***`.
        url: String,
        /// What the client reported.
        source: redis::RedisError,
    },
    /// Redis refused the user name or password.
    #[error("Redis at {url} ({origin}) rejected the credentials: {source}; check the user and password in that URL (redis://user:password@host:port)")]
    Auth {
        /// The URL, with any password replaced by `***`.
        url: String,
        /// Where the URL came from.
        origin: UrlOrigin,
        /// What the server said.
        source: redis::RedisError,
    },
    /// A Redis command failed (network, server error, ACL denial, ...).
    #[error("Redis error: {0}")]
    Redis(#[from] redis::RedisError),
    /// A key under the namespace holds a value of another type than delayq stores there.
    #[error("key {key:?} holds a {found} where delayq keeps a {expected}; another program wrote it. Rename or delete that key, or use another DELAYQ_NAMESPACE")]
    WrongType {
        /// The key.
        key: String,
        /// The Redis type delayq expects.
        expected: &'static str,
        /// The Redis type found.
        found: String,
    },
    /// A stored envelope does not parse.
    #[error("the envelope of message {id:?} in {key:?} does not parse: {reason}")]
    CorruptEnvelope {
        /// The hash holding the envelope.
        key: String,
        /// The message id.
        id: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A topic name outside `[A-Za-z0-9._:-]{1,128}`.
    #[error("invalid topic {topic:?}: {reason}; a topic is 1 to 128 characters from A-Z a-z 0-9 . _ : -")]
    InvalidTopic {
        /// The rejected name.
        topic: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A stream, group or leader-task name outside `[A-Za-z0-9._:-]{1,128}` (the same rule as
    /// topics, so that every key of a stream shares its Redis Cluster slot).
    #[error("invalid {kind} name {name:?}: {reason}; a {kind} name is 1 to 128 characters from A-Z a-z 0-9 . _ : -")]
    InvalidName {
        /// `stream`, `group` or `leader`.
        kind: &'static str,
        /// The rejected name.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A namespace outside `[A-Za-z0-9._:-]{1,64}`.
    #[error("invalid namespace {namespace:?}: a namespace is 1 to 64 characters from A-Z a-z 0-9 . _ : -")]
    InvalidNamespace {
        /// The rejected namespace.
        namespace: String,
    },
    /// A message id that cannot be used.
    #[error("invalid message id {id:?}: {reason}")]
    InvalidId {
        /// The rejected id.
        id: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The encoded payload is larger than the producer's limit. Nothing was written.
    #[error("payload of {size} bytes is over the limit of {limit} bytes; nothing was sent. Send a reference (a key or URL) instead, or raise the limit with Producer::with_max_payload")]
    PayloadTooLarge {
        /// Encoded size in bytes.
        size: usize,
        /// The limit in bytes.
        limit: usize,
    },
    /// A due time later than delayq can store.
    #[error("due time {requested_ms} ms since the epoch is past the latest delayq stores, {limit_ms} ms (the end of year 9999); nothing was sent")]
    DueTooFar {
        /// The requested due time (ms since the epoch, by this machine's clock for a delay).
        requested_ms: u128,
        /// The latest due time that can be stored.
        limit_ms: u64,
    },
    /// The payload could not be serialized to JSON.
    #[error("cannot encode the payload as JSON: {0}")]
    Encode(#[from] serde_json::Error),
    /// Fewer replicas than [`SendOptions::replicas`](crate::SendOptions::replicas) asked for
    /// acknowledged the write in time. The message was written and may still survive.
    #[error("only {acked} of {wanted} replicas acknowledged the write in time; the message was written to the primary and may still survive, but a failover now could lose it")]
    NotReplicated {
        /// Replicas that acknowledged it.
        acked: usize,
        /// Replicas asked for.
        wanted: u32,
    },
    /// A send option with a value that cannot be used. Nothing was sent.
    #[error("invalid {option}: {reason}; nothing was sent")]
    InvalidOption {
        /// The option.
        option: &'static str,
        /// What is wrong with its value.
        reason: String,
    },
    /// A schedule that cannot be used: a cron pattern, time zone, interval or name.
    #[error("invalid schedule {field}: {reason}")]
    InvalidSchedule {
        /// What is at fault: `cron <field>` (`cron hour`, …), `cron`, `tz`, `every` or `name`.
        field: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A runtime setting that cannot be used.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// One failure shared by several calls that went to Redis together (the runtime
    /// coalesces the acks of a topic into one script call; when it fails, each ack gets it).
    #[error(transparent)]
    Shared(std::sync::Arc<Error>),
    /// The runtime stopped before the call could be made.
    #[error("the delayq runtime has stopped; the call was not made")]
    Stopped,
    /// The process could not listen for SIGINT or SIGTERM.
    #[error("cannot listen for {signal}: {source}")]
    Signal {
        /// Which signal.
        signal: &'static str,
        /// What the OS said.
        source: std::io::Error,
    },
    /// A shutdown could not hand these claimed messages back before its deadline (Redis did
    /// not answer); they are delivered again after their ack deadline.
    #[error("{count} claimed messages could not be handed back at shutdown; they are delivered again after their ack deadline")]
    Unreturned {
        /// How many.
        count: usize,
    },
    /// Two listeners in one binary handle the same topic (or stream and group), or two
    /// leader tasks share a name.
    #[error("two functions are registered for {topic}: {first} and {second}; each has one per binary (raise `concurrency` instead)")]
    DuplicateListener {
        /// What both claim: `topic "t"`, `stream "s" group "g"` or `leader task "n"`.
        topic: String,
        /// One function.
        first: String,
        /// The other.
        second: String,
    },
    /// The namespace holds data in another key layout than this build's.
    #[error("namespace {namespace:?} holds delayq data in layout {found}; this build reads and writes layout {expected}, so it leaves it alone: run a delayq of layout {found} against it, or use another DELAYQ_NAMESPACE")]
    LayoutMismatch {
        /// The namespace.
        namespace: String,
        /// The version it holds (`ns:layout`).
        found: String,
        /// This build's.
        expected: u32,
    },
    /// Redis answered with something delayq's scripts never return.
    #[error("unexpected reply from Redis to {command}: {detail}")]
    UnexpectedReply {
        /// Which call.
        command: &'static str,
        /// What came back.
        detail: String,
    },
}

impl Error {
    /// Redis answered `command` with something delayq's scripts never return.
    /// Whether Redis answered MOVED or ASK: the command ran nowhere, and another node serves
    /// the key now.
    pub(crate) fn redirected(&self) -> bool {
        matches!(self, Error::Redis(e) if matches!(e.code(), Some("MOVED" | "ASK")))
    }

    pub(crate) fn unexpected(command: &'static str, reply: &impl std::fmt::Debug) -> Self {
        Error::UnexpectedReply {
            command,
            detail: format!("{reply:?}"),
        }
    }
}

/// The result type of delayq calls.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why an `Ack` call failed.
#[derive(Debug, thiserror::Error)]
pub enum AckError {
    /// This delivery no longer owns the message: its ack deadline passed and it was handed to
    /// another delivery (or it was already settled). Nothing was changed.
    #[error("stale delivery: the message was redelivered or settled after this delivery's ack deadline; nothing was changed")]
    Stale,
    /// The settle call itself failed (Redis unreachable or refusing, the runtime stopped);
    /// nothing was changed, so the message stays claimed and is delivered again after its
    /// deadline unless a retry of the call succeeds.
    #[error(transparent)]
    Failed(#[from] Error),
}

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
