//! Hiding secrets from what is printed or logged.
//!
//! Connection settings hold tokens, passwords and nkey seeds. Their `Debug`
//! output (and every error or log line that names a server) shows
//! [`REDACTED`] in their place; URLs go through [`redact_url`].

/// What is printed in place of a secret.
pub const REDACTED: &str = "<redacted>";

/// `url` with the credentials of its authority hidden:
/// `postgres://app:s3cret@db/app` becomes `postgres://app:<redacted>@db/app`
/// and `nats://s3cret@host` (a token in the user part) becomes
/// `nats://<redacted>@host`. Every URL of a comma-separated list (a NATS
/// cluster) is redacted; text without credentials is returned unchanged.
///
/// ```
/// use txoutbox_core::redact::redact_url;
/// assert_eq!(redact_url("postgres://app:pw@db:5432/app"), "postgres://app:<redacted>@db:5432/app");
/// assert_eq!(redact_url("nats://tok@a:4222,nats://b:4222"), "nats://<redacted>@a:4222,nats://b:4222");
/// assert_eq!(redact_url("sqlite://./orders.db"), "sqlite://./orders.db");
/// ```
pub fn redact_url(url: &str) -> String {
    url.split(',').map(redact_one).collect::<Vec<_>>().join(",")
}

fn redact_one(url: &str) -> String {
    let (scheme, rest) = match url.find("://") {
        Some(at) => url.split_at(at + 3),
        None => ("", url),
    };
    // The authority ends at the first `/`, `?` or `#`; credentials end at
    // its last `@`.
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let Some(at) = rest[..authority_end].rfind('@') else {
        return url.to_owned();
    };
    let userinfo = &rest[..at];
    let shown = match userinfo.split_once(':') {
        Some((user, _password)) => format!("{user}:{REDACTED}"),
        None => REDACTED.to_owned(),
    };
    format!("{scheme}{shown}{}", &rest[at..])
}

#[cfg(test)]
mod tests {
    use super::redact_url;

    #[test]
    fn hides_passwords_and_tokens_only() {
        let cases = [
            ("postgres://u:p@h/db", "postgres://u:<redacted>@h/db"),
            (
                "mysql://root:p%40ss@127.0.0.1:3306/test",
                "mysql://root:<redacted>@127.0.0.1:3306/test",
            ),
            (
                "postgres://u@h/db?x=a@b",
                "postgres://<redacted>@h/db?x=a@b",
            ),
            ("nats://127.0.0.1:4222", "nats://127.0.0.1:4222"),
            ("u:p@h:4222", "u:<redacted>@h:4222"),
            (
                "nats://a:1@h1,nats://h2",
                "nats://a:<redacted>@h1,nats://h2",
            ),
            ("", ""),
        ];
        for (url, redacted) in cases {
            assert_eq!(redact_url(url), redacted, "{url}");
        }
    }
}
