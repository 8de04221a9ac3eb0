//! NATS subject rules, the one place the crate keeps them: whether a
//! subject may be published on (the publisher), and between two patterns
//! (with `*` and `>` wildcards) whether one captures everything the other
//! names (a filter or a stream and a message's subject, a stream and
//! another's subjects: the subscriber, the streams) and whether they share
//! a subject.

/// Whether JetStream accepts `subject` for publishing: non-empty tokens,
/// no whitespace, no wildcards.
pub(crate) fn is_publishable(subject: &str) -> bool {
    !subject.is_empty()
        && subject.split('.').all(|token| {
            !token.is_empty() && !is_wildcard(token) && !token.contains(char::is_whitespace)
        })
}

/// Whether every subject `wanted` names is also named by `pattern`
/// (`dlq.>` covers `dlq.orders` and `dlq.*`; `dlq.orders` covers only
/// itself).
pub(crate) fn covers(pattern: &str, wanted: &str) -> bool {
    let mut wanted = wanted.split('.');
    for token in pattern.split('.') {
        match (token, wanted.next()) {
            (">", Some(_)) => return true,
            ("*", Some(other)) if other != ">" => {}
            (literal, Some(other)) if literal == other && !is_wildcard(literal) => {}
            _ => return false,
        }
    }
    wanted.next().is_none()
}

/// Whether some subject is named by both `a` and `b` (a stream capturing
/// one cannot be created beside a stream capturing the other).
pub(crate) fn overlaps(a: &str, b: &str) -> bool {
    let (mut a, mut b) = (a.split('.'), b.split('.'));
    loop {
        match (a.next(), b.next()) {
            (None, None) => return true,
            (Some(">"), Some(_)) | (Some(_), Some(">")) => return true,
            (Some("*"), Some(_)) | (Some(_), Some("*")) => {}
            (Some(x), Some(y)) if x == y => {}
            _ => return false,
        }
    }
}

fn is_wildcard(token: &str) -> bool {
    token == "*" || token == ">"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn publishable() {
        assert!(is_publishable("events.order.placed"));
        assert!(!is_publishable(""));
        assert!(!is_publishable("events..placed"));
        assert!(!is_publishable("events.*"));
        assert!(!is_publishable("events.>"));
        assert!(!is_publishable("events.order placed"));
    }

    #[test]
    fn covering() {
        assert!(covers("dlq.>", "dlq.orders"));
        assert!(covers("dlq.>", "dlq.*"));
        assert!(covers("dlq.>", "dlq.orders.>"));
        assert!(covers("dlq.*", "dlq.orders"));
        assert!(covers("dlq.orders", "dlq.orders"));
        assert!(!covers("dlq.orders", "dlq.>"));
        assert!(!covers("dlq.*", "dlq.>"));
        assert!(!covers("dlq.*", "dlq.a.b"));
        assert!(!covers("dlq.>", "dlq"));
        assert!(!covers("shop.>", "dlq.orders"));
        assert!(!covers("dlq.orders.x", "dlq.orders"));
        assert!(
            !covers("", "dlq.orders"),
            "an empty filter names no subject"
        );
    }

    #[test]
    fn overlapping() {
        assert!(overlaps("dlq.>", "dlq.orders"));
        assert!(overlaps("dlq.orders", "dlq.>"));
        assert!(overlaps("dlq.*", "*.orders"));
        assert!(overlaps("a.b", "a.b"));
        assert!(!overlaps("dlq.>", "shop.>"));
        assert!(!overlaps("dlq.>", "dlq"));
        assert!(!overlaps("dlq.*", "dlq.a.b"));
        assert!(!overlaps("a.b", "a.c"));
    }
}
