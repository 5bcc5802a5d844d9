//! Walks the TOML tree: checks every key and value against the options catalogue and
//! remembers each problem, with its line and the nearest valid name, rather than stopping at
//! the first.

use std::path::Path;

use toml::Spanned;

use super::scope::{quoted, shape, Scope};
use super::setting::FileSetting;
use super::tree::Node;
use crate::config::options::{options, parse, synonym, Kind};
use crate::config::suggest::did_you_mean;
use crate::config::value::Raw;

/// Reads the file and remembers problems rather than stopping at the first.
pub(super) struct Reader<'a> {
    /// The file, or the label of another source (then without lines).
    pub(super) path: &'a Path,
    pub(super) lines: bool,
    pub(super) text: &'a str,
    pub(super) settings: Vec<FileSetting>,
    pub(super) problems: Vec<(usize, String)>,
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
    pub(super) fn exclusive_options(&mut self) {
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

    pub(super) fn problem(&mut self, offset: usize, message: String) {
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

    pub(super) fn document(&mut self, top: &[(Spanned<String>, Spanned<Node>)]) {
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
