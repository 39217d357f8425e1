//! The waiting page in place on an inline host, in a real browser: the browser opens a site URL
//! on `shop.test` (resolved to loopback), the gate shows the waiting page there, the page joins
//! through `/__qm/api/join` and follows its place under `/__qm` with cookies only (nothing in
//! storage, no token in a URL), and once let through it loads the same URL again, which the
//! gate now forwards to the origin.

use std::time::Duration;

use qm_tests::browser::{self, Browser, Options, wait_for};
use qm_tests::origin::TestOrigin;
use qm_tests::{room_body, spawn_app_with};
use serde_json::json;

const SHOWN: Duration = Duration::from_secs(15);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inline_page_waits_with_cookies_only_and_returns_to_its_url_when_let_through() {
    browser::run(120, async {
        let origin = TestOrigin::start().await;
        let app = spawn_app_with(&[("INLINE_HOSTS", "shop.test=shop")]).await;
        app.create_room(room_body("shop", 0, json!({ "proxyOrigin": origin.url })))
            .await;
        let port = app.gateway.rsplit(':').next().expect("a port").to_owned();
        let browser = Browser::open_with(Options {
            loopback_hosts: vec!["shop.test".to_owned()],
            ..Options::default()
        })
        .await;
        let url = format!("http://shop.test:{port}/products/42?colour=red");
        browser.goto(&url).await;
        wait_for("#qm-position to read 1", SHOWN, || async {
            match browser.text("#qm-position").await?.trim() {
                "1" => Ok(()),
                other => Err(format!("#qm-position reads {other:?}")),
            }
        })
        .await;
        assert!(browser.cookie("qm_shop").await.expect("cookies").is_some());
        assert_eq!(
            browser.local_storage("qm_token_shop").await.expect("storage"),
            None,
            "inline, the place lives in cookies only"
        );
        let requested: Vec<String> = browser
            .js(
                "return performance.getEntriesByType('resource').map(function (e) { return e.name; });",
                vec![],
            )
            .await
            .expect("resource timing")
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter_map(|name| name.as_str().map(str::to_owned))
            .collect();
        assert!(
            requested.iter().any(|name| name.contains("/__qm/api/join")),
            "{requested:?}"
        );
        assert!(
            requested.iter().all(|name| !name.contains("token=")),
            "no token in any URL: {requested:?}"
        );
        assert_eq!(origin.hits(), 0);

        let flushed = app.admin_post("/rooms/shop/flush", json!({ "count": 1 })).await;
        assert_eq!(flushed.status, 200, "{}", flushed.text);
        wait_for("the site's own page at the same URL", SHOWN, || async {
            let body = browser.text("body").await?;
            if body.contains("site page /products/42?colour=red") {
                Ok(())
            } else {
                Err(body)
            }
        })
        .await;
        assert_eq!(browser.current_url().await.expect("url"), url);
        browser.assert_no_console_errors().await;
        app.stop().await;
    })
    .await;
}
