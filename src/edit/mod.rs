//! Format-preserving editors, one per format. Each changes only what memloop owns and keeps
//! comments, key order, indentation, line endings, BOM and the final newline.

pub mod json;
pub mod markdown;
pub mod text;
pub mod toml;

use std::fmt;

/// A file memloop will not touch, with where and why, and what the user can do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub file: String,
    pub line: Option<(usize, usize)>,
    pub problem: String,
    pub hint: String,
}

impl Refusal {
    pub fn at(
        file: &str,
        line: usize,
        col: usize,
        problem: impl Into<String>,
        hint: impl Into<String>,
    ) -> Refusal {
        Refusal {
            file: file.to_owned(),
            line: Some((line, col)),
            problem: problem.into(),
            hint: hint.into(),
        }
    }

    pub fn whole(file: &str, problem: impl Into<String>, hint: impl Into<String>) -> Refusal {
        Refusal {
            file: file.to_owned(),
            line: None,
            problem: problem.into(),
            hint: hint.into(),
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some((line, col)) => write!(f, "{}:{line}:{col}: {}", self.file, self.problem)?,
            None => write!(f, "{}: {}", self.file, self.problem)?,
        }
        write!(f, "\n  hint: {}", self.hint)
    }
}

impl std::error::Error for Refusal {}
