//! The plan crate's one error type: what a planner refuses with. dwctl turns each kind
//! into its own error of the same name, message and exit code (`From` in dwctl's
//! `error.rs`), so that moving a rule into this crate changes nothing a user sees.

use std::fmt;

/// One field of an input that failed validation: `field` is a dotted path into the input
/// (`weight.fra-a`, `regions.DE.shard`, `meta`), `reason` says what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// Dotted path of the field.
    pub field: String,
    /// What is wrong with it.
    pub reason: String,
}

impl FieldError {
    /// The error of `field`.
    pub fn new(field: impl Into<String>, reason: impl Into<String>) -> Self {
        FieldError {
            field: field.into(),
            reason: reason.into(),
        }
    }

    /// The same error, its field path put under `parent` (`weight` under `regions.DE`).
    pub fn within(self, parent: &str) -> Self {
        let field = if self.field.is_empty() {
            parent.to_string()
        } else {
            format!("{parent}.{}", self.field)
        };
        FieldError { field, ..self }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}`: {}", self.field, self.reason)
    }
}

/// What a plan can fail with. Each kind is dwctl's kind of the same name (exit codes in
/// docs/dwctl.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The input is invalid; nothing was written (dwctl: exit 4, `validation`).
    Invalid(Vec<FieldError>),
    /// The command line is inconsistent (dwctl: exit 2, `usage`).
    Usage(String),
    /// A key or record the plan needs does not exist (dwctl: exit 1, `not-found`).
    NotFound(String),
    /// Anything else that stops the plan: a malformed record, a stage that cannot be
    /// followed (dwctl: exit 1, `failed`).
    Failed(String),
    /// What the plan was made from changed outside dwctl since (a stage's keys before its
    /// promote; dwctl: exit 3, `stage-conflict`).
    Diverged(String),
}

impl Error {
    /// A validation failure on one field.
    pub fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::Invalid(vec![FieldError::new(field, reason)])
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Invalid(fields) => {
                write!(f, "validation failed, nothing written:")?;
                for field in fields {
                    write!(f, "\n  {field}")?;
                }
                Ok(())
            }
            Error::Usage(message) => write!(f, "usage: {message}"),
            Error::NotFound(what) => write!(f, "not found: {what}"),
            Error::Failed(message) | Error::Diverged(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_says_what_dwctl_says() {
        let invalid = Error::Invalid(vec![
            FieldError::new("weight.fra-a", "must be an integer"),
            FieldError::new("", "not an object").within("regions.DE"),
        ]);
        assert_eq!(
            invalid.to_string(),
            "validation failed, nothing written:\n  `weight.fra-a`: must be an integer\n  \
             `regions.DE`: not an object"
        );
        assert_eq!(Error::Usage("x".into()).to_string(), "usage: x");
        assert_eq!(
            Error::NotFound("stage s1".into()).to_string(),
            "not found: stage s1"
        );
        assert_eq!(Error::Failed("as is".into()).to_string(), "as is");
        assert_eq!(Error::Diverged("as is".into()).to_string(), "as is");
    }
}
