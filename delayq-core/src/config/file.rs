//! `delayq.toml`: read with the `toml` crate, every key and value with its span, so that each
//! problem is reported with its file and line, the full key, and the nearest valid name.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use toml::Spanned;

use super::env::CONFIG_VAR;
use super::options::{options, parse, synonym, Kind, Parsed};
use super::suggest::did_you_mean;
use super::value::{ConfigValue, Raw};
use crate::error::Error;

/// The file read when `DELAYQ_CONFIG` is not set, if it is there.
const DEFAULT_FILE: &str = "delayq.toml";

/// What a set of options applies to, by name as written.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scope {
    /// The runtime (top-level keys).
    Runtime,
    /// The delay listener of a topic.
    Listener(String),
    /// The stream listener of a stream and group.
    Stream(String, String),
    /// A leader task.
    LeaderTask(String),
    /// A `#[scheduled]` fn.
    Schedule(String),
}

impl Scope {
    /// The kind of component.
    pub fn kind(&self) -> Kind {
        match self {
            Scope::Runtime => Kind::Runtime,
            Scope::Listener(_) => Kind::Listener,
            Scope::Stream(..) => Kind::Stream,
            Scope::LeaderTask(_) => Kind::LeaderTask,
            Scope::Schedule(_) => Kind::Schedule,
        }
    }

    /// The name shown for it: the topic, `stream/group`, the task's or schedule's name.
    pub fn name(&self) -> String {
        match self {
            Scope::Runtime => String::new(),
            Scope::Listener(n) | Scope::LeaderTask(n) | Scope::Schedule(n) => n.clone(),
            Scope::Stream(s, g) => format!("{s}/{g}"),
        }
    }

    /// The full key of `option` in the file's syntax: `listeners."order.timeout".concurrency`.
    /// The option is quoted like any name (a typo as written may carry anything).
    pub fn key(&self, option: &str) -> String {
        match self {
            Scope::Runtime => quoted(option),
            _ => format!("{}.{}", self.table_key(), quoted(option)),
        }
    }

    /// The key of the table holding this component's options: `listeners."order.timeout"`
    /// (empty for the runtime, whose options stand at the top of the file).
    fn table_key(&self) -> String {
        let table = self.kind().table();
        match self {
            Scope::Runtime => String::new(),
            Scope::Listener(n) | Scope::LeaderTask(n) | Scope::Schedule(n) => {
                format!("{table}.{}", quoted(n))
            }
            Scope::Stream(s, g) => format!("{table}.{}.{}", quoted(s), quoted(g)),
        }
    }
}

/// A TOML key, quoted unless bare.
fn quoted(name: &str) -> String {
    let bare = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if bare {
        name.to_string()
    } else {
        format!("{name:?}")
    }
}

/// The table header of one component of `kind`, as a hint: `listeners."<topic>"`.
fn shape(kind: Kind) -> &'static str {
    match kind {
        Kind::Runtime => "the top of the file",
        Kind::Listener => "listeners.\"<topic>\"",
        Kind::Stream => "streams.\"<stream>\".\"<group>\"",
        Kind::LeaderTask => "leader_tasks.\"<name>\"",
        Kind::Schedule => "schedules.\"<name>\"",
    }
}

/// One option set in the file.
#[derive(Debug, Clone)]
pub struct FileSetting {
    /// What it applies to.
    pub scope: Scope,
    /// The option (one `scope`'s kind takes).
    pub option: &'static str,
    /// The checked value.
    pub value: Parsed,
    /// Its line (1-based).
    pub line: usize,
}

/// A configuration file whose syntax, option names and value types are checked.
#[derive(Debug, Clone)]
pub struct ConfigFile {
    /// Where it was read from.
    pub path: PathBuf,
    /// Every option it sets.
    pub settings: Vec<FileSetting>,
}

/// A TOML item with the span of each key and value.
enum Node {
    Table(Vec<(Spanned<String>, Spanned<Node>)>),
    Value(Raw),
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(NodeVisitor)
    }
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = Node;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a TOML value or table")
    }
    fn visit_bool<E: de::Error>(self, b: bool) -> Result<Node, E> {
        Ok(Node::Value(Raw::Typed(ConfigValue::Bool(b))))
    }
    fn visit_i64<E: de::Error>(self, n: i64) -> Result<Node, E> {
        Ok(Node::Value(Raw::Typed(ConfigValue::Int(n))))
    }
    fn visit_u64<E: de::Error>(self, n: u64) -> Result<Node, E> {
        Ok(Node::Value(Raw::Typed(n.into())))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Node, E> {
        Ok(Node::Value(Raw::Other("decimal number")))
    }
    fn visit_str<E: de::Error>(self, s: &str) -> Result<Node, E> {
        Ok(Node::Value(Raw::Typed(ConfigValue::Text(s.to_string()))))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Node::Value(Raw::Other("array")))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
        let mut entries = Vec::new();
        while let Some(key) = map.next_key::<Spanned<String>>()? {
            let value = map.next_value::<Spanned<Node>>()?;
            entries.push((key, value));
        }
        Ok(Node::Table(entries))
    }
}

/// Reads the file and remembers problems rather than stopping at the first.
struct Reader<'a> {
    /// The file, or the label of another source (then without lines).
    path: &'a Path,
    lines: bool,
    text: &'a str,
    settings: Vec<FileSetting>,
    problems: Vec<(usize, String)>,
}

impl Reader<'_> {
    fn line(&self, offset: usize) -> usize {
        self.text[..offset.min(self.text.len())]
            .matches('\n')
            .count()
            + 1
    }

    /// A schedule's `cron` and `every` exclude each other: both in one file is a problem
    /// (the runtime reads the file with this same check, so `config check` refuses what the
    /// runtime would).
    fn exclusive_options(&mut self) {
        let mut found = Vec::new();
        for s in self.settings.iter().filter(|s| s.option == "cron") {
            if let Some(every) = self
                .settings
                .iter()
                .find(|e| e.option == "every" && e.scope == s.scope)
            {
                found.push((
                    s.line.max(every.line),
                    format!(
                        "{}: both cron (line {}) and every (line {}) are set; set one of them",
                        s.scope.table_key(),
                        s.line,
                        every.line
                    ),
                ));
            }
        }
        for (line, message) in found {
            self.problem_on(line, message);
        }
    }

    fn problem(&mut self, offset: usize, message: String) {
        let line = self.line(offset);
        self.problem_on(line, message);
    }

    fn problem_on(&mut self, line: usize, message: String) {
        let at = if self.lines {
            format!("{}:{line}", self.path.display())
        } else {
            self.path.display().to_string()
        };
        self.problems.push((line, format!("{at}: {message}")));
    }

    /// The entries of a table, or a problem when `node` is a value.
    fn table<'n>(
        &mut self,
        node: &'n Spanned<Node>,
        key: &str,
        shape: &str,
    ) -> Option<&'n [(Spanned<String>, Spanned<Node>)]> {
        match node.get_ref() {
            Node::Table(entries) => Some(entries),
            Node::Value(_) => {
                self.problem(
                    node.span().start,
                    format!("{key}: expected a table, like [{shape}]"),
                );
                None
            }
        }
    }

    fn options(&mut self, scope: Scope, node: &Spanned<Node>) {
        let key = scope.table_key();
        let Some(entries) = self.table(node, &key, shape(scope.kind())) else {
            return;
        };
        for (key, value) in entries {
            self.option(scope.clone(), key, value);
        }
    }

    fn option(&mut self, scope: Scope, key: &Spanned<String>, value: &Spanned<Node>) {
        let known = options(scope.kind());
        let full = scope.key(key.get_ref());
        let Some((option, kind)) = known.iter().find(|(name, _)| name == key.get_ref()) else {
            let hint = match synonym(scope.kind(), key.get_ref()) {
                Some(name) => format!("; did you mean {name:?}?"),
                None => did_you_mean(key.get_ref(), known.iter().map(|(n, _)| *n)),
            };
            let noun = scope.kind().noun();
            self.problem(
                key.span().start,
                format!("{full}: unknown option of a {noun}{hint}"),
            );
            return;
        };
        let raw = match value.get_ref() {
            Node::Value(raw) => raw.clone(),
            Node::Table(_) => Raw::Other("table"),
        };
        match parse(*kind, &raw) {
            Ok(parsed) => {
                let line = self.line(value.span().start);
                self.settings.push(FileSetting {
                    scope,
                    option,
                    value: parsed,
                    line,
                });
            }
            Err(e) => self.problem(value.span().start, format!("{full}: {e}")),
        }
    }

    fn document(&mut self, top: &[(Spanned<String>, Spanned<Node>)]) {
        for (key, value) in top {
            let name = key.get_ref().as_str();
            match name {
                "listeners" | "leader_tasks" | "schedules" => {
                    let kind = match name {
                        "listeners" => Kind::Listener,
                        "leader_tasks" => Kind::LeaderTask,
                        _ => Kind::Schedule,
                    };
                    let Some(entries) = self.table(value, name, shape(kind)) else {
                        continue;
                    };
                    for (component, options) in entries {
                        let n = component.get_ref().clone();
                        let scope = match kind {
                            Kind::Listener => Scope::Listener(n),
                            Kind::LeaderTask => Scope::LeaderTask(n),
                            _ => Scope::Schedule(n),
                        };
                        self.options(scope, options);
                    }
                }
                "streams" => {
                    let shape = shape(Kind::Stream);
                    let Some(streams) = self.table(value, name, shape) else {
                        continue;
                    };
                    for (stream, groups) in streams {
                        let key = format!("streams.{}", quoted(stream.get_ref()));
                        let Some(groups) = self.table(groups, &key, shape) else {
                            continue;
                        };
                        for (group, options) in groups {
                            let scope =
                                Scope::Stream(stream.get_ref().clone(), group.get_ref().clone());
                            self.options(scope, options);
                        }
                    }
                }
                _ => {
                    if options(Kind::Runtime).iter().any(|(n, _)| *n == name) {
                        self.option(Scope::Runtime, key, value);
                    } else {
                        let names = options(Kind::Runtime).iter().map(|(n, _)| *n).chain([
                            "listeners",
                            "streams",
                            "leader_tasks",
                            "schedules",
                        ]);
                        let hint = did_you_mean(name, names);
                        self.problem(
                            key.span().start,
                            format!("{}: unknown key{hint}", quoted(name)),
                        );
                    }
                }
            }
        }
    }
}

impl ConfigFile {
    /// Checks `text` as the file at `path`: its syntax, option names and value types. The
    /// error lists every problem, each as `path:line: key: what is wrong`.
    ///
    /// # Errors
    /// Every problem, one line each.
    pub fn parse(path: &Path, text: &str) -> Result<ConfigFile, Vec<String>> {
        let (file, problems) = ConfigFile::check(path, text);
        if problems.is_empty() {
            Ok(file)
        } else {
            Err(problems)
        }
    }

    /// The settings that check out, and the problems of the rest (in the file's order).
    pub fn check(path: &Path, text: &str) -> (ConfigFile, Vec<String>) {
        let mut file = ConfigFile {
            path: path.to_path_buf(),
            settings: Vec::new(),
        };
        let top = match toml::from_str::<Spanned<Node>>(text) {
            Ok(top) => top,
            Err(e) => {
                let line = e
                    .span()
                    .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1)
                    .unwrap_or(1);
                let message = e.message().trim().to_string();
                return (file, vec![format!("{}:{line}: {message}", path.display())]);
            }
        };
        let mut reader = Reader {
            path,
            lines: true,
            text,
            settings: Vec::new(),
            problems: Vec::new(),
        };
        match top.get_ref() {
            Node::Table(entries) => reader.document(entries),
            Node::Value(_) => reader.problem(0, "expected a TOML document".into()),
        }
        reader.exclusive_options();
        // toml hands a table's keys over sorted by name; report in the file's order.
        reader.problems.sort_by_key(|(line, _)| *line);
        file.settings = reader.settings;
        file.settings.sort_by_key(|s| s.line);
        (file, reader.problems.into_iter().map(|(_, p)| p).collect())
    }

    /// Checks one option given by another source as a TOML key (`listeners."order.timeout".
    /// concurrency`) and a value: (what it applies to, the option, the value). `label` names
    /// the source in the error.
    ///
    /// # Errors
    /// The problem, as the file would report it.
    pub fn setting(
        label: &str,
        key: &str,
        raw: Raw,
    ) -> Result<(Scope, &'static str, Parsed), String> {
        let snippet = format!("{key} = 0");
        let mut top = toml::from_str::<Spanned<Node>>(&snippet)
            .map_err(|e| format!("{label}: {key:?} is not a key: {}", e.message().trim()))?;
        // The one leaf of `a.b.c = 0` takes the given value.
        let mut node = top.get_mut();
        loop {
            match node {
                Node::Table(entries) if entries.len() == 1 => node = entries[0].1.get_mut(),
                Node::Value(v) => {
                    *v = raw;
                    break;
                }
                Node::Table(_) => return Err(format!("{label}: {key:?} is not one key")),
            }
        }
        let mut reader = Reader {
            path: Path::new(label),
            lines: false,
            text: &snippet,
            settings: Vec::new(),
            problems: Vec::new(),
        };
        if let Node::Table(entries) = top.get_ref() {
            reader.document(entries);
        }
        match (reader.problems.pop(), reader.settings.pop()) {
            (Some((_, problem)), _) => Err(problem),
            (None, Some(s)) => Ok((s.scope, s.option, s.value)),
            (None, None) => Err(format!("{label}: {key:?} sets no option")),
        }
    }

    /// Reads and checks the file at `path`.
    ///
    /// # Errors
    /// [`Error::Config`] when it cannot be read, or lists every problem in it.
    pub fn read(path: &Path) -> Result<ConfigFile, Error> {
        let (file, problems) = ConfigFile::read_checked(path)?;
        if problems.is_empty() {
            Ok(file)
        } else {
            Err(Error::Config(problems.join("\n")))
        }
    }

    /// Reads the file at `path`: what checks out, and the problems of the rest.
    ///
    /// # Errors
    /// [`Error::Config`] when it cannot be read.
    pub fn read_checked(path: &Path) -> Result<(ConfigFile, Vec<String>), Error> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            Error::Config(format!(
                "cannot read the configuration file {}: {e}",
                path.display()
            ))
        })?;
        Ok(ConfigFile::check(path, &text))
    }

    /// The file the runtime reads: `explicit` if given, else the path in `DELAYQ_CONFIG`,
    /// else `./delayq.toml` when it exists; `None` when there is none.
    pub fn locate(explicit: Option<&Path>) -> Option<PathBuf> {
        if let Some(path) = explicit {
            return Some(path.to_path_buf());
        }
        match std::env::var_os(CONFIG_VAR) {
            Some(path) if !path.is_empty() => Some(PathBuf::from(path)),
            _ => Path::new(DEFAULT_FILE)
                .is_file()
                .then(|| PathBuf::from(DEFAULT_FILE)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
redis_url = "redis://10.0.0.1:6379"
namespace = "shop"
shutdown_grace = "30s"

[listeners."order.timeout"]
concurrency = 64
max_attempts = 5

[listeners."order.remind"]
enabled = false

[streams."orders.v1".billing]
concurrency = 32

[schedules.daily-report]
tz = "America/New_York"
"#;

    #[test]
    fn reads_the_contract_example() {
        let file = ConfigFile::parse(Path::new("delayq.toml"), GOOD).unwrap();
        let find = |scope: &Scope, option: &str| {
            file.settings
                .iter()
                .find(|s| &s.scope == scope && s.option == option)
                .map(|s| (s.value.to_string(), s.line))
        };
        let timeout = Scope::Listener("order.timeout".into());
        assert_eq!(find(&timeout, "concurrency"), Some(("64".into(), 7)));
        assert_eq!(find(&timeout, "max_attempts"), Some(("5".into(), 8)));
        assert_eq!(
            find(&Scope::Listener("order.remind".into()), "enabled"),
            Some(("false".into(), 11))
        );
        assert_eq!(
            find(
                &Scope::Stream("orders.v1".into(), "billing".into()),
                "concurrency"
            ),
            Some(("32".into(), 14))
        );
        assert_eq!(
            find(&Scope::Schedule("daily-report".into()), "tz"),
            Some(("America/New_York".into(), 17))
        );
        assert_eq!(
            find(&Scope::Runtime, "shutdown_grace"),
            Some(("30s".into(), 4))
        );
    }

    #[test]
    fn every_problem_is_named_with_its_line_and_the_nearest_name() {
        let text = "namespce = \"x\"\n\n[listeners.\"a.b\"]\nconcurency = 4\nack_timeout = 30\n\n[streams.s.g]\nmax_attempts = 3\n";
        let problems = ConfigFile::parse(Path::new("conf/delayq.toml"), text).unwrap_err();
        assert_eq!(problems.len(), 4, "{problems:#?}");
        assert_eq!(
            problems[0],
            "conf/delayq.toml:1: namespce: unknown key; did you mean \"namespace\"?"
        );
        assert_eq!(
            problems[1],
            "conf/delayq.toml:4: listeners.\"a.b\".concurency: unknown option of a delay listener; did you mean \"concurrency\"?"
        );
        assert!(
            problems[2].starts_with(
                "conf/delayq.toml:5: listeners.\"a.b\".ack_timeout: expected a duration"
            ),
            "{}",
            problems[2]
        );
        assert!(problems[3].starts_with("conf/delayq.toml:8: streams.s.g.max_attempts: unknown option of a stream listener; did you mean \"max_deliveries\"?"), "{}", problems[3]);
    }

    #[test]
    fn an_unknown_option_is_shown_quoted_with_its_control_characters_escaped() {
        let text = "[listeners.a]\n\"\\u001b]0;owned\\u0007\" = 1\n";
        let problems = ConfigFile::parse(Path::new("d.toml"), text).unwrap_err();
        assert_eq!(
            problems,
            ["d.toml:2: listeners.a.\"\\u{1b}]0;owned\\u{7}\": unknown option of a delay listener"]
        );
    }

    #[test]
    fn an_option_where_a_table_belongs_names_the_table_it_takes() {
        let text = "[streams.orders]\nconcurrency = 3\n\n[listeners]\nconcurrency = 3\n";
        let problems = ConfigFile::parse(Path::new("d.toml"), text).unwrap_err();
        assert_eq!(
            problems,
            [
                "d.toml:2: streams.orders.concurrency: expected a table, like [streams.\"<stream>\".\"<group>\"]",
                "d.toml:5: listeners.concurrency: expected a table, like [listeners.\"<topic>\"]",
            ]
        );
    }

    #[test]
    fn a_syntax_error_names_its_line() {
        let problems =
            ConfigFile::parse(Path::new("d.toml"), "a = 1\n[listeners.x\nb = 2\n").unwrap_err();
        assert!(problems[0].starts_with("d.toml:2: "), "{problems:?}");
    }

    /// What the runtime refuses, the file check refuses: a schedule with cron and every.
    #[test]
    fn a_schedule_with_both_cron_and_every_is_refused() {
        let text = "[schedules.report]\ncron = \"0 9 * * *\"\ntz = \"UTC\"\nevery = \"5m\"\n";
        let problems = ConfigFile::parse(Path::new("d.toml"), text).unwrap_err();
        assert_eq!(
            problems,
            ["d.toml:4: schedules.report: both cron (line 2) and every (line 4) are set; set one of them"]
        );
    }
}
