//! A room's URL scope: which pages its `urlPatterns` put in the queue. The one matcher the door
//! check, the targeting read and the operator's dry run all use.
//!
//! A rule (already validated by the room document) is, after an optional leading `!` that makes
//! it an exception:
//!
//! - `/path…`: matched against the page's path;
//! - `*…`: matched against the whole page URL (`https://host/path`), so `*` may stand for any
//!   origin;
//! - `https://host/path…`: the origin is pinned — the page's origin must be exactly that one
//!   (scheme, host, port; the host compared literally) — and the rest is matched against its path.
//!
//! `*` stands for any run of characters, `/` included; everything else matches itself, case
//! insensitively. A rule without `?` is matched without the page's query string; a rule with one
//! is matched with it. A page is in scope when some rule that is not an exception matches it (or
//! the room has only exceptions) and no exception matches it: exceptions win whatever order the
//! rules are listed in, so the order of the rules never changes a verdict.

use url::Url;

/// Longest page URL a check or a dry run may name (`url=`, a `Referer`): far above any real
/// page, and a bound on the work one check asks of the matcher.
pub const MAX_PAGE_URL_LEN: usize = 4096;

/// A page as a check names it: an absolute `http` or `https` URL with a host, at most
/// [`MAX_PAGE_URL_LEN`] bytes. `None` for anything else (the caller decides whether that is a
/// refusal, as for `url=`, or an unknown page, as for a `Referer`).
pub fn page_url(text: &str) -> Option<Url> {
    if text.is_empty() || text.len() > MAX_PAGE_URL_LEN {
        return None;
    }
    let url = Url::parse(text).ok()?;
    let web = matches!(url.scheme(), "http" | "https");
    (web && url.host_str().is_some_and(|host| !host.is_empty())).then_some(url)
}

/// Where a page stands against a room's rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The page belongs to the room: its visitors queue.
    In,
    /// The rules exclude the page: it passes without a place in line.
    Out,
}

/// A verdict and the rule that decided it: the matching exception for an excluded page, the
/// first matching rule for an included one; `None` when no rule matched (an included page of a
/// room with only exceptions, or an excluded page no rule names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    pub scope: Scope,
    /// Index into the room's `urlPatterns`.
    pub rule: Option<usize>,
}

/// A room's rules, compiled once for matching.
#[derive(Debug, Clone, Default)]
pub struct UrlScope {
    rules: Vec<Rule>,
}

#[derive(Debug, Clone)]
struct Rule {
    exception: bool,
    /// `Some("https://host:port")`, lower-cased, for a rule that pins the origin.
    origin: Option<String>,
    /// The glob, lower-cased: against the path (a `/` or pinned rule) or the whole URL (`*`).
    glob: String,
    whole_url: bool,
    with_query: bool,
}

impl UrlScope {
    /// Compiles validated rules (see `Room`'s `urlPatterns`). A rule the validator would refuse
    /// is kept as one that never matches.
    pub fn new(patterns: &[String]) -> UrlScope {
        UrlScope {
            rules: patterns
                .iter()
                .map(|pattern| Rule::parse(pattern))
                .collect(),
        }
    }

    /// Whether the room has rules at all: a room without them queues every page, exactly as
    /// before URL targeting existed, and its answers carry no `targeting`.
    pub fn is_scoped(&self) -> bool {
        !self.rules.is_empty()
    }

    /// Judges a page. Call only on a scoped room ([`UrlScope::is_scoped`]).
    pub fn judge(&self, page: &Url) -> Verdict {
        let target = Target::of(page);
        let matches = |rule: &Rule| rule.matches(&target);
        let enumerated = || self.rules.iter().enumerate();
        if let Some((index, _)) = enumerated().find(|(_, rule)| rule.exception && matches(rule)) {
            return Verdict {
                scope: Scope::Out,
                rule: Some(index),
            };
        }
        if let Some((index, _)) = enumerated().find(|(_, rule)| !rule.exception && matches(rule)) {
            return Verdict {
                scope: Scope::In,
                rule: Some(index),
            };
        }
        let only_exceptions = self.rules.iter().all(|rule| rule.exception);
        Verdict {
            scope: if only_exceptions {
                Scope::In
            } else {
                Scope::Out
            },
            rule: None,
        }
    }
}

/// The parts of a page a rule is matched against, lower-cased once.
struct Target {
    origin: String,
    path: String,
    query: Option<String>,
}

impl Target {
    fn of(page: &Url) -> Target {
        Target {
            origin: page.origin().ascii_serialization().to_lowercase(),
            path: page.path().to_lowercase(),
            query: page.query().map(str::to_lowercase),
        }
    }

    /// The path, with `?query` when asked for and present.
    fn path_with(&self, query: bool) -> String {
        match (&self.query, query) {
            (Some(q), true) => format!("{}?{q}", self.path),
            _ => self.path.clone(),
        }
    }
}

impl Rule {
    fn parse(pattern: &str) -> Rule {
        let (exception, body) = match pattern.strip_prefix('!') {
            Some(body) => (true, body),
            None => (false, pattern),
        };
        let body = body.to_lowercase();
        let with_query = body.contains('?');
        if let Some(rest) = body.strip_prefix("https://") {
            let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
            // The pinned origin as `Url` would serialize it (default port dropped), so a rule
            // naming `:443` still pins the origin it names.
            let origin = Url::parse(&format!("https://{host}/"))
                .ok()
                .filter(|_| !host.contains('*'))
                .map(|url| url.origin().ascii_serialization().to_lowercase());
            return Rule {
                exception,
                // A host that does not parse, or holds a wildcard, pins no real origin: such a
                // rule matches nothing.
                origin: Some(origin.unwrap_or_default()),
                glob: if path.is_empty() {
                    "/".into()
                } else {
                    path.into()
                },
                whole_url: false,
                with_query,
            };
        }
        Rule {
            exception,
            origin: None,
            whole_url: body.starts_with('*'),
            glob: body,
            with_query,
        }
    }

    fn matches(&self, target: &Target) -> bool {
        if let Some(origin) = &self.origin
            && (origin.is_empty() || *origin != target.origin)
        {
            return false;
        }
        let subject = match self.whole_url {
            true => format!("{}{}", target.origin, target.path_with(self.with_query)),
            false => target.path_with(self.with_query),
        };
        glob_matches(&self.glob, &subject)
    }
}

/// Whether `glob` (where `*` is any run of characters) matches the whole of `text`. Greedy with
/// one backtrack point, so linear in practice and at worst |glob|·|text| (rules are ≤ 300
/// characters with ≤ 10 `*`).
fn glob_matches(glob: &str, text: &str) -> bool {
    let glob = glob.as_bytes();
    let text = text.as_bytes();
    let (mut g, mut t) = (0, 0);
    // Where the last `*` was, and the text position it is currently made to end at.
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if g < glob.len() && glob[g] == b'*' {
            star = Some((g, t));
            g += 1;
        } else if g < glob.len() && glob[g] == text[t] {
            g += 1;
            t += 1;
        } else if let Some((star_g, star_t)) = star {
            g = star_g + 1;
            t = star_t + 1;
            star = Some((star_g, star_t + 1));
        } else {
            return false;
        }
    }
    glob[g..].iter().all(|&byte| byte == b'*')
}

#[cfg(test)]
#[path = "scope_tests.rs"]
mod tests;
