//! Hiding secrets from what is printed or logged.
//!
//! Connection settings hold tokens, passwords and nkey seeds. Their `Debug`
//! output (and every error or log line that names a server) shows
//! [`REDACTED`] in their place; URLs go through [`redact_url`]. Payloads
//! and headers shown to an operator (the web console) go through
//! [`redact_fields`], which hides the values of the fields whose names say
//! they are secret.

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

/// Field names whose values [`redact_fields`] hides by default: a field is
/// sensitive when its name, lowercased and without `_` and `-`, contains
/// one of these.
pub const SENSITIVE_FIELDS: &[&str] = &[
    "password",
    "passwd",
    "secret",
    "token",
    "apikey",
    "authorization",
    "cookie",
    "cardnumber",
    "creditcard",
    "cvv",
    "iban",
    "ssn",
];

/// `json` (a payload, a headers object) with the value of every field
/// whose name contains one of `sensitive` (compared lowercased, without `_`
/// and `-`; [`SENSITIVE_FIELDS`] is the usual list), at any depth, replaced
/// by [`REDACTED`]. Text that is not JSON is returned as it is (it has no
/// fields to find); the result is pretty-printed.
///
/// ```
/// use txoutbox_core::redact::{SENSITIVE_FIELDS, redact_fields};
/// let shown = redact_fields(r#"{"order":"o-1","card":{"card_number":"4111"},"apiToken":"t"}"#, SENSITIVE_FIELDS);
/// assert!(shown.contains(r#""card_number": "<redacted>""#));
/// assert!(shown.contains(r#""apiToken": "<redacted>""#));
/// assert!(shown.contains(r#""order": "o-1""#));
/// assert!(!shown.contains("4111"));
/// ```
pub fn redact_fields(json: &str, sensitive: &[impl AsRef<str>]) -> String {
    let Ok(mut value) = serde_json::from_str::<serde_json::Value>(json) else {
        return json.to_owned();
    };
    let sensitive: Vec<String> = sensitive.iter().map(|s| normalized(s.as_ref())).collect();
    hide(&mut value, &sensitive);
    serde_json::to_string_pretty(&value).unwrap_or_else(|_| json.to_owned())
}

fn normalized(name: &str) -> String {
    name.chars()
        .filter(|c| !matches!(c, '_' | '-'))
        .flat_map(char::to_lowercase)
        .collect()
}

fn hide(value: &mut serde_json::Value, sensitive: &[String]) {
    match value {
        serde_json::Value::Object(fields) => {
            for (name, field) in fields.iter_mut() {
                let name = normalized(name);
                if sensitive
                    .iter()
                    .any(|s| !s.is_empty() && name.contains(s.as_str()))
                {
                    *field = serde_json::Value::String(REDACTED.to_owned());
                } else {
                    hide(field, sensitive);
                }
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(|item| hide(item, sensitive)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::{SENSITIVE_FIELDS, redact_fields, redact_url};

    #[test]
    fn hides_sensitive_fields_at_any_depth() {
        let json =
            r#"{"a":[{"Pass-Word":"p1"},{"x":1}],"b":{"client_secret":{"k":"s2"}},"ok":"v"}"#;
        let shown = redact_fields(json, SENSITIVE_FIELDS);
        assert!(!shown.contains("p1") && !shown.contains("s2"), "{shown}");
        assert!(shown.contains("\"ok\": \"v\""), "{shown}");
        assert_eq!(redact_fields("not json", SENSITIVE_FIELDS), "not json");
        assert!(redact_fields(r#"{"pin":"1234"}"#, &["PIN"]).contains("<redacted>"));
    }

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
