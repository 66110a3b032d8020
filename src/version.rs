//! Which agent program is installed, at which version, and whether a migration's range holds.

use std::fmt;

use crate::detect::installed_version;

/// The programs migrations are written for. `kimi` on PATH is one of two programs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Product {
    ClaudeCode,
    OpenCode,
    /// Kimi Code (npm `@moonshot-ai/kimi-code`), `--version` prints the bare version.
    KimiCode,
    /// Legacy kimi-cli (PyPI), `--version` prints `kimi, version 1.x`.
    KimiCli,
    /// OpenAI Codex CLI (npm `@openai/codex`), `--version` prints `codex-cli 0.171.0`.
    Codex,
    /// Google Gemini CLI (npm `@google/gemini-cli`), `--version` prints the bare version.
    Gemini,
    /// Qwen Code (npm `@qwen-code/qwen-code`), `--version` prints the bare version (`0.24.4`).
    Qwen,
    /// GitHub Copilot CLI (npm `@github/copilot`), `--version` prints `GitHub Copilot CLI 1.0.102.`.
    Copilot,
}

impl Product {
    pub fn program(self) -> &'static str {
        match self {
            Product::ClaudeCode => "claude",
            Product::OpenCode => "opencode",
            Product::KimiCode | Product::KimiCli => "kimi",
            Product::Codex => "codex",
            Product::Gemini => "gemini",
            Product::Qwen => "qwen",
            Product::Copilot => "copilot",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Product::ClaudeCode => "Claude Code",
            Product::OpenCode => "OpenCode",
            Product::KimiCode => "Kimi Code",
            Product::KimiCli => "kimi-cli",
            Product::Codex => "Codex",
            Product::Gemini => "Gemini CLI",
            Product::Qwen => "Qwen Code",
            Product::Copilot => "Copilot CLI",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version(pub u64, pub u64, pub u64);

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
}

impl Version {
    /// The first word of `line` that reads as a version (`2.1.0`, `v2.0.13`, `1.50.0,`).
    pub fn find(line: &str) -> Option<Version> {
        line.split(|c: char| c.is_whitespace() || c == ',' || c == '(' || c == ')')
            .filter_map(|word| {
                let word = word.strip_prefix('v').unwrap_or(word);
                let core = word.split(['-', '+']).next()?;
                let mut parts = core.split('.').map(|p| p.parse::<u64>().ok());
                let major = parts.next()??;
                let minor = parts.next()??;
                let patch = parts.next().unwrap_or(Some(0))?;
                Some(Version(major, minor, patch))
            })
            .next()
    }
}

/// An installed program: which one, and its version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installed {
    pub product: Product,
    pub version: Version,
}

/// What `line` (the first line of `<program> --version`) says, for the program behind `product`.
pub fn identify(product: Product, line: &str) -> Option<Installed> {
    let version = Version::find(line)?;
    let product = match product {
        Product::KimiCode | Product::KimiCli if line.trim_start().starts_with("kimi, version") => {
            Product::KimiCli
        }
        Product::KimiCode | Product::KimiCli => Product::KimiCode,
        other => other,
    };
    Some(Installed { product, version })
}

/// The program on PATH for `product` (cached by `detect`), or `None`.
pub fn installed(product: Product) -> Option<Installed> {
    identify(product, &installed_version(product.program())?)
}

/// The agent versions a migration applies to.
#[derive(Debug, Clone, Copy)]
pub enum Range {
    /// memloop's own formats: whatever is installed.
    Any,
    Versions {
        product: Product,
        /// Inclusive.
        min: Version,
        /// Exclusive.
        below: Option<Version>,
        /// Whether it applies when the program is not on PATH (memloop then writes for the
        /// version its adapters assume).
        if_missing: bool,
    },
}

impl Range {
    pub fn contains(&self, installed: &dyn Fn(Product) -> Option<Installed>) -> bool {
        match *self {
            Range::Any => true,
            Range::Versions {
                product,
                min,
                below,
                if_missing,
            } => match installed(product) {
                None => if_missing,
                Some(found) => {
                    found.product == product
                        && found.version >= min
                        && below.is_none_or(|below| found.version < below)
                }
            },
        }
    }
}

impl fmt::Display for Range {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Range::Any => f.write_str("any version"),
            Range::Versions {
                product,
                min,
                below,
                if_missing,
            } => {
                write!(f, "{} >= {min}", product.name())?;
                if let Some(below) = below {
                    write!(f, ", < {below}")?;
                }
                if *if_missing {
                    write!(f, " (or not installed)")?;
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_each_programs_version_line() {
        let kimi = identify(Product::KimiCode, "kimi, version 1.50.0").unwrap();
        assert_eq!(kimi.product, Product::KimiCli);
        assert_eq!(kimi.version, Version(1, 50, 0));
        let code = identify(Product::KimiCode, "2.1.0").unwrap();
        assert_eq!(code.product, Product::KimiCode);
        let claude = identify(Product::ClaudeCode, "2.1.328 (Claude Code)").unwrap();
        assert_eq!(claude.version, Version(2, 1, 328));
        let v2 = identify(Product::OpenCode, "opencode v2.0.13").unwrap();
        assert_eq!(v2.version, Version(2, 0, 13));
        assert!(identify(Product::OpenCode, "no version here").is_none());
    }

    #[test]
    fn range_bounds_and_missing_programs() {
        let range = Range::Versions {
            product: Product::OpenCode,
            min: Version(2, 0, 0),
            below: None,
            if_missing: false,
        };
        let v = |s: &'static str| move |p: Product| identify(p, s);
        assert!(!range.contains(&v("1.18.33")));
        assert!(range.contains(&v("2.0.13")));
        assert!(!range.contains(&|_| None));
        let kimi = Range::Versions {
            product: Product::KimiCode,
            min: Version(0, 0, 0),
            below: None,
            if_missing: true,
        };
        assert!(kimi.contains(&v("2.1.0")));
        assert!(!kimi.contains(&v("kimi, version 1.50.0")));
        assert!(kimi.contains(&|_| None));
    }
}
