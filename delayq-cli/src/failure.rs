//! Why a command failed, and so its exit code (and the dashboard's status).

/// Why a command failed, and so its exit code.
#[derive(Debug)]
pub(crate) enum Failure {
    /// The input is wrong (exit 2).
    Usage(String),
    /// It did not work (exit 1).
    Failed(String),
    /// What it names is not there (exit 1; 404 on the dashboard).
    NotFound(String),
}

impl From<delayq_core::Error> for Failure {
    fn from(e: delayq_core::Error) -> Self {
        use delayq_core::Error as E;
        match e {
            E::InvalidTopic { .. }
            | E::InvalidName { .. }
            | E::InvalidNamespace { .. }
            | E::InvalidId { .. }
            | E::InvalidOption { .. }
            | E::InvalidUrl { .. }
            | E::PayloadTooLarge { .. }
            | E::DueTooFar { .. } => Failure::Usage(e.to_string()),
            other => Failure::Failed(other.to_string()),
        }
    }
}
