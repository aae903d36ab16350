//! Why a JSON program was not loaded: every refusal names the JSON path of the construct.

/// A JSON program that was not loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// Not JSON, or not shaped as BMv2 JSON.
    #[error("not BMv2 JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// A construct this loader does not run (refused rather than run wrongly).
    #[error("{path}: not supported: {what}")]
    Unsupported {
        /// Where, e.g. `actions[3].primitives[1]`.
        path: String,
        /// What.
        what: String,
    },
    /// A construct that is wrong (an unknown name, a bad width, a malformed value).
    #[error("{path}: {what}")]
    Invalid {
        /// Where.
        path: String,
        /// What.
        what: String,
    },
    /// The tables, actions and externs do not make a valid schema.
    #[error("the program's tables and externs: {0}")]
    Schema(String),
}

/// Refuses `what` at `path`.
pub(crate) fn unsupported(path: &str, what: impl Into<String>) -> LoadError {
    LoadError::Unsupported {
        path: path.to_owned(),
        what: what.into(),
    }
}

/// Rejects `what` at `path`.
pub(crate) fn invalid(path: &str, what: impl Into<String>) -> LoadError {
    LoadError::Invalid {
        path: path.to_owned(),
        what: what.into(),
    }
}

pub(crate) type Result<T> = std::result::Result<T, LoadError>;
