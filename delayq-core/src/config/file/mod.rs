//! `delayq.toml`: read with the `toml` crate, every key and value with its span, so that each
//! problem is reported with its file and line, the full key, and the nearest valid name.

mod reader;
mod scope;
mod setting;
mod tree;

use std::path::{Path, PathBuf};

use toml::Spanned;

use super::env::CONFIG_VAR;
use super::options::Parsed;
use super::value::Raw;
use crate::error::Error;
use reader::Reader;
pub use scope::Scope;
pub use setting::FileSetting;
use tree::Node;

/// The file read when `DELAYQ_CONFIG` is not set, if it is there.
const DEFAULT_FILE: &str = "delayq.toml";

/// A configuration file whose syntax, option names and value types are checked.
#[derive(Debug, Clone)]
pub struct ConfigFile {
    /// Where it was read from.
    pub path: PathBuf,
    /// Every option it sets.
    pub settings: Vec<FileSetting>,
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
