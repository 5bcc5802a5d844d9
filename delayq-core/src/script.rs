//! How a system declares its Lua scripts: one file a state change, under `scripts/<system>/`,
//! each with the parts of the system's shared prelude it uses in front, compiled (hashed) once
//! per process.

use std::collections::HashSet;

/// Declares a set of scripts: a struct with one `Script` per name, each the file
/// `src/scripts/<dir><name>.lua` with the parts of `prelude` it uses in front
/// ([`Prelude`]), compiled (hashed) once per process.
macro_rules! scripts {
    ($set:ident, $static:ident, $dir:literal, $prelude:expr, [$($name:ident),* $(,)?]) => {
        pub(crate) struct $set {
            $(pub(crate) $name: redis::Script,)*
        }

        impl $set {
            /// The script of this name, if the set has one.
            #[allow(dead_code)]
            pub(crate) fn named(&self, name: &str) -> Option<&redis::Script> {
                match name {
                    $(stringify!($name) => Some(&self.$name),)*
                    _ => None,
                }
            }
        }

        pub(crate) static $static: std::sync::LazyLock<$set> = std::sync::LazyLock::new(|| {
            // The prelude is read into parts once for the whole set.
            let prelude: &str = &$prelude;
            let prelude = $crate::script::Prelude::new(prelude);
            $set {
                $($name: redis::Script::new(&prelude.with(
                    include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/scripts/", $dir, stringify!($name), ".lua"))
                )),)*
            }
        });

        /// A test named for the set: each of its scripts, with only the prelude parts it uses,
        /// reads no global that it does not read with the whole prelude (a dropped part it
        /// needed would be one).
        #[cfg(test)]
        #[test]
        #[allow(non_snake_case)]
        fn $set() {
            let prelude: &str = &$prelude;
            for (name, body) in [$((
                stringify!($name),
                include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/scripts/", $dir, stringify!($name), ".lua")),
            ),)*] {
                $crate::script::assert_reads_no_new_global(prelude, name, body);
            }
        }
    };
}
pub(crate) use scripts;

/// `body` with the parts of `prelude` it uses in front (a [`Prelude`] read for one script).
#[cfg(test)]
pub(crate) fn with_prelude(prelude: &str, body: &str) -> String {
    Prelude::new(prelude).with(body)
}

/// A prelude read into its parts, once for a set of scripts: each script gets the parts it
/// uses, directly or through other parts, in front (in the prelude's order). Redis runs a
/// script's whole text at every call, and each `local function` of a prelude is a closure
/// made, its upvalues found, and garbage swept a call: the delay queue's whole prelude cost
/// some 71,000 instructions a call before the script did anything (callgrind, `return 1`
/// after it: 83,400 against 11,900 alone).
///
/// A part starts at a line that begins, unindented, with `local` (it defines the names before
/// its `=`, or the function's name) and runs to the next such line, with the unindented
/// comments before it. Every name a kept part or the body spells (outside comment lines) keeps
/// the parts that define it; a Lua local is seen only after its definition, so one pass from
/// the end finds them all. A name in a string or a trailing comment keeps a part it does not
/// need, which costs only that part; no use can be missed, since a local is reached only by its
/// name. An unindented line that starts anything else is a part that is always kept.
pub(crate) struct Prelude<'a> {
    parts: Vec<Part<'a>>,
    len: usize,
}

impl<'a> Prelude<'a> {
    pub(crate) fn new(prelude: &'a str) -> Self {
        Prelude {
            parts: parts(prelude),
            len: prelude.len(),
        }
    }

    /// `body` with the parts it uses in front.
    pub(crate) fn with(&self, body: &str) -> String {
        let mut need: HashSet<&str> = names_used(body).collect();
        let mut keep = vec![false; self.parts.len()];
        for (i, part) in self.parts.iter().enumerate().rev() {
            let wanted = match &part.defines {
                Some(names) => names.iter().any(|n| need.contains(n)),
                None => true,
            };
            if wanted {
                keep[i] = true;
                need.extend(names_used(part.text));
            }
        }
        let mut out = String::with_capacity(self.len + body.len() + 1);
        for (part, _) in self.parts.iter().zip(&keep).filter(|(_, k)| **k) {
            out.push_str(part.text);
        }
        out.push('\n');
        out.push_str(body);
        out
    }
}

/// One top-level statement of a prelude, with the comments before it.
struct Part<'a> {
    text: &'a str,
    /// The names a `local` statement defines; `None` for any other statement (always kept).
    defines: Option<Vec<&'a str>>,
}

fn parts(prelude: &str) -> Vec<Part<'_>> {
    // Byte offsets where a part starts: its first unindented comment line, if any.
    let mut starts: Vec<(usize, Option<Vec<&str>>)> = Vec::new();
    let mut comments_from: Option<usize> = None;
    let mut at = 0;
    for line in prelude.split_inclusive('\n') {
        let text = line.trim_end();
        let unindented = !text.is_empty() && !text.starts_with([' ', '\t']);
        if text.starts_with("--") || text.is_empty() {
            if text.starts_with("--") && comments_from.is_none() {
                comments_from = Some(at);
            }
        } else if unindented && !continues(text) {
            let from = comments_from.unwrap_or(at);
            starts.push((if starts.is_empty() { 0 } else { from }, defined(text)));
            comments_from = None;
        } else {
            comments_from = None;
        }
        at += line.len();
    }
    let mut out: Vec<Part> = Vec::with_capacity(starts.len());
    let mut starts = starts.into_iter().peekable();
    while let Some((from, defines)) = starts.next() {
        let to = starts.peek().map_or(prelude.len(), |next| next.0);
        out.push(Part {
            text: &prelude[from..to],
            defines,
        });
    }
    if out.is_empty() && !prelude.is_empty() {
        out.push(Part {
            text: prelude,
            defines: None,
        });
    }
    out
}

/// An unindented line that goes on with the statement before it (`end`, a closing bracket...).
fn continues(line: &str) -> bool {
    ["end", "}", ")", "]", "else", "elseif", "until"]
        .iter()
        .any(|w| line.starts_with(w) && !line[w.len()..].starts_with(is_name_char))
}

/// The names an unindented `local` line defines; `None` for another statement.
fn defined(line: &str) -> Option<Vec<&str>> {
    let rest = line.strip_prefix("local")?;
    if !rest.starts_with([' ', '\t']) {
        return None;
    }
    let rest = rest.trim_start();
    if let Some(f) = rest.strip_prefix("function") {
        let name = f.trim_start().split(|c: char| !is_name_char(c)).next()?;
        return Some(vec![name]);
    }
    let names = rest.split('=').next().unwrap_or(rest);
    Some(
        names
            .split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .collect(),
    )
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Every name `text` spells outside its comment lines.
fn names_used(text: &str) -> impl Iterator<Item = &str> {
    text.lines()
        .filter(|l| !l.trim_start().starts_with("--"))
        .flat_map(|l| l.split(|c: char| !is_name_char(c)))
        .filter(|w| w.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_'))
}

/// Fails unless `body` with the prelude parts it uses reads and writes only the globals it does
/// with the whole `prelude` in front, by the listings of Lua 5.1's compiler (`luac5.1`, as Redis
/// runs Lua 5.1; Debian's package `lua5.1`).
#[cfg(test)]
pub(crate) fn assert_reads_no_new_global(prelude: &str, name: &str, body: &str) {
    use std::io::Write;
    let globals = |text: &str| -> std::collections::BTreeSet<String> {
        let mut luac = std::process::Command::new("luac5.1")
            .args(["-l", "-p", "-"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("luac5.1 (Debian: `apt-get install -y lua5.1`) did not run: {e}")
            });
        luac.stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
        let out = luac.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.contains("GETGLOBAL") || l.contains("SETGLOBAL"))
            .filter_map(|l| l.rsplit("; ").next().map(str::to_string))
            .collect()
    };
    let whole = globals(&format!("{prelude}\n{body}"));
    let shaken = globals(&with_prelude(prelude, body));
    let new: Vec<_> = shaken.difference(&whole).collect();
    assert!(
        new.is_empty(),
        "{name} reads {new:?} as globals: a prelude part it needs was left out"
    );
    assert!(
        whole.contains("redis"),
        "{name}: the listing names no global: {whole:?}"
    );
}

#[cfg(test)]
mod tests;
