//! Every accepted shape of `#[delay_listener]`, `#[stream_listener]`, `#[leader_task]` and
//! `#[scheduled]` compiles and registers what it says (the refused forms and their messages
//! are tests/ui.rs's). Ordinary tests, built with the rest: no trybuild project to build.
#![allow(dead_code)]

mod scheduled {
    include!("accepted/scheduled.rs");
}
mod shapes {
    include!("accepted/shapes.rs");
}
mod streams_and_leaders {
    include!("accepted/streams_and_leaders.rs");
}

use delayq_runtime::__private::{
    inventory, LeaderTaskRegistration, ListenerRegistration, ScheduleRegistration,
    StreamListenerRegistration,
};

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

#[test]
fn every_accepted_shape_is_registered_with_its_options() {
    let topics = sorted(
        inventory::iter::<ListenerRegistration>
            .into_iter()
            .map(|r| r.topic.to_string())
            .collect(),
    );
    assert_eq!(topics, ["a", "b", "c", "d", "e", "f.g:h_i-j"]);
    let b = inventory::iter::<ListenerRegistration>
        .into_iter()
        .find(|r| r.topic == "b")
        .unwrap();
    assert_eq!(
        (
            b.options.concurrency,
            b.options.max_attempts,
            b.options.ack_timeout_ms
        ),
        (8, 5, 500)
    );
    let flow = |topic: &str| {
        inventory::iter::<ListenerRegistration>
            .into_iter()
            .find(|r| r.topic == topic)
            .unwrap()
            .options
            .flow
    };
    let c = flow("c");
    assert_eq!(
        c.rate.map(|r| (r.count, r.period_ms, r.burst)),
        Some((100, 60_000, 7))
    );
    assert_eq!((c.dead_max, c.dead_ttl_ms), (50, 7_200_000));
    assert_eq!(flow("b"), delayq_runtime::__private::Flow::default());
    let streams = sorted(
        inventory::iter::<StreamListenerRegistration>
            .into_iter()
            .map(|r| format!("{}/{}", r.stream, r.group))
            .collect(),
    );
    assert_eq!(streams, ["orders.v1/audit", "orders.v1/billing"]);
    let leaders = sorted(
        inventory::iter::<LeaderTaskRegistration>
            .into_iter()
            .map(|r| r.name.to_string())
            .collect(),
    );
    assert_eq!(leaders, ["cleanup", "rollup"]);
    let schedules = sorted(
        inventory::iter::<ScheduleRegistration>
            .into_iter()
            .map(|r| format!("{} {:?} {} {}", r.name, r.cron, r.every_ms, r.tz))
            .collect(),
    );
    assert_eq!(
        schedules,
        [
            "daily-report Some(\"0 9 * * MON-FRI\") 0 Europe/Berlin",
            "hourly Some(\"@hourly\") 0 UTC",
            "sweep None 300000 UTC",
            "with-seconds Some(\"30 0 12 1 JAN *\") 0 UTC",
        ]
    );
}
