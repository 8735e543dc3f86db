//! A URL as a message may show it: the secrets it may carry replaced by `***`. Every URL
//! dwctl and dw-agent print (a Prometheus base URL, an etcd endpoint, a probe target, in
//! errors too, where the URL may be malformed) goes through [`redact_url`].
//!
//! Works on the text, not on a parsed URL, so that a URL no parser accepts is redacted
//! too: the password of `scheme://user:password@host` (everything between the first `:`
//! after `://` and the last `@` before the query: a `/` in a password does not end it),
//! and the value of every
//! query parameter whose name holds one of [`SECRET_PARAMETER_WORDS`] (any case).

/// What replaces a secret.
pub const REDACTED: &str = "***";

/// A query parameter whose name holds one of these (any case) has its value redacted.
pub const SECRET_PARAMETER_WORDS: [&str; 10] = [
    "token",
    "password",
    "passwd",
    "pwd",
    "secret",
    "key",
    "auth",
    "sig",
    "credential",
    "session",
];

/// `url` with its userinfo password and the values of secret-looking query parameters
/// replaced by [`REDACTED`]; everything else as given.
pub fn redact_url(url: &str) -> String {
    let (before_fragment, fragment) = match url.find('#') {
        Some(hash) => url.split_at(hash),
        None => (url, ""),
    };
    let (head, query) = match before_fragment.find('?') {
        Some(mark) => (&before_fragment[..mark], Some(&before_fragment[mark + 1..])),
        None => (before_fragment, None),
    };
    let mut out = String::with_capacity(url.len());
    // The userinfo ends at the last `@` before the query; it starts after `://`, or, in a
    // text without one, after the last `/` before that `@`.
    match head.rfind('@') {
        Some(at) => {
            let start = match head.find("://") {
                Some(scheme) if scheme + 3 <= at => scheme + 3,
                _ => head[..at].rfind('/').map_or(0, |slash| slash + 1),
            };
            let userinfo = &head[start..at];
            out.push_str(&head[..start]);
            match userinfo.find(':') {
                Some(colon) => {
                    out.push_str(&userinfo[..colon + 1]);
                    out.push_str(REDACTED);
                }
                None => out.push_str(userinfo),
            }
            out.push_str(&head[at..]);
        }
        None => out.push_str(head),
    }
    if let Some(query) = query {
        out.push('?');
        let parameters: Vec<String> = query
            .split('&')
            .map(|parameter| match parameter.split_once('=') {
                Some((name, _)) if is_secret(name) => format!("{name}={REDACTED}"),
                _ => parameter.to_owned(),
            })
            .collect();
        out.push_str(&parameters.join("&"));
    }
    out.push_str(fragment);
    out
}

fn is_secret(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    SECRET_PARAMETER_WORDS
        .iter()
        .any(|word| name.contains(word))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_and_tokens_are_redacted_the_rest_kept() {
        for (url, shown) in [
            ("http://prom:9090", "http://prom:9090"),
            ("https://u:s3cret@prom:9090/p", "https://u:***@prom:9090/p"),
            ("http://u@prom", "http://u@prom"),
            ("http://u:p:q@x@prom/", "http://u:***@prom/"),
            ("http://prom/?token=abc&x=1", "http://prom/?token=***&x=1"),
            (
                "http://prom/?X-Api-Key=1&access_TOKEN=2&sig=3&page=4#top",
                "http://prom/?X-Api-Key=***&access_TOKEN=***&sig=***&page=4#top",
            ),
            ("http://prom/a@b/c", "http://prom/a@b/c"),
            ("http://u:pa/ss@prom", "http://u:***@prom"),
            ("http://h?password", "http://h?password"),
            ("", ""),
        ] {
            assert_eq!(redact_url(url), shown, "{url}");
        }
    }

    #[test]
    fn malformed_urls_are_redacted_too() {
        for (url, secret) in [
            ("http//u:hunter2@prom:9090", "hunter2"),
            ("u:hunter2@prom", "hunter2"),
            ("http://u:hunter2@[::1:9090", "hunter2"),
            ("ftp://prom?apikey=hunter2", "hunter2"),
            ("http://prom:99999?Token=hunter2&", "hunter2"),
            ("http://u:hunter2@", "hunter2"),
        ] {
            let shown = redact_url(url);
            assert!(!shown.contains(secret), "{url} -> {shown}");
            assert!(shown.contains(REDACTED), "{url} -> {shown}");
        }
    }
}
