//! Browser suite: the pages in Debian's headless chromium, driven through chromedriver
//! (`qm_tests::browser`), against an app started on the memory store (`qm_tests::spawn_app`).
//! Run alone with `cargo test -p qm-tests --test browser`; it needs `chromium`,
//! `chromium-driver` and npm (the harness fetches axe-core with it when missing, see
//! `qm_tests::axe`).

mod access;
mod console;
mod console_controls;
mod inline;
mod signals;
mod visitor;
