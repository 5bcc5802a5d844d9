//! How a system declares its Lua scripts: one file a state change, under `scripts/<system>/`,
//! each with the system's shared prelude in front, compiled (hashed) once per process.

/// Declares a set of scripts: a struct with one `Script` per name, each the file
/// `src/scripts/<dir><name>.lua` with `prelude` in front, compiled (hashed) once per process.
macro_rules! scripts {
    ($set:ident, $static:ident, $dir:literal, $prelude:expr, [$($name:ident),* $(,)?]) => {
        pub(crate) struct $set {
            $(pub(crate) $name: redis::Script,)*
        }

        pub(crate) static $static: std::sync::LazyLock<$set> = std::sync::LazyLock::new(|| $set {
            $($name: redis::Script::new(&format!(
                "{}\n{}",
                $prelude,
                include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/scripts/", $dir, stringify!($name), ".lua"))
            )),)*
        });
    };
}
pub(crate) use scripts;
