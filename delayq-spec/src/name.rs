//! The rule for names that become part of Redis keys: topics, streams, groups, leader tasks,
//! schedules and rooms; and the shorter one for namespaces.

/// The longest topic, stream, group, leader-task, schedule or room name.
pub const MAX_NAME_LEN: usize = 128;
/// The longest namespace.
pub const MAX_NAMESPACE_LEN: usize = 64;
/// The rule, in words.
pub const NAME_RULE: &str = "1 to 128 characters from A-Z a-z 0-9 . _ : -";

fn allowed(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-')
}

/// Why `name` breaks the name rule, if it does.
pub fn name_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        Some("it is empty".to_string())
    } else if name.len() > MAX_NAME_LEN {
        Some(format!("it is {} characters long", name.len()))
    } else {
        name.chars()
            .find(|c| !allowed(*c))
            .map(|c| format!("{c:?} is not allowed"))
    }
}

/// Whether `namespace` keeps the namespace rule: 1 to 64 characters from the name alphabet.
pub fn namespace_ok(namespace: &str) -> bool {
    !namespace.is_empty() && namespace.len() <= MAX_NAMESPACE_LEN && namespace.chars().all(allowed)
}
