//! The examples' built binaries, for the tests that run them as processes. (The examples find
//! their Redis themselves: examples/lib.rs.)

use std::path::{Path, PathBuf};

/// The built binary of example `name`, for the tests that run an example as a process (it is
/// built by `cargo test --workspace`).
pub fn example_binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let path = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps")
        .join("examples")
        .join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    assert!(
        path.exists(),
        "{} is not built; run `cargo test --workspace`",
        path.display()
    );
    path
}
