//! The documentation pages of the admin process (`/progress`, `/docs`, `/docs/:name`, `/docs/th`,
//! `/docs/th/:name`): public HTML, no credential, the guides of this build rendered.

use qm_tests::{Reply, TestApp, spawn_app};

/// Every guide's served name and the first heading its page shows.
const GUIDES: [(&str, &str); 5] = [
    ("integration", "Integrating Queue Manager"),
    ("operations", "Operating Queue Manager"),
    ("progress", "Progress"),
    ("benchmarks", "Benchmarks"),
    ("spec", "Queue Manager — Product Spec (Contract)"),
];

async fn page(app: &TestApp, path: &str) -> Reply {
    app.get(&format!("{}{path}", app.admin)).await
}

/// The text of the first `<h1 ...>` of a page, without its self-link.
fn first_heading(html: &str) -> Option<&str> {
    let start = html.find("<h1")?;
    let rest = &html[start..];
    let text = &rest[rest.find('>')? + 1..];
    let end = text
        .find(" <a class=\"anchor\"")
        .or_else(|| text.find("</h1>"))?;
    Some(&text[..end])
}

fn assert_is_a_page(reply: &Reply, path: &str) {
    assert!(
        reply
            .header("content-type")
            .unwrap_or_default()
            .starts_with("text/html"),
        "{path}: {:?}",
        reply.header("content-type")
    );
    assert!(
        !reply.text.to_ascii_lowercase().contains("<script"),
        "{path}: no script, from markdown or anywhere else"
    );
    let csp = reply.header("content-security-policy").unwrap_or_default();
    assert!(
        csp.contains("default-src 'none'") && csp.contains("style-src 'self'"),
        "{path}: {csp}"
    );
    assert!(
        !reply.text.contains("<style"),
        "{path}: the style is linked, so the CSP holds"
    );
}

#[tokio::test]
async fn progress_renders_with_state_badges_and_a_known_row() {
    let app = spawn_app().await;
    // No credential: these are public pages.
    let reply = page(&app, "/progress").await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_is_a_page(&reply, "/progress");
    assert_eq!(reply.header("cache-control"), Some("no-cache"));
    let html = &reply.text;
    assert_eq!(first_heading(html), Some("Progress"));
    assert!(html.contains("<table>"), "tables are rendered");
    // Every state a row of docs/PROGRESS.md is in shows as its badge (the renderer's own tests
    // cover each state; the document need not have a row in every one).
    let progress = include_str!("../../../docs/PROGRESS.md");
    let mut badges_seen = 0;
    for (state, badge) in [
        (
            "done",
            "<span class=\"state state-done\"><span aria-hidden=\"true\">✓</span> done</span>",
        ),
        (
            "partial",
            "<span class=\"state state-partial\"><span aria-hidden=\"true\">◐</span> partial</span>",
        ),
        (
            "not started",
            "<span class=\"state state-not-started\"><span aria-hidden=\"true\">○</span> not started</span>",
        ),
    ] {
        if progress.contains(&format!("| {state}")) {
            assert!(html.contains(badge), "badge {badge}");
            badges_seen += 1;
        }
    }
    assert!(
        badges_seen >= 2,
        "rows done and partial are rendered as badges"
    );
    assert!(
        html.contains(
            "<code>routing.rs::versioned_and_unversioned_paths_answer_identically</code>"
        ),
        "a known row's proof"
    );
    assert!(
        html.contains("<h2 id=\"visitor-api\">"),
        "headings carry ids"
    );
    let css = reply
        .text
        .split("<link rel=\"stylesheet\" href=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("a linked stylesheet");
    let stylesheet = page(&app, css).await;
    assert_eq!(stylesheet.status, 200, "{css}");
    assert_eq!(
        stylesheet.header("cache-control"),
        Some("public, max-age=31536000, immutable")
    );
    assert_eq!(
        stylesheet.header("content-type"),
        Some("text/css; charset=utf-8")
    );
    assert_eq!(stylesheet.header("x-content-type-options"), Some("nosniff"));
    assert!(stylesheet.text.contains("prefers-color-scheme: dark"));
}

#[tokio::test]
async fn the_docs_index_lists_every_guide_and_each_guide_renders() {
    let app = spawn_app().await;
    let index = page(&app, "/docs").await;
    assert_eq!(index.status, 200);
    assert_is_a_page(&index, "/docs");
    assert!(index.text.contains("<html lang=\"en\">"));
    for (name, heading) in GUIDES {
        assert!(
            index.text.contains(&format!("<a href=\"/docs/{name}\">")),
            "the index links {name}"
        );
        let guide = page(&app, &format!("/docs/{name}")).await;
        assert_eq!(guide.status, 200, "/docs/{name}");
        assert_is_a_page(&guide, name);
        assert_eq!(first_heading(&guide.text), Some(heading), "/docs/{name}");
    }
    // Forgiving names, and the permanent link to the Thai side.
    for name in ["INTEGRATION.md", "Integration", "integration.md"] {
        let guide = page(&app, &format!("/docs/{name}")).await;
        assert_eq!(guide.status, 200, "/docs/{name}");
        assert_eq!(
            first_heading(&guide.text),
            Some("Integrating Queue Manager")
        );
    }
    assert!(
        index
            .text
            .contains("<a href=\"/docs/th\" hreflang=\"th\" lang=\"th\">ไทย</a>")
    );
}

#[tokio::test]
async fn an_unknown_guide_is_a_404_page_in_the_same_style() {
    let app = spawn_app().await;
    let reply = page(&app, "/docs/%3Cscript%3Enope").await;
    assert_eq!(reply.status, 404);
    assert_is_a_page(&reply, "/docs/<script>nope");
    assert!(reply.text.contains("No such guide"));
    assert!(
        reply.text.contains("&lt;script&gt;nope"),
        "the name is escaped"
    );
    assert!(
        reply.text.contains("<a href=\"/docs/operations\">"),
        "and the guides are listed"
    );
    let wrong_verb = app
        .send(app.http.post(format!("{}/docs/integration", app.admin)))
        .await;
    assert_eq!(wrong_verb.status, 405);
    assert_eq!(wrong_verb.code(), "method_not_allowed");
    assert!(
        wrong_verb
            .header("allow")
            .unwrap_or_default()
            .contains("GET")
    );
    let thai = page(&app, "/docs/th/nope").await;
    assert_eq!(thai.status, 404);
    assert!(thai.text.contains("<html lang=\"th\">"));
    assert!(thai.text.contains("ไม่พบคู่มือนี้"));
}

#[tokio::test]
async fn the_thai_pages_speak_thai_and_say_when_a_translation_is_missing() {
    let app = spawn_app().await;
    let index = page(&app, "/docs/th").await;
    assert_eq!(index.status, 200);
    assert_is_a_page(&index, "/docs/th");
    assert!(index.text.contains("<html lang=\"th\">"));
    assert!(index.text.contains("เอกสาร Queue Manager ฉบับภาษาไทย"));
    for (name, _) in GUIDES {
        assert!(
            index
                .text
                .contains(&format!("<a href=\"/docs/th/{name}\">")),
            "{name}"
        );
    }

    let integration = page(&app, "/docs/th/integration").await;
    assert_eq!(integration.status, 200);
    assert!(integration.text.contains("<html lang=\"th\">"));
    assert_eq!(
        first_heading(&integration.text),
        Some("การเชื่อมต่อกับ Queue Manager")
    );
    assert!(integration.text.contains("POST /api/join"));
    assert!(integration.text.contains("การตรวจที่ประตู"));

    assert!(
        !integration.text.contains("ยังไม่มีคำแปลภาษาไทย"),
        "the integration guide is wholly translated"
    );
    assert!(integration.text.contains("รหัสข้อผิดพลาด"));

    let operations = page(&app, "/docs/th/operations").await;
    assert_eq!(operations.status, 200);
    assert!(operations.text.contains("<html lang=\"th\">"));
    assert_eq!(
        first_heading(&operations.text),
        Some("การดูแลระบบ Queue Manager")
    );
    assert!(operations.text.contains("<article class=\"doc\">"));
    assert!(!operations.text.contains("ยังไม่มีคำแปลภาษาไทย"));

    let benchmarks = page(&app, "/docs/th/benchmarks").await;
    assert_eq!(benchmarks.status, 200);
    assert_eq!(first_heading(&benchmarks.text), Some("ผลการวัดประสิทธิภาพ"));
    assert!(!benchmarks.text.contains("ยังไม่มีคำแปลภาษาไทย"));

    // The live state stays English: its Thai page says so and links the English one.
    let progress = page(&app, "/docs/th/progress").await;
    assert_eq!(
        progress.status, 200,
        "never a 404 for a guide the English side has"
    );
    assert!(progress.text.contains("<html lang=\"th\">"));
    assert!(progress.text.contains("ยังไม่มีคำแปลภาษาไทย"), "the notice");
    assert!(
        progress
            .text
            .contains("<a href=\"/docs/progress\" hreflang=\"en\">"),
        "links the English page"
    );
    assert!(
        progress
            .text
            .contains("<article class=\"doc\" lang=\"en\">")
    );
    assert_eq!(first_heading(&progress.text), Some("Progress"));
}

#[tokio::test]
async fn an_unchanged_page_is_revalidated_with_304() {
    let app = spawn_app().await;
    let first = page(&app, "/docs/spec").await;
    let etag = first.header("etag").expect("an etag").to_owned();
    let again = app
        .send(
            app.http
                .get(format!("{}/docs/spec", app.admin))
                .header("if-none-match", &etag),
        )
        .await;
    assert_eq!(again.status, 304);
    assert!(again.text.is_empty());
    assert_eq!(again.header("etag"), Some(etag.as_str()));
}

/// Integrators often reach only the public host: the gateway serves the same guides, byte for
/// byte, with the same validators and the same stylesheet.
#[tokio::test]
async fn the_gateway_serves_the_same_guides_as_the_admin_process() {
    let app = spawn_app().await;
    for path in [
        "/docs",
        "/docs/integration",
        "/docs/operations",
        "/docs/th",
        "/docs/th/integration",
        "/progress",
    ] {
        let admin = page(&app, path).await;
        let gateway = app.get(&format!("{}{path}", app.gateway)).await;
        assert_eq!(gateway.status, 200, "{path}: {}", gateway.text);
        assert_eq!(gateway.text, admin.text, "{path}");
        assert_eq!(gateway.header("etag"), admin.header("etag"), "{path}");
        assert_eq!(
            gateway.header("content-security-policy"),
            admin.header("content-security-policy")
        );
    }
    let index = app.get(&format!("{}/docs", app.gateway)).await;
    let stylesheet = index
        .text
        .split('"')
        .find(|part| part.starts_with("/docs/assets/"))
        .expect("the page links its stylesheet");
    let css = app.get(&format!("{}{stylesheet}", app.gateway)).await;
    assert_eq!(css.status, 200, "{stylesheet}");
    let unknown = app.get(&format!("{}/docs/nope", app.gateway)).await;
    assert_eq!(unknown.status, 404);
    let wrong_verb = app
        .send(app.http.post(format!("{}/docs/integration", app.gateway)))
        .await;
    assert_eq!(
        (wrong_verb.status, wrong_verb.code()),
        (405, "method_not_allowed")
    );
}
