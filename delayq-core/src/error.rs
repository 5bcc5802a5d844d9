//! Typed errors. Each message says what went wrong and what to do next.

use crate::env::UrlOrigin;
// Also here, where `config/` has always found it (`crate::error::redact_url`).
pub use crate::redact::redact_url;

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
    /// `send_and_wait` did not get a value: the message ended otherwise, or had not ended
    /// when the timeout passed.
    #[error("message {id:?} of topic {topic:?} did not finish with a value: {outcome}")]
    NotDone {
        /// The topic.
        topic: String,
        /// The message id.
        id: String,
        /// How it stands.
        outcome: Unfinished,
    },
    /// A flow that cannot be started: nothing was written.
    #[error("invalid flow: {reason}; nothing was written")]
    InvalidFlow {
        /// What is wrong, naming the step (a cycle names its steps).
        reason: String,
    },
    /// A kept result does not decode into the type asked for.
    #[error("the result of message {id:?} of topic {topic:?} {reason}")]
    ResultDecode {
        /// The topic.
        topic: String,
        /// The message id.
        id: String,
        /// Why (the decoding error).
        reason: String,
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
    /// Whether Redis answered MOVED or ASK: the command ran nowhere, and another node serves
    /// the key now.
    pub(crate) fn redirected(&self) -> bool {
        matches!(self, Error::Redis(e) if matches!(e.code(), Some("MOVED" | "ASK")))
    }

    /// Redis answered `command` with something delayq's scripts never return.
    pub(crate) fn unexpected(command: &'static str, reply: &impl std::fmt::Debug) -> Self {
        Error::UnexpectedReply {
            command,
            detail: format!("{reply:?}"),
        }
    }
}

/// How a message had not ended well, in [`Error::NotDone`] (`send_and_wait`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unfinished {
    /// It is dead, for this reason.
    Dead(String),
    /// It was cancelled.
    Cancelled,
    /// Still pending when the timeout passed.
    TimedOut,
    /// Not sent: the timeout passed before its end could be listened for (Redis did not
    /// answer in time, or refuses pub/sub).
    NotSent,
    /// Nothing is known of it (purged, or gone before its end was heard).
    Unknown,
}

impl std::fmt::Display for Unfinished {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unfinished::Dead(reason) => write!(f, "it is dead: {reason}"),
            Unfinished::Cancelled => f.write_str("it was cancelled"),
            Unfinished::TimedOut => f.write_str("it was still pending when the timeout passed"),
            Unfinished::NotSent => f.write_str(
                "it was not sent: the timeout passed before its end could be listened for",
            ),
            Unfinished::Unknown => {
                f.write_str("nothing is known of it (purged, or its outcome was not kept)")
            }
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
