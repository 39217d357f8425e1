use proptest::prelude::*;

use super::*;

fn scope(rules: &[&str]) -> UrlScope {
    UrlScope::new(
        &rules
            .iter()
            .map(|rule| (*rule).to_owned())
            .collect::<Vec<_>>(),
    )
}

fn page(url: &str) -> Url {
    Url::parse(url).expect("a test page parses")
}

fn verdict(rules: &[&str], url: &str) -> (Scope, Option<usize>) {
    let verdict = scope(rules).judge(&page(url));
    (verdict.scope, verdict.rule)
}

#[test]
fn a_room_without_rules_is_unscoped() {
    assert!(!scope(&[]).is_scoped());
    assert!(scope(&["/tickets/*"]).is_scoped());
}

#[test]
fn path_rules_match_the_whole_path_case_insensitively() {
    let rules = ["/tickets/*", "/Checkout"];
    assert_eq!(
        verdict(&rules, "https://shop.example/tickets/gala"),
        (Scope::In, Some(0))
    );
    assert_eq!(
        verdict(&rules, "https://shop.example/CHECKOUT"),
        (Scope::In, Some(1))
    );
    // The whole path, not a prefix: `/checkout/pay` is not `/checkout`.
    assert_eq!(
        verdict(&rules, "https://shop.example/checkout/pay"),
        (Scope::Out, None)
    );
    assert_eq!(verdict(&rules, "https://shop.example/"), (Scope::Out, None));
}

#[test]
fn a_rule_without_a_question_mark_ignores_the_query_and_one_with_it_reads_it() {
    assert_eq!(
        verdict(&["/checkout"], "https://shop.example/checkout?step=2"),
        (Scope::In, Some(0))
    );
    let with_query = ["/search?q=*"];
    assert_eq!(
        verdict(&with_query, "https://shop.example/search?q=gala"),
        (Scope::In, Some(0))
    );
    assert_eq!(
        verdict(&with_query, "https://shop.example/search"),
        (Scope::Out, None)
    );
}

#[test]
fn a_star_rule_reaches_across_origins_and_slashes() {
    let rules = ["*/drop/*"];
    for url in [
        "https://shop.example/drop/one",
        "https://other.example/en/drop/one/two",
    ] {
        assert_eq!(verdict(&rules, url), (Scope::In, Some(0)), "{url}");
    }
    assert_eq!(
        verdict(&["*checkout*"], "https://shop.example/cart/CheckOut/now"),
        (Scope::In, Some(0))
    );
}

#[test]
fn a_pinned_rule_matches_only_its_origin() {
    let rules = ["https://shop.example/tickets/*"];
    assert_eq!(
        verdict(&rules, "https://shop.example/tickets/a"),
        (Scope::In, Some(0))
    );
    assert_eq!(
        verdict(&rules, "https://SHOP.example:443/tickets/a"),
        (Scope::In, Some(0)),
        "the default port is the same origin"
    );
    for other in [
        "https://evil.example/tickets/a",
        "http://shop.example/tickets/a",
        "https://shop.example:8443/tickets/a",
        "https://shop.example.evil.example/tickets/a",
    ] {
        assert_eq!(verdict(&rules, other), (Scope::Out, None), "{other}");
    }
    // A bare origin pins the root page.
    assert_eq!(
        verdict(&["https://shop.example/"], "https://shop.example/"),
        (Scope::In, Some(0))
    );
}

#[test]
fn exceptions_win_whatever_their_place_and_alone_they_carve_out_of_everything() {
    let rules = ["!/tickets/free", "/tickets/*"];
    assert_eq!(
        verdict(&rules, "https://shop.example/tickets/free"),
        (Scope::Out, Some(0))
    );
    let reversed = ["/tickets/*", "!/tickets/free"];
    assert_eq!(
        verdict(&reversed, "https://shop.example/tickets/free"),
        (Scope::Out, Some(1))
    );
    assert_eq!(
        verdict(&reversed, "https://shop.example/tickets/gala"),
        (Scope::In, Some(0))
    );
    // Only exceptions: every page but those.
    let only = ["!/admin/*"];
    assert_eq!(
        verdict(&only, "https://shop.example/admin/x"),
        (Scope::Out, Some(0))
    );
    assert_eq!(
        verdict(&only, "https://shop.example/tickets"),
        (Scope::In, None)
    );
}

#[test]
fn the_glob_backtracks_without_blowing_up() {
    assert!(glob_matches(
        "*a*a*a*a*a*a*a*a*a*b",
        &format!("{}b", "a".repeat(300))
    ));
    assert!(!glob_matches("*a*a*a*a*a*a*a*a*a*b", &"a".repeat(2000)));
    assert!(glob_matches("/x*", "/x"));
    assert!(glob_matches("**", ""));
    assert!(!glob_matches("/x", "/xy"));
}

/// Rules as the validator accepts them, over a small alphabet so they often match.
fn rule() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("a".to_owned()),
        Just("b".to_owned()),
        Just("/".to_owned()),
        Just("*".to_owned()),
        Just("?q=".to_owned()),
    ];
    let body = prop::collection::vec(piece, 0..6).prop_map(|pieces| pieces.concat());
    let start = prop_oneof![
        Just("/".to_owned()),
        Just("*".to_owned()),
        Just("https://a.example/".to_owned()),
        Just("https://b.example/".to_owned()),
    ];
    (any::<bool>(), start, body).prop_map(|(exception, start, body)| {
        format!("{}{start}{body}", if exception { "!" } else { "" })
    })
}

fn page_url() -> impl Strategy<Value = Url> {
    let origin = prop_oneof![
        Just("https://a.example"),
        Just("https://b.example"),
        Just("http://a.example"),
        Just("https://a.example:8443"),
    ];
    let path = prop::collection::vec(
        prop_oneof![Just("a"), Just("b"), Just("/"), Just("A")],
        0..6,
    )
    .prop_map(|parts| parts.concat());
    let query = prop::option::of(prop_oneof![Just("q=a"), Just("q=b")]);
    (origin, path, query).prop_map(|(origin, path, query)| {
        let query = query.map(|q| format!("?{q}")).unwrap_or_default();
        Url::parse(&format!("{origin}/{path}{query}")).expect("a generated page parses")
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn order_never_changes_the_scope(
        rules in prop::collection::vec(rule(), 1..8),
        page in page_url(),
        rotation in 0usize..8,
    ) {
        let forward = UrlScope::new(&rules).judge(&page).scope;
        let mut reversed = rules.clone();
        reversed.reverse();
        let mut rotated = rules.clone();
        let len = rotated.len();
        rotated.rotate_left(rotation % len);
        prop_assert_eq!(UrlScope::new(&reversed).judge(&page).scope, forward);
        prop_assert_eq!(UrlScope::new(&rotated).judge(&page).scope, forward);
    }

    #[test]
    fn a_matching_exception_always_wins(
        rules in prop::collection::vec(rule(), 1..8),
        page in page_url(),
    ) {
        let compiled = UrlScope::new(&rules);
        let target = Target::of(&page);
        let exception_matches = compiled.rules.iter().any(|rule| rule.exception && rule.matches(&target));
        let verdict = compiled.judge(&page);
        if exception_matches {
            prop_assert_eq!(verdict.scope, Scope::Out);
            let rule = verdict.rule.expect("the exception is named");
            prop_assert!(rules[rule].starts_with('!'));
        }
    }

    #[test]
    fn a_pinned_rule_never_matches_another_origin(
        body in rule(),
        page in page_url(),
    ) {
        let body = body.trim_start_matches('!').to_owned();
        if let Some(rest) = body.strip_prefix("https://") {
            let host = rest.split('/').next().unwrap_or_default();
            let pinned = format!("https://{host}");
            let compiled = UrlScope::new(std::slice::from_ref(&body));
            if compiled.judge(&page).scope == Scope::In {
                prop_assert_eq!(page.origin().ascii_serialization(), pinned);
            }
        }
    }
}

#[test]
fn a_page_is_an_absolute_web_url_of_bounded_length() {
    assert!(super::page_url("https://shop.example/checkout?x=1").is_some());
    assert!(super::page_url("http://127.0.0.1:8080/").is_some());
    for bad in [
        "",
        "/checkout",
        "shop.example/checkout",
        "ftp://shop.example/",
        "javascript:alert(1)",
        "data:text/html,hi",
        "https://",
        "not a url",
    ] {
        assert!(super::page_url(bad).is_none(), "{bad:?} is not a page");
    }
    let long = format!("https://shop.example/{}", "a".repeat(MAX_PAGE_URL_LEN));
    assert!(
        super::page_url(&long).is_none(),
        "an overlong URL is refused"
    );
}
