//! `delayq config check [FILE]`: a runtime's configuration file checked offline, with the same
//! reader the runtime uses.

use delayq_core::config::ConfigFile;
use serde_json::json;

use super::outcome::{emit, Outcome};
use crate::args::ConfigCommand;
use crate::failure::Failure;
use crate::report::table;

pub(super) fn run(json: bool, action: ConfigCommand) -> Outcome {
    let ConfigCommand::Check { file } = action;
    let Some(path) = ConfigFile::locate(file.as_deref()) else {
        return Err(Failure::Failed(
            "no configuration file: give one (delayq config check FILE), set DELAYQ_CONFIG, or run where delayq.toml is".into(),
        ));
    };
    let (file, problems) = ConfigFile::read_checked(&path)?;
    if !problems.is_empty() {
        return Err(Failure::Usage(format!(
            "{} problem{} in {}:\n{}",
            problems.len(),
            if problems.len() == 1 { "" } else { "s" },
            path.display(),
            problems.join("\n")
        )));
    }
    emit(
        json,
        json!({
            "file": path.display().to_string(),
            "settings": file.settings.iter().map(|s| json!({
                "key": s.scope.key(s.option),
                "value": s.value.to_string(),
                "line": s.line,
            })).collect::<Vec<_>>(),
        }),
        || {
            let mut t = table(&["LINE", "KEY", "VALUE"]);
            for s in &file.settings {
                t.add_row(vec![
                    s.line.to_string(),
                    s.scope.key(s.option),
                    s.value.to_string(),
                ]);
            }
            format!(
                "{}: ok, {} option{} (syntax, names and types; whether each listener exists is checked when the service starts)\n{t}",
                path.display(),
                file.settings.len(),
                if file.settings.len() == 1 { "" } else { "s" }
            )
        },
    )?;
    Ok(())
}
