//! The bearer token: read once from `--token-file` or `$MONOFLAKE_TOKEN`, compared in
//! constant time.

use std::path::Path;

use subtle::ConstantTimeEq;

use crate::failure::Failure;

/// The shortest token accepted: 16 bytes (128 bits if random).
const MIN_TOKEN: usize = 16;

/// The token callers must present as `Authorization: Bearer <token>`.
#[derive(Clone)]
pub struct Token(Vec<u8>);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(..)")
    }
}

impl Token {
    /// Reads the first line of `path` (surrounding white space removed).
    pub fn read(path: &Path) -> Result<Token, Failure> {
        let text = std::fs::read_to_string(path).map_err(|e| Failure {
            code: 2,
            message: format!("cannot read the token file {}: {e}", path.display()),
        })?;
        Token::from_text(
            &text,
            &format!("the token in {}", path.display()),
            &path.display().to_string(),
        )
    }

    /// The token given in the environment (`$MONOFLAKE_TOKEN`): its first line, surrounding
    /// white space removed. The value is never part of a message.
    pub fn from_env(value: &std::ffi::OsStr) -> Result<Token, Failure> {
        let text = value.to_str().ok_or_else(|| Failure {
            code: 2,
            message: "$MONOFLAKE_TOKEN is not UTF-8 text".to_owned(),
        })?;
        Token::from_text(text, "$MONOFLAKE_TOKEN", "FILE")
    }

    /// The token in `text`'s first line, checked; `what` names where it came from, `file`
    /// where the hint writes a new one.
    fn from_text(text: &str, what: &str, file: &str) -> Result<Token, Failure> {
        let token = text.lines().next().unwrap_or("").trim();
        if token.len() < MIN_TOKEN {
            return Err(Failure {
                code: 2,
                message: format!(
                    "{what} has {} bytes; at least {MIN_TOKEN} are needed \
                     (e.g. head -c 32 /dev/urandom | base64 > {file})",
                    token.len(),
                ),
            });
        }
        if !token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(Failure {
                code: 2,
                message: format!("{what} has spaces or characters an HTTP header cannot carry"),
            });
        }
        Ok(Token(token.as_bytes().to_vec()))
    }

    /// Whether an `Authorization` header value carries this token. The comparison of the
    /// token bytes takes the same time wherever they differ (only the length can be learned).
    pub fn admits(&self, header: Option<&[u8]>) -> bool {
        let Some(value) = header else {
            return false;
        };
        let Some(given) = strip_bearer(value) else {
            return false;
        };
        given.ct_eq(&self.0).into()
    }
}

/// The credentials of `Bearer <credentials>` (the scheme in any case).
fn strip_bearer(value: &[u8]) -> Option<&[u8]> {
    let (scheme, rest) = value.split_at_checked(7)?;
    scheme
        .eq_ignore_ascii_case(b"bearer ")
        .then(|| rest.trim_ascii())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admits_only_the_exact_token() {
        let t = Token(b"0123456789abcdef".to_vec());
        assert!(t.admits(Some(b"Bearer 0123456789abcdef")));
        assert!(t.admits(Some(b"bearer 0123456789abcdef")));
        assert!(!t.admits(Some(b"Bearer 0123456789abcdeX")));
        assert!(!t.admits(Some(b"Bearer 0123456789abcde")));
        assert!(!t.admits(Some(b"Basic 0123456789abcdef")));
        assert!(!t.admits(Some(b"Bearer")));
        assert!(!t.admits(None));
    }
}
