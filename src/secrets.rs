//! What a literal credential looks like in a config that gets committed: shared by
//! `memloop.toml`'s validation (refused before anything is written) and the doctor (which
//! flags the same shapes in entries memloop did not write).
//!
//! The shapes: header and environment values, a password (or a token) in a URL's user part, a
//! query parameter named like a key, `--flag value` and `--flag=value` arguments, `NAME=value`
//! assignments (`env KEY=... server`), and values with a known token prefix anywhere.
//! A value that only references a variable, in the syntax the file's reader expands, is fine.

use crate::config::{Piece, env_pieces};

/// How the file's reader writes a reference to an environment variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Syntax {
    /// `${VAR}`: memloop.toml and Claude Code's `.mcp.json`.
    Dollar,
    /// `{env:VAR}` (and `{file:path}`): OpenCode.
    Opencode,
    /// Values are read as written: Kimi Code's `mcp.json`, Codex's `config.toml`.
    Verbatim,
}

/// Header and environment names that carry credentials.
pub fn is_secret_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    is_secret_word(&lower)
        || ["auth", "cookie", "private"]
            .iter()
            .any(|w| lower.contains(w))
}

/// Flag and query parameter names that carry credentials: narrower than header names, since a
/// flag like `--auth-mode` or `--private` holds no secret.
fn is_secret_word(lower: &str) -> bool {
    let words = [
        "token",
        "secret",
        "password",
        "passwd",
        "credential",
        "api-key",
        "api_key",
        "apikey",
        "access-key",
        "access_key",
        "private-key",
        "private_key",
    ];
    words.iter().any(|w| lower.contains(w))
        || matches!(lower, "key" | "auth" | "pat" | "pass" | "pwd" | "sig")
        || lower.ends_with("-key")
        || lower.ends_with("_key")
}

/// Values that are credentials whatever their name: a known token prefix, long enough.
pub fn looks_like_token(value: &str) -> bool {
    let v = value.trim();
    let token = v.rsplit(' ').next().unwrap_or(v);
    let prefixed = [
        "sk-",
        "sk_live_",
        "sk_test_",
        "rk_live_",
        "ghp_",
        "gho_",
        "ghu_",
        "ghs_",
        "ghr_",
        "github_pat_",
        "glpat-",
        "xoxb-",
        "xoxp-",
        "xoxa-",
        "xapp-",
        "AKIA",
        "ASIA",
        "AIza",
        "ya29.",
        "hf_",
        "npm_",
        "pypi-",
        "dop_v1_",
        "shpat_",
    ]
    .iter()
    .any(|prefix| token.starts_with(prefix) && token.len() >= 16);
    let jwt = token.starts_with("eyJ") && token.matches('.').count() == 2 && token.len() >= 32;
    prefixed || jwt
}

/// Whether `value` only references the environment, in `syntax` (an auth scheme word may
/// stand next to the reference: `Bearer ${TOKEN}`).
pub fn is_reference(value: &str, syntax: Syntax) -> bool {
    let stripped = match syntax {
        Syntax::Dollar => {
            let Some(pieces) = env_pieces(value) else {
                return false;
            };
            if !pieces.iter().any(|p| matches!(p, Piece::Var(_))) {
                return false;
            }
            pieces
                .iter()
                .filter_map(|p| match p {
                    Piece::Literal(text) => Some(*text),
                    Piece::Var(_) => None,
                })
                .collect::<String>()
        }
        Syntax::Opencode => {
            let mut rest = value.to_owned();
            let mut any = false;
            for prefix in ["{env:", "{file:"] {
                while let Some(start) = rest.find(prefix) {
                    let Some(end) = rest[start..].find('}') else {
                        return false;
                    };
                    rest.replace_range(start..start + end + 1, "");
                    any = true;
                }
            }
            if !any {
                return false;
            }
            rest
        }
        Syntax::Verbatim => return false,
    };
    let word = stripped.trim();
    word.is_empty() || ["bearer", "basic", "token"].contains(&word.to_ascii_lowercase().as_str())
}

/// Whether a value in a credential's place is literal. A reference in another agent's syntax
/// (`${VAR}` in Kimi's file) is not expanded there, but it is no secret either.
fn literal(value: &str, syntax: Syntax) -> bool {
    !value.is_empty()
        && !is_reference(value, syntax)
        && !is_reference(value, Syntax::Dollar)
        && !is_reference(value, Syntax::Opencode)
}

/// What is wrong with a URL: a password or token in its user part, a token in its host, its
/// path (`https://host/sk-live-…/mcp`) or a path parameter, or a credential in its query or its
/// fragment (`#access_token=…`). Every part of the URL is looked at; none is echoed back.
pub fn in_url(url: &str, syntax: Syntax) -> Option<String> {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let (rest, fragment) = rest.split_once('#').unwrap_or((rest, ""));
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let host = match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            match userinfo.split_once(':') {
                Some((_, password)) if literal(password, syntax) => {
                    return Some("a password in its user part (`user:password@`)".into());
                }
                None if looks_like_token(&percent_decoded(userinfo)) => {
                    return Some("a token in its user part (`token@`)".into());
                }
                _ => {}
            }
            host
        }
        None => authority,
    };
    if host.split(['.', ':']).any(looks_like_token) {
        return Some("a token in its host name".into());
    }
    for (index, segment) in path.split('/').filter(|s| !s.is_empty()).enumerate() {
        // `;name=value` path parameters are read like query pairs.
        let mut pieces = segment.split(';');
        let name = percent_decoded(pieces.next().unwrap_or(""));
        if looks_like_token(&name) {
            return Some(format!(
                "a token in its path (segment {}: `/…/`); a path is logged by every proxy on the way",
                index + 1
            ));
        }
        if let Some(name) = pieces.find_map(|pair| credential_pair(pair, syntax)) {
            return Some(format!("a credential in a path parameter (`;{name}=`)"));
        }
    }
    if let Some(name) = query
        .split('&')
        .find_map(|pair| credential_pair(pair, syntax))
    {
        return Some(format!("a credential in its query (`{name}=`)"));
    }
    fragment
        .split('&')
        .find_map(|pair| credential_pair(pair, syntax))
        .map(|name| format!("a credential in its fragment (`{name}=`)"))
}

/// The name of a `name=value` pair (from a query, a fragment or a path parameter) that holds a
/// credential.
fn credential_pair(pair: &str, syntax: Syntax) -> Option<&str> {
    let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
    let value = percent_decoded(value);
    let named = is_secret_word(&name.to_ascii_lowercase()) && literal(&value, syntax);
    (named || looks_like_token(&value)).then_some(name)
}

/// `%XX` escapes decoded (a token is still a token when percent-encoded); anything that does
/// not decode to UTF-8 is kept as written.
fn percent_decoded(text: &str) -> String {
    if !text.contains('%') {
        return text.to_owned();
    }
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && let (Some(high), Some(low)) = (
                bytes.get(i + 1).copied().and_then(hex),
                bytes.get(i + 2).copied().and_then(hex),
            )
        {
            out.push((high * 16 + low) as u8);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).unwrap_or_else(|_| text.to_owned())
}

/// The first argument that holds a literal credential, and what it is.
pub fn in_args<S: AsRef<str>>(args: &[S], syntax: Syntax) -> Option<(usize, String)> {
    let args: Vec<&str> = args.iter().map(AsRef::as_ref).collect();
    for (index, arg) in args.iter().enumerate() {
        if let Some(flag) = arg.strip_prefix("--").or_else(|| arg.strip_prefix('-')) {
            let (name, inline) = match flag.split_once('=') {
                Some((name, value)) => (name, Some(value)),
                None => (flag, None),
            };
            if is_secret_word(&name.to_ascii_lowercase()) {
                match inline {
                    Some(value) if literal(value, syntax) => {
                        return Some((index, format!("a credential in `--{name}=...`")));
                    }
                    Some(_) => {}
                    None => {
                        if let Some(next) = args.get(index + 1)
                            && !next.starts_with('-')
                            && literal(next, syntax)
                        {
                            return Some((index + 1, format!("a credential after `{arg}`")));
                        }
                    }
                }
            }
        } else if let Some((name, value)) = assignment(arg)
            && (is_secret_name(name) || looks_like_token(value))
            && literal(value, syntax)
        {
            return Some((index, format!("a credential in `{name}=...`")));
        } else if (arg.starts_with("https://") || arg.starts_with("http://"))
            && let Some(problem) = in_url(arg, syntax)
        {
            return Some((index, format!("a URL with {problem}")));
        }
        if looks_like_token(arg) {
            return Some((index, "a literal token".into()));
        }
    }
    None
}

/// What is wrong with a command line given as one string (`env KEY=... server --token x`).
pub fn in_command(command: &str, syntax: Syntax) -> Option<String> {
    let words: Vec<&str> = command.split_whitespace().collect();
    in_args(&words, syntax).map(|(_, problem)| problem)
}

/// `NAME=value` with a valid environment variable name.
fn assignment(word: &str) -> Option<(&str, &str)> {
    let (name, value) = word.split_once('=')?;
    let mut chars = name.chars();
    let valid = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    valid.then_some((name, value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_with_passwords_tokens_or_keys_in_the_query() {
        for (url, found) in [
            ("https://user:sk-live-123@host/mcp", true),
            ("https://user:hunter2@host", true),
            ("https://ghp_abcdefghijklmnop1234@github.com/x", true),
            ("https://host/mcp?key=abc", true),
            ("https://host/mcp?a=1&api_key=abc#frag", true),
            ("https://host/mcp?access_token=abc", true),
            ("https://host/mcp?Token=abc", true),
            ("https://host/mcp?x=sk-abcdefghijklmnopq", true),
            ("https://user:${PASS}@host", false),
            ("https://user@host/mcp", false),
            ("https://host/mcp?key=${KEY}", false),
            ("https://host/mcp?page=2&keyword=x", false),
            ("https://host/a@b/mcp", false),
            // The path, path parameters, the fragment and the host are part of the URL too.
            ("https://host/sk-live-abcdefghijklmnop/mcp", true),
            ("https://host/v1/ghp_abcdefghijklmnop1234", true),
            ("https://host/sk%2Dlive%2Dabcdefghijklmnop/mcp", true),
            ("https://host/mcp;token=abc", true),
            ("https://host/mcp#access_token=abc", true),
            ("https://host/mcp#x=ghp_abcdefghijklmnop1234", true),
            ("https://sk-live-abcdefghijklmnop.example.com/mcp", true),
            ("https://host:8443/api/v1/mcp/sse", false),
            ("https://host/sk-short/mcp", false),
            ("https://host/mcp#section-2", false),
            ("https://host/tokens/list", false),
            ("https://host/mcp;token=${TOKEN}", false),
        ] {
            assert_eq!(in_url(url, Syntax::Dollar).is_some(), found, "{url}");
        }
        assert!(in_url("https://u:{env:P}@host", Syntax::Opencode).is_none());
        // Kimi expands neither, but a reference is no credential.
        assert!(in_url("https://u:${P}@host", Syntax::Verbatim).is_none());
        assert!(in_url("https://u:p4ss@host", Syntax::Verbatim).is_some());
    }

    #[test]
    fn arguments_in_every_form() {
        let found = |args: &[&str]| in_args(args, Syntax::Dollar).map(|(i, _)| i);
        assert_eq!(found(&["--api-key", "sk-abc"]), Some(1));
        assert_eq!(found(&["-y", "srv", "--token=abc"]), Some(2));
        assert_eq!(found(&["--password", "p"]), Some(1));
        assert_eq!(found(&["--db-password=p"]), Some(0));
        assert_eq!(found(&["API_KEY=abc", "srv"]), Some(0));
        assert_eq!(found(&["srv", "ghp_abcdefghijklmnop1234"]), Some(1));
        assert_eq!(found(&["https://u:p@host"]), Some(0));
        assert_eq!(found(&["--api-key", "${API_KEY}"]), None);
        assert_eq!(found(&["--token=${T}"]), None);
        assert_eq!(found(&["--token", "--verbose"]), None);
        assert_eq!(found(&["-y", "@modelcontextprotocol/server-memory"]), None);
        assert_eq!(found(&["--auth-mode", "oauth", "--private"]), None);
        assert_eq!(found(&["NODE_ENV=production"]), None);
        assert_eq!(
            in_args(&["--api-key", "{env:K}"], Syntax::Opencode).map(|(i, _)| i),
            None
        );
    }

    #[test]
    fn command_strings_are_split_into_words() {
        assert!(in_command("env KEY=abc srv", Syntax::Dollar).is_some());
        assert!(in_command("env API_TOKEN=abc srv", Syntax::Dollar).is_some());
        assert!(in_command("srv --token abc", Syntax::Dollar).is_some());
        assert!(in_command("env KEY=${KEY} srv", Syntax::Dollar).is_none());
        assert!(in_command("npx -y srv", Syntax::Dollar).is_none());
    }

    #[test]
    fn references_in_each_syntax() {
        assert!(is_reference("Bearer ${T}", Syntax::Dollar));
        assert!(!is_reference("Bearer {env:T}", Syntax::Dollar));
        assert!(is_reference("Bearer {env:T}", Syntax::Opencode));
        assert!(!is_reference("x${T}", Syntax::Dollar));
        assert!(!is_reference("${T}", Syntax::Verbatim));
    }
}
