//! Registrations are collected at link time with `inventory`; each system keeps its own kind
//! (`delay/registration.rs`, …). Here: the check that no two of one kind share a key.

use std::collections::HashMap;

use delayq_core::Error;

/// Every registration of one kind, sorted by `key`; an error naming both functions when two
/// share a key.
pub(crate) fn unique<R: 'static>(
    all: impl IntoIterator<Item = &'static R>,
    key: impl Fn(&R) -> String,
    function: impl Fn(&R) -> &'static str,
) -> Result<Vec<&'static R>, Error> {
    let mut all: Vec<&'static R> = all.into_iter().collect();
    all.sort_by_key(|r| (key(r), function(r)));
    let mut by_key: HashMap<String, &'static R> = HashMap::new();
    for r in &all {
        if let Some(first) = by_key.insert(key(r), r) {
            return Err(Error::DuplicateListener {
                topic: key(r),
                first: function(first).to_string(),
                second: function(r).to_string(),
            });
        }
    }
    Ok(all)
}
