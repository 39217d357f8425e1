//! The two parameters of a visitor's round trip between a site and its waiting page, in one
//! place: `qm_return`, the page the waiting page sends the visitor back to, and `qm_token`, the
//! pass it hands back on that URL. A site's connector runs on another origin and cannot read
//! this host's cookies, so the pass travels in the URL; the connector's first check spends it
//! into a door session and takes it out. Every rewrite keeps the rest of the query byte for byte
//! (a re-encoding could change what the site reads).

/// The query parameter that carries the pass back to the site.
pub(crate) const PASS_PARAM: &str = "qm_token";

/// `page` with `qm_return=<back>` in its query (`&` when it already has one).
pub(crate) fn with_return(page: &str, back: &str) -> String {
    let separator = if page.contains('?') { '&' } else { '?' };
    let encoded: String = url::form_urlencoded::byte_serialize(back.as_bytes()).collect();
    format!("{page}{separator}qm_return={encoded}")
}

/// `url` with `qm_token=<token>` in its query (replacing any there), before its fragment.
pub(crate) fn with_pass(url: &str, token: &str) -> String {
    let clean = without_pass(url);
    let (rest, fragment) = split_fragment(&clean);
    let separator = if rest.contains('?') { '&' } else { '?' };
    let encoded: String = url::form_urlencoded::byte_serialize(token.as_bytes()).collect();
    format!("{rest}{separator}{PASS_PARAM}={encoded}{fragment}")
}

/// `url` without its `qm_token` parameter(s) (and empty pairs), fragment kept.
pub(crate) fn without_pass(url: &str) -> String {
    let (rest, fragment) = split_fragment(url);
    let Some((path, query)) = rest.split_once('?') else {
        return url.to_owned();
    };
    let kept: Vec<&str> = query
        .split('&')
        .filter(|pair| {
            let name = pair.split_once('=').map_or(*pair, |(name, _)| name);
            !pair.is_empty() && name != PASS_PARAM
        })
        .collect();
    if kept.is_empty() {
        format!("{path}{fragment}")
    } else {
        format!("{path}?{}{fragment}", kept.join("&"))
    }
}

/// The `qm_token` of `url`'s query, decoded (`None` when absent or empty).
pub(crate) fn pass_in(url: &str) -> Option<String> {
    let (rest, _) = split_fragment(url);
    let (_, query) = rest.split_once('?')?;
    url::form_urlencoded::parse(query.as_bytes())
        .find(|(name, value)| name == PASS_PARAM && !value.is_empty())
        .map(|(_, value)| value.into_owned())
}

/// `(before, "#fragment")`, the fragment empty when there is none.
fn split_fragment(url: &str) -> (&str, &str) {
    url.split_at(url.find('#').unwrap_or(url.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pass_is_added_replacing_only_itself() {
        assert_eq!(
            with_pass("https://s.example/a", "t.s"),
            "https://s.example/a?qm_token=t.s"
        );
        assert_eq!(
            with_pass(
                "https://s.example/a?q=a+b%20c&qm_token=x&qm_tokens=y&",
                "t.s"
            ),
            "https://s.example/a?q=a+b%20c&qm_tokens=y&qm_token=t.s"
        );
        assert_eq!(
            with_pass("https://s.example/a?qm_token#f?g", "t/s"),
            "https://s.example/a?qm_token=t%2Fs#f?g"
        );
    }

    #[test]
    fn the_pass_is_taken_out_and_read_keeping_the_rest() {
        assert_eq!(
            without_pass("https://s.example/a?x=1&qm_token=t.k-n&y=%20#top"),
            "https://s.example/a?x=1&y=%20#top",
            "the rest of the query byte for byte, and the fragment"
        );
        assert_eq!(
            without_pass("https://s.example/a?qm_token=t"),
            "https://s.example/a"
        );
        assert_eq!(
            without_pass("https://s.example/a?qm_tokens=1&&qm_token"),
            "https://s.example/a?qm_tokens=1"
        );
        assert_eq!(
            without_pass("https://s.example/a#x?qm_token=1"),
            "https://s.example/a#x?qm_token=1",
            "a fragment is not a query"
        );
        assert_eq!(
            pass_in("https://s.example/a?x=1&qm_token=a%2Eb#f").as_deref(),
            Some("a.b")
        );
        assert_eq!(pass_in("https://s.example/a?qm_token=&x=1"), None);
    }

    #[test]
    fn the_return_is_encoded_whole() {
        assert_eq!(
            with_return("https://q.example/w/r", "https://s.example/a?x=1&y=2"),
            "https://q.example/w/r?qm_return=https%3A%2F%2Fs.example%2Fa%3Fx%3D1%26y%3D2"
        );
        assert_eq!(
            with_return("/w/r?lang=th", "http://s.example/"),
            "/w/r?lang=th&qm_return=http%3A%2F%2Fs.example%2F"
        );
    }
}
