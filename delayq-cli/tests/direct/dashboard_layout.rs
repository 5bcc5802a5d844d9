//! The page at 1,200 and 1,920 px (issue 50, item 9): with a long topic name, long dead
//! letter ids and a long last error, every button of the Topics and Dead letters tables is
//! inside the window and not clipped by its section, and long ids wrap. Screenshots to
//! target/screenshots/dashboard-layout-{1200,1920}.png, looked at before committing.

use std::time::Duration;

use delayq_dev::{producer, screenshots_dir, DevTools, RedisServer};
use serde_json::Value;

use crate::dashboard_kit::{dashboard, dead_letters};

/// For each button of the Topics and Dead letters tables: whether it lies wholly inside the
/// window and inside every box that clips it (a scrolled section), and its label.
const BUTTONS_OUTSIDE: &str = r#"
(() => {
  const out = [];
  for (const b of document.querySelectorAll('#topics button, #dead table button')) {
    const r = b.getBoundingClientRect();
    const inside = (box) => r.left >= box.left - 0.5 && r.right <= box.right + 0.5;
    let ok = r.width > 0 && inside({ left: 0, right: document.documentElement.clientWidth });
    for (let e = b.parentElement; e && ok; e = e.parentElement) {
      const s = getComputedStyle(e);
      if (s.overflowX !== 'visible') ok = inside(e.getBoundingClientRect());
    }
    if (!ok) out.push(b.textContent + ' at ' + Math.round(r.left) + '..' + Math.round(r.right));
  }
  return out;
})()
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_button_is_on_screen_at_1200_and_1920_px() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let long_topic = format!("orders.{}", "eu-west-1.checkout.".repeat(6));
    let long_topic = &long_topic[..long_topic.len().min(128)];
    p.send(long_topic, &1u8, Duration::from_secs(3_600))
        .await
        .unwrap();
    p.send("dash.short", &1u8, Duration::from_secs(3_600))
        .await
        .unwrap();
    let long_id = format!("order-{}", "7f3a9c21e5b4".repeat(20));
    let spaced = "a long id with spaces that goes on and on ".repeat(5);
    dead_letters(&p, "dash.layout", &[&long_id, spaced.trim(), "short"]).await;
    let board = dashboard(&server.url(), "127.0.0.1:0", &["--allow-writes"], None);
    for width in [1200, 1920] {
        let mut browser = DevTools::open(&board.url(), (width, 900));
        browser.wait_for(
            "document.getElementById('status').textContent.startsWith('updated') && \
             document.querySelectorAll('#dead table button').length === 6",
            Duration::from_secs(15),
        );
        let buttons =
            browser.eval("document.querySelectorAll('#topics button, #dead table button').length");
        assert_eq!(
            buttons,
            3 + 6,
            "{width} px: Pause thrice, Replay and Purge thrice"
        );
        let outside = browser.eval(BUTTONS_OUTSIDE);
        assert_eq!(
            outside,
            Value::Array(vec![]),
            "{width} px: buttons off screen or clipped"
        );
        // The long id wraps in its cell rather than widening the table past the window.
        let page = browser
            .eval("document.documentElement.scrollWidth <= document.documentElement.clientWidth");
        assert_eq!(page, true, "{width} px: the page scrolls sideways");
        browser.capture(&screenshots_dir().join(format!("dashboard-layout-{width}.png")));
    }
}
