//! Differential property test: the durable store (the engine's rules run on its live copy of
//! the room, landed in Valkey by compare-and-set, a replica folded from the Postgres journal
//! answering reads) must answer every operation exactly like the memory store, whose room is
//! the same domain (`engine/src/domain`) under one lock.
//!
//! Each case creates a fresh room on both stores, runs one random sequence of operations
//! against both, and after every operation compares the outcome (Ok/Err and the error code),
//! the answer, and the admin room object. Both stores live for the whole test (one private
//! Valkey, one fresh database); the cases run on one tokio runtime through proptest's
//! `TestRunner`, so the servers are torn down when the test ends, pass or fail.
//!
//! Both stores run on one synthetic clock the test moves (a tick steps it a second or a few,
//! now and then minutes or a day and more, so passes and sightings lapse and a day-old pass
//! is revoked) and on generators seeded alike, so pre-queue handles and the drawn order are
//! the same on both. Rooms are scheduled (opensAt a few synthetic seconds ahead, with or
//! without preQueueMaxPerIp) at creation or later: joins enter the pre-queue, the doors open
//! on a tick or a join, the draw lands, and handles are exchanged for their drawn tickets.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestError, TestRunner};
use qm_core::ApiError;
use qm_core::room::RoomState;
use qm_engine::domain::{
    CheckAnswer, Claim, ClaimedPlace, DoorInput, JoinRequest, LapseReason, PlaceAnswer, PlaceStatus,
};
use qm_engine::store::Store;
use qm_engine::{DurableOptions, DurableStore, Environment, MemoryStore};
use qm_tests::room_body;
use qm_tests::servers::{FreshDatabase, PrivateValkey, ValkeyOptions};
use serde_json::{Value, json};

/// Ownership-cookie hashes a visitor may present ("" = none).
const SESSIONS: [&str; 4] = ["", "sess-a", "sess-b", "sess-c"];
/// Door-session key digests a check may present or offer.
const DOOR_KEYS: [&str; 3] = ["key-a", "key-b", "key-c"];
/// Client addresses that count for `queueMaxPerIp` ("" = exempt).
const IDENTITIES: [&str; 5] = [
    "",
    "198.51.100.1",
    "198.51.100.2",
    "203.0.113.7",
    "2001:db8::7",
];
/// Longest one case may take before it counts as a failure (a wedged store must not hang).
const CASE_LIMIT: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------------------------------
// The generated scenario
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
struct RoomSpec {
    rate_per_minute: u32,
    max_concurrent: Option<u64>,
    passed_ttl_sec: u64,
    queue_max_per_ip: Option<u32>,
    presence_sec: Option<u64>,
    state: RoomState,
    /// Scheduled at creation: opensAt this many synthetic ms ahead.
    opens_in_ms: Option<i64>,
    pre_queue_max_per_ip: Option<u32>,
}

/// Which place a token claims, resolved per store (each with its own generation).
#[derive(Debug, Clone, Copy)]
enum ClaimPick {
    /// A ticket an earlier join answered (index modulo the tickets seen), current generation.
    Earlier(usize),
    /// The same, but from an earlier generation of the room (a stale token).
    OtherGeneration(usize),
    /// Any ticket number, minted or not.
    Raw(u64),
    /// A pre-queue handle an earlier join answered (index modulo the handles seen).
    EarlierHandle(usize),
    /// Any handle number, issued or not.
    Handle(u64),
}

#[derive(Debug, Clone, Copy)]
enum EjectPick {
    Earlier(usize),
    Raw(u64),
}

/// One changed field of a `put_room` update (or an invalid one).
#[derive(Debug, Clone, Copy)]
enum Patch {
    Rate(u32),
    MaxConcurrent(Option<u64>),
    PassedTtl(u64),
    QueueMaxPerIp(Option<u32>),
    PresenceSec(Option<u64>),
    SessionTtl(u64),
    State(RoomState),
    Name(u8),
    /// One of [`RULE_SETS`]: the rules' revision is derived in the fold, so both stores must
    /// agree on it.
    UrlPatterns(u8),
    Invalid(u8),
}

/// The `urlPatterns` an update may set (the empty set unscopes the room).
const RULE_SETS: [&[&str]; 3] = [&[], &["/checkout/*"], &["/checkout/*", "!/checkout/help"]];
/// The pages a check may name (`None` in the op: no page at all).
const PAGES: [&str; 3] = [
    "https://shop.example/checkout/pay",
    "https://shop.example/checkout/help",
    "https://shop.example/about",
];

#[derive(Debug, Clone, Copy)]
enum Op {
    Join {
        claim: Option<ClaimPick>,
        session: usize,
        identity: usize,
    },
    Tick {
        step_ms: i64,
    },
    Flush {
        count: u64,
    },
    Eject {
        pick: EjectPick,
    },
    Purge,
    SetRate {
        rate: u32,
    },
    SetState {
        state: RoomState,
    },
    Status {
        claim: ClaimPick,
        session: usize,
    },
    /// A gateway's heartbeat report of open streams: earlier tickets (indexes) and a raw one.
    Seen {
        picks: [usize; 2],
        raw: u64,
    },
    /// A door check: a token, a door-session key (one of [`DOOR_KEYS`]), the fresh key it
    /// offers, and an ownership cookie.
    Check {
        claim: Option<ClaimPick>,
        key: Option<usize>,
        new_key: usize,
        session: usize,
        /// Index into [`PAGES`].
        page: Option<u8>,
    },
    Update {
        patch: Patch,
    },
    /// Deletes the room: later operations meet a missing room until a re-create.
    Delete,
    /// Posts the case's full room body again: a re-create (new generation, seq carried on)
    /// after a delete, an update otherwise.
    Recreate,
    /// `POST .../schedule`: doors opening this many synthetic ms ahead (`None`: the drop is
    /// cancelled), with this pre-queue cap per address.
    Schedule {
        opens_in_ms: Option<i64>,
        pre_queue_max_per_ip: Option<u32>,
    },
}

#[derive(Debug, Clone)]
struct Scenario {
    room: RoomSpec,
    ops: Vec<Op>,
}

fn state() -> impl Strategy<Value = RoomState> {
    prop_oneof![
        3 => Just(RoomState::Active),
        1 => Just(RoomState::Paused),
        1 => Just(RoomState::Bypass),
    ]
}

/// A presence window: off, or long enough (30 s and up) that no sighting lapses by the wall
/// clock within one case; only the synthetic ticks jump past it.
fn presence_sec() -> impl Strategy<Value = Option<u64>> {
    prop_oneof![1 => Just(None), 2 => Just(Some(30u64)), 1 => Just(Some(45u64))]
}

/// Doors a few synthetic seconds ahead.
fn opens_in_ms() -> impl Strategy<Value = i64> {
    1_000i64..=8_000
}

fn room_spec() -> impl Strategy<Value = RoomSpec> {
    (
        (
            0u32..=600,
            proptest::option::of(1u64..=20),
            30u64..=600,
            proptest::option::of(1u32..=3),
            presence_sec(),
            state(),
        ),
        prop_oneof![2 => Just(None), 1 => opens_in_ms().prop_map(Some)],
        proptest::option::of(1u32..=2),
    )
        .prop_map(
            |(
                (
                    rate_per_minute,
                    max_concurrent,
                    passed_ttl_sec,
                    queue_max_per_ip,
                    presence_sec,
                    state,
                ),
                opens_in_ms,
                pre_queue_max_per_ip,
            )| RoomSpec {
                rate_per_minute,
                max_concurrent,
                passed_ttl_sec,
                queue_max_per_ip,
                presence_sec,
                state,
                opens_in_ms,
                pre_queue_max_per_ip,
            },
        )
}

fn claim_pick() -> impl Strategy<Value = ClaimPick> {
    prop_oneof![
        8 => any::<usize>().prop_map(ClaimPick::Earlier),
        1 => any::<usize>().prop_map(ClaimPick::OtherGeneration),
        2 => (0u64..40).prop_map(ClaimPick::Raw),
        3 => any::<usize>().prop_map(ClaimPick::EarlierHandle),
        1 => (0u64..4).prop_map(ClaimPick::Handle),
    ]
}

fn patch() -> impl Strategy<Value = Patch> {
    prop_oneof![
        2 => (0u32..=600).prop_map(Patch::Rate),
        2 => proptest::option::of(1u64..=20).prop_map(Patch::MaxConcurrent),
        1 => (30u64..=600).prop_map(Patch::PassedTtl),
        2 => proptest::option::of(1u32..=3).prop_map(Patch::QueueMaxPerIp),
        1 => presence_sec().prop_map(Patch::PresenceSec),
        1 => (10u64..=120).prop_map(Patch::SessionTtl),
        2 => state().prop_map(Patch::State),
        1 => any::<u8>().prop_map(Patch::Name),
        4 => (0u8..RULE_SETS.len() as u8).prop_map(Patch::UrlPatterns),
        1 => (0u8..5).prop_map(Patch::Invalid),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (proptest::option::of(claim_pick()), 0..SESSIONS.len(), 0..IDENTITIES.len())
            .prop_map(|(claim, session, identity)| Op::Join { claim, session, identity }),
        // Mostly the next second or three; now and then the same second again, a long quiet
        // stretch (passes expire and free `maxConcurrent` slots, a late tick catches up), or a
        // day and more (every pass and sighting lapses; passes leave the live list).
        5 => prop_oneof![
            12 => 1000i64..=3000,
            2 => 0i64..1000,
            1 => 20_000i64..=200_000,
            1 => 86_000_000i64..=100_000_000,
        ]
        .prop_map(|step_ms| Op::Tick { step_ms }),
        2 => prop_oneof![8 => 1u64..=5, 1 => Just(0u64)].prop_map(|count| Op::Flush { count }),
        2 => prop_oneof![
            3 => any::<usize>().prop_map(EjectPick::Earlier),
            1 => (0u64..40).prop_map(EjectPick::Raw),
        ]
        .prop_map(|pick| Op::Eject { pick }),
        1 => Just(Op::Purge),
        1 => prop_oneof![8 => 0u32..=600, 1 => Just(1_000_001u32)]
            .prop_map(|rate| Op::SetRate { rate }),
        2 => state().prop_map(|state| Op::SetState { state }),
        3 => (claim_pick(), 0..SESSIONS.len())
            .prop_map(|(claim, session)| Op::Status { claim, session }),
        2 => (any::<[usize; 2]>(), 0u64..40).prop_map(|(picks, raw)| Op::Seen { picks, raw }),
        4 => (
            proptest::option::of(claim_pick()),
            proptest::option::of(0..DOOR_KEYS.len()),
            0..DOOR_KEYS.len(),
            0..SESSIONS.len(),
            proptest::option::of(0u8..PAGES.len() as u8),
        )
            .prop_map(|(claim, key, new_key, session, page)| Op::Check {
                claim,
                key,
                new_key,
                session,
                page,
            }),
        2 => patch().prop_map(|patch| Op::Update { patch }),
        1 => Just(Op::Delete),
        1 => Just(Op::Recreate),
        1 => (
            prop_oneof![3 => opens_in_ms().prop_map(Some), 1 => Just(None)],
            proptest::option::of(1u32..=2),
        )
            .prop_map(|(opens_in_ms, pre_queue_max_per_ip)| Op::Schedule {
                opens_in_ms,
                pre_queue_max_per_ip,
            }),
    ]
}

fn scenario() -> impl Strategy<Value = Scenario> {
    (room_spec(), proptest::collection::vec(op(), 1..=40))
        .prop_map(|(room, ops)| Scenario { room, ops })
}

// ---------------------------------------------------------------------------------------------
// Normalised answers: what must be equal, with wall-clock instants left out
// ---------------------------------------------------------------------------------------------

fn outcome<T>(result: &Result<T, ApiError>, answer: impl FnOnce(&T) -> Value) -> Value {
    match result {
        Ok(value) => json!({ "ok": answer(value) }),
        Err(error) => json!({ "err": error.code.as_str() }),
    }
}

/// The admin room object, compared whole: both stores run on the same clock.
fn stripped(room: &Value) -> Value {
    room.clone()
}

/// A place; `generation` is the store's own, and only agreement with it is compared.
fn place_json(place: &PlaceStatus, generation: u64) -> Value {
    json!({
        "roomId": place.room_id,
        "generationIsTheRoomsOwn": place.generation == generation,
        "ticket": place.ticket,
        "position": place.position,
        "ahead": place.ahead,
        "etaSec": place.eta_sec,
        "state": place.state.as_str(),
        "passed": place.passed,
        "redirectUrl": place.redirect_url,
        "hasPassExpiry": place.pass_expires_at_ms != 0,
        "newPlace": place.new_place,
        "bound": place.bound,
        "opensAtMs": place.opens_at_ms,
        "handle": place.handle,
        "preCount": place.pre_count,
        "passExpiresAtMs": place.pass_expires_at_ms,
        "nowMs": place.now_ms,
        "branding": place.branding_json,
        "replacedReason": place.replaced_reason.map(LapseReason::as_str),
    })
}

fn answer_json(answer: &PlaceAnswer, generation: u64) -> Value {
    match answer {
        PlaceAnswer::Place(place) => json!({ "place": place_json(place, generation) }),
        PlaceAnswer::Lapsed(reason) => json!({ "lapsed": reason.as_str() }),
    }
}

fn check_json(answer: &Option<CheckAnswer>, generation: u64) -> Value {
    match answer {
        None => Value::Null,
        Some(answer) => json!({
            "action": answer.action.as_str(),
            "reason": answer.reason,
            "state": answer.state.as_str(),
            "generationIsTheRoomsOwn": answer.generation == generation,
            "targetUrl": answer.target_url,
            "tagOrigins": answer.tag_origins,
            "sessionOpened": answer.session_opened,
            "clearToken": answer.clear_token,
            "sessionExpiresAt": answer.session_expires_at_ms,
            "targeting": answer.targeting.as_ref().map(|verdict| json!({
                "rev": verdict.rev,
                "scope": verdict.scope.as_str(),
                "rule": verdict.rule_text(),
            })),
        }),
    }
}

fn patch_body(room_id: &str, patch: Patch) -> Value {
    let (key, value) = match patch {
        Patch::Rate(rate) => ("ratePerMinute", json!(rate)),
        Patch::MaxConcurrent(max) => ("maxConcurrent", json!(max)),
        Patch::PassedTtl(ttl) => ("passedTtlSec", json!(ttl)),
        Patch::QueueMaxPerIp(cap) => ("queueMaxPerIp", json!(cap)),
        Patch::PresenceSec(window) => ("presenceSec", json!(window)),
        Patch::SessionTtl(ttl) => ("sessionTtlSec", json!(ttl)),
        Patch::State(state) => ("state", json!(state.as_str())),
        Patch::Name(n) => ("name", json!(format!("Renamed {n}"))),
        Patch::UrlPatterns(set) => ("urlPatterns", json!(RULE_SETS[set as usize])),
        Patch::Invalid(0) => ("passedTtlSec", json!(5)),
        Patch::Invalid(1) => ("maxConcurrent", json!(0)),
        Patch::Invalid(2) => ("queueMaxPerIp", json!(0)),
        Patch::Invalid(3) => ("state", json!("closed")),
        Patch::Invalid(_) => ("ratePerMinute", json!(2_000_000)),
    };
    json!({ "id": room_id, key: value })
}

// ---------------------------------------------------------------------------------------------
// Running one case against both stores
// ---------------------------------------------------------------------------------------------

const MEMORY: usize = 0;
const DURABLE: usize = 1;

/// How often each kind of agreed answer came up, so a run shows what it exercised.
static COVERAGE: Mutex<BTreeMap<String, u64>> = Mutex::new(BTreeMap::new());

/// Tallies the kind of an agreed answer: the operation and how it came out.
fn tally(op: &Op, answer: &Value) {
    let name = format!("{op:?}");
    let name = name.split([' ', '{', '(']).next().unwrap_or_default();
    let ok = &answer["ok"];
    let kind = if let Some(code) = answer["err"].as_str() {
        format!("err {code}")
    } else if let Some(reason) = ok["lapsed"].as_str() {
        format!("lapsed {reason}")
    } else if let Some(place) = ok.get("place").or(ok.get("newPlace").map(|_| ok)) {
        let how = match place["replacedReason"].as_str() {
            Some(reason) => format!("replaced {reason}"),
            None if place["newPlace"] == true => "new".to_owned(),
            None => "kept".to_owned(),
        };
        let passed = if place["passed"] == true {
            "passed"
        } else if place["handle"].is_u64() {
            "pre-queued"
        } else {
            "waiting"
        };
        format!("{how} {passed}")
    } else if let Some(action) = ok["reason"].as_str() {
        format!("check {action}")
    } else if ok["drawn"].is_u64() {
        "the pre-queue drawn".to_owned()
    } else if ok["ghosts"] == true {
        "ghosts promoted slotless".to_owned()
    } else if ok["passed"].as_u64().is_some_and(|passed| passed > 0)
        || ok["purged"].as_u64().is_some_and(|purged| purged > 0)
    {
        "some".to_owned()
    } else if let Some(was) = ok["was"].as_str() {
        format!("was {was}")
    } else {
        "ok".to_owned()
    };
    *COVERAGE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .entry(format!("{name}: {kind}"))
        .or_default() += 1;
}

struct Case<'a> {
    stores: [&'a dyn Store; 2],
    room_id: String,
    /// The create body, posted again by [`Op::Recreate`].
    body: Value,
    /// Each store's generation of the room, from its own room object.
    generations: [u64; 2],
    /// Tickets the joins answered (the same on both stores, or the case already failed).
    tickets: Vec<u64>,
    /// Pre-queue handles the joins answered (likewise the same on both).
    handles: Vec<u64>,
    /// The synthetic clock both stores run on.
    clock: Arc<AtomicI64>,
    trace: Vec<String>,
}

impl Case<'_> {
    fn fail(&self, what: &str, memory: &Value, durable: &Value) -> TestCaseError {
        TestCaseError::fail(format!(
            "room {}: the stores disagree on {what}\n  memory:  {memory}\n  durable: {durable}\n\
             steps so far (answers as both stores gave them):\n{}",
            self.room_id,
            self.trace.join("\n")
        ))
    }

    fn compare(&mut self, what: &str, memory: Value, durable: Value) -> Result<(), TestCaseError> {
        if memory != durable {
            return Err(self.fail(what, &memory, &durable));
        }
        self.trace.push(format!("  {what} => {memory}"));
        Ok(())
    }

    fn claim(&self, pick: ClaimPick, side: usize) -> Claim {
        let generation = self.generations[side];
        let earlier = |index: usize| {
            if self.tickets.is_empty() {
                1
            } else {
                self.tickets[index % self.tickets.len()]
            }
        };
        match pick {
            ClaimPick::Earlier(index) => Claim {
                generation,
                place: ClaimedPlace::Ticket(earlier(index)),
            },
            ClaimPick::OtherGeneration(index) => Claim {
                generation: generation - 1,
                place: ClaimedPlace::Ticket(earlier(index)),
            },
            ClaimPick::Raw(ticket) => Claim {
                generation,
                place: ClaimedPlace::Ticket(ticket),
            },
            ClaimPick::EarlierHandle(index) => Claim {
                generation,
                place: ClaimedPlace::Handle(match self.handles.is_empty() {
                    true => 1,
                    false => self.handles[index % self.handles.len()],
                }),
            },
            ClaimPick::Handle(handle) => Claim {
                generation,
                place: ClaimedPlace::Handle(handle),
            },
        }
    }

    async fn room(&self, side: usize) -> Result<Value, ApiError> {
        self.stores[side].get_room(self.room_id.clone()).await
    }

    /// Compares both admin room objects and checks neither store's generation moved.
    async fn compare_rooms(&mut self, what: &str) -> Result<(), TestCaseError> {
        let mut rooms = Vec::with_capacity(2);
        let mut generations_kept = Vec::with_capacity(2);
        for side in [MEMORY, DURABLE] {
            let room = self.room(side).await;
            generations_kept.push(json!({
                "created": self.generations[side],
                "now": room.as_ref().ok().map(|room| room["generation"].clone()),
            }));
            rooms.push(outcome(&room, stripped));
        }
        let [memory, durable]: [Value; 2] = rooms.try_into().expect("two rooms");
        if memory != durable {
            return Err(self.fail(&format!("{what}: the room object"), &memory, &durable));
        }
        // Each store keeps the generation it created the room with (they may differ by the
        // second each store read its clock in).
        if generations_kept
            .iter()
            .any(|kept| kept["now"].is_number() && kept["now"] != kept["created"])
        {
            return Err(self.fail(
                &format!("{what}: the generation moved"),
                &generations_kept[MEMORY],
                &generations_kept[DURABLE],
            ));
        }
        Ok(())
    }

    fn now(&self) -> i64 {
        self.clock.load(Ordering::Relaxed)
    }

    /// Runs `op` on both stores and compares the answers and the rooms after it.
    async fn step(&mut self, index: usize, op: Op) -> Result<(), TestCaseError> {
        let mut what = format!("#{index} {op:?}");
        if let Op::Tick { step_ms } = op {
            self.clock.fetch_add(step_ms, Ordering::Relaxed);
            what = format!("{what} at {}", self.now());
        }
        let passed_before = self.passed_total().await;
        let slotless_before = self.slotless_passes().await;
        let pre_queue_before = self.pre_queue().await;
        let mut answers = Vec::with_capacity(2);
        for side in [MEMORY, DURABLE] {
            answers.push(self.run(side, op).await);
        }
        if let Op::Tick { .. } = op
            && self.passed_total().await > passed_before
        {
            tally(&op, &json!({ "ok": { "passed": 1 } }));
            if self.slotless_passes().await > slotless_before {
                tally(&op, &json!({ "ok": { "ghosts": true } }));
            }
        }
        if pre_queue_before > 0
            && self.pre_queue().await == 0
            && !matches!(op, Op::Purge | Op::Delete)
        {
            tally(&op, &json!({ "ok": { "drawn": pre_queue_before } }));
        }
        let [memory, durable]: [Value; 2] = answers.try_into().expect("two answers");
        if let Op::Join { .. } = op {
            let place = &memory["ok"];
            if let Some(handle) = place["handle"].as_u64()
                && !self.handles.contains(&handle)
            {
                self.handles.push(handle);
            } else if let Some(ticket) = place["ticket"].as_u64()
                && ticket != 0
                && !self.tickets.contains(&ticket)
            {
                self.tickets.push(ticket);
            }
        }
        if memory == durable {
            tally(&op, &memory);
        }
        self.compare(&what, memory, durable)?;
        if let Op::Recreate = op {
            for side in [MEMORY, DURABLE] {
                if let Ok(room) = self.room(side).await {
                    self.generations[side] = room["generation"].as_u64().unwrap_or_default();
                }
            }
        }
        self.compare_rooms(&what).await
    }

    async fn run(&self, side: usize, op: Op) -> Value {
        let store = self.stores[side];
        let room_id = self.room_id.clone();
        let generation = self.generations[side];
        match op {
            Op::Join {
                claim,
                session,
                identity,
            } => {
                let request = JoinRequest {
                    claim: claim.map(|pick| self.claim(pick, side)),
                    session_hash: SESSIONS[session].to_owned(),
                    identity: IDENTITIES[identity].to_owned(),
                    pre_queue_ceiling: None,
                    bot_score: 0,
                };
                let answer = store.join(room_id, request).await;
                outcome(&answer, |place| place_json(place, generation))
            }
            Op::Tick { .. } => outcome(&store.tick(self.now()).await, |()| Value::Null),
            Op::Flush { count } => outcome(
                &store.flush(room_id, count).await,
                |(passed, room)| json!({ "passed": passed, "room": stripped(room) }),
            ),
            Op::Eject { pick } => {
                let ticket = match pick {
                    EjectPick::Earlier(index) if !self.tickets.is_empty() => {
                        self.tickets[index % self.tickets.len()]
                    }
                    EjectPick::Earlier(index) => index as u64 % 3,
                    EjectPick::Raw(ticket) => ticket,
                };
                outcome(
                    &store.eject(room_id, ticket).await,
                    |(was, room)| json!({ "ticket": ticket, "was": format!("{was:?}"), "room": stripped(room) }),
                )
            }
            Op::Purge => outcome(
                &store.purge(room_id).await,
                |(purged, room)| json!({ "purged": purged.total(), "preQueue": purged.pre_queue, "room": stripped(room) }),
            ),
            Op::SetRate { rate } => outcome(&store.set_rate(room_id, rate).await, stripped),
            Op::SetState { state } => outcome(&store.set_state(room_id, state).await, stripped),
            Op::Status { claim, session } => {
                let claim = self.claim(claim, side);
                let answer = store
                    .status(room_id, claim, SESSIONS[session].to_owned())
                    .await;
                outcome(&answer, |answer| answer_json(answer, generation))
            }
            Op::Seen { picks, raw } => {
                let mut tickets: Vec<u64> = picks
                    .iter()
                    .filter(|_| !self.tickets.is_empty())
                    .map(|index| self.tickets[index % self.tickets.len()])
                    .collect();
                tickets.push(raw);
                outcome(&store.seen(room_id, tickets).await, |()| Value::Null)
            }
            Op::Check {
                claim,
                key,
                new_key,
                session,
                page,
            } => {
                let input = DoorInput {
                    claim: claim.map(|pick| self.claim(pick, side)),
                    page: page.map(|page| PAGES[page as usize].to_owned()),
                    ownership_hash: SESSIONS[session].to_owned(),
                    key_hash: key.map(|key| DOOR_KEYS[key].to_owned()).unwrap_or_default(),
                    new_key_hash: DOOR_KEYS[new_key].to_owned(),
                };
                let answer = store.check(room_id, input).await;
                outcome(&answer, |answer| check_json(answer, generation))
            }
            Op::Update { patch } => {
                let body = patch_body(&room_id, patch);
                outcome(
                    &store.put_room(body).await,
                    |put| json!({ "created": put.created, "room": stripped(&put.room) }),
                )
            }
            Op::Delete => outcome(&store.delete_room(room_id).await, |()| Value::Null),
            Op::Schedule {
                opens_in_ms,
                pre_queue_max_per_ip,
            } => {
                let body = json!({
                    "opensAt": opens_in_ms.map(|ahead| self.now() + ahead),
                    "preQueueMaxPerIp": pre_queue_max_per_ip,
                });
                outcome(&store.schedule(room_id, body).await, stripped)
            }
            Op::Recreate => outcome(&store.put_room(self.body.clone()).await, |put| {
                let now = put.room["generation"].as_u64().unwrap_or_default();
                json!({
                    "created": put.created,
                    "generationAdvanced": now > generation,
                    "room": stripped(&put.room),
                })
            }),
        }
    }

    /// The memory store's `slotlessPasses` (0 without a room).
    async fn slotless_passes(&self) -> u64 {
        self.room(MEMORY).await.map_or(0, |room| {
            room["slotlessPasses"].as_u64().unwrap_or_default()
        })
    }

    /// The memory store's `preQueue` (0 without a room).
    async fn pre_queue(&self) -> u64 {
        self.room(MEMORY)
            .await
            .map_or(0, |room| room["preQueue"].as_u64().unwrap_or_default())
    }

    /// The memory store's `passedTotal` (0 without a room).
    async fn passed_total(&self) -> u64 {
        self.room(MEMORY)
            .await
            .map_or(0, |room| room["passedTotal"].as_u64().unwrap_or_default())
    }
}

async fn run_case(
    stores: [&dyn Store; 2],
    clock: Arc<AtomicI64>,
    room_id: String,
    scenario: &Scenario,
) -> Result<(), TestCaseError> {
    let spec = &scenario.room;
    let now = clock.load(Ordering::Relaxed);
    let body = room_body(
        &room_id,
        spec.rate_per_minute,
        json!({
            "maxConcurrent": spec.max_concurrent,
            "passedTtlSec": spec.passed_ttl_sec,
            "queueMaxPerIp": spec.queue_max_per_ip,
            "presenceSec": spec.presence_sec,
            "state": spec.state.as_str(),
            "opensAt": spec.opens_in_ms.map(|ahead| now + ahead),
            "preQueueMaxPerIp": spec.pre_queue_max_per_ip,
        }),
    );
    let mut case = Case {
        stores,
        room_id,
        body: body.clone(),
        generations: [0; 2],
        tickets: Vec::new(),
        handles: Vec::new(),
        clock,
        trace: Vec::new(),
    };
    let mut created = Vec::with_capacity(2);
    for side in [MEMORY, DURABLE] {
        let put = stores[side].put_room(body.clone()).await;
        if let Ok(put) = &put {
            case.generations[side] = put.room["generation"].as_u64().unwrap_or_default();
        }
        created.push(outcome(
            &put,
            |put| json!({ "created": put.created, "room": stripped(&put.room) }),
        ));
    }
    let [memory, durable]: [Value; 2] = created.try_into().expect("two answers");
    case.compare(&format!("create {body}"), memory, durable)?;
    prop_assert!(
        case.generations.iter().all(|generation| *generation > 1),
        "both stores answer a generation: {:?}",
        case.generations
    );
    case.compare_rooms("create").await?;

    for (index, op) in scenario.ops.iter().enumerate() {
        case.step(index, *op).await?;
    }

    let mut deleted = Vec::with_capacity(2);
    for side in [MEMORY, DURABLE] {
        let delete = stores[side].delete_room(case.room_id.clone()).await;
        let after = case.room(side).await;
        deleted.push(json!({
            "delete": outcome(&delete, |()| Value::Null),
            "after": outcome(&after, stripped),
        }));
    }
    let [memory, durable]: [Value; 2] = deleted.try_into().expect("two answers");
    case.compare("delete", memory, durable)
}

#[test]
fn the_durable_store_answers_like_the_memory_store() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    // One synthetic clock for both stores, and generators seeded alike.
    let clock = Arc::new(AtomicI64::new(1_900_000_000_000));
    let environment = || {
        let clock = clock.clone();
        Environment::simulated(Arc::new(move || clock.load(Ordering::Relaxed)), 0)
    };
    let environments = [environment(), environment()];
    let (valkey, database, durable) = runtime.block_on(async {
        let valkey = PrivateValkey::start(ValkeyOptions::default()).await;
        let database = FreshDatabase::create().await;
        let options = DurableOptions {
            valkey_url: valkey.url(),
            database_url: database.url(),
        };
        let durable = DurableStore::start_with(&options, environments[DURABLE].clone())
            .await
            .unwrap_or_else(|error| panic!("start the durable store: {error}"));
        (valkey, database, durable)
    });
    let memory = MemoryStore::with_environment(environments[MEMORY].clone());
    let cases = AtomicU64::new(0);

    let mut runner = TestRunner::new(Config {
        // PROPTEST_CASES (read by `Config::default`) runs more cases when hunting.
        cases: match std::env::var_os("PROPTEST_CASES") {
            Some(_) => Config::default().cases,
            None => 40,
        },
        failure_persistence: None,
        max_shrink_time: 240_000,
        ..Config::default()
    });
    let result = runner.run(&scenario(), |scenario| {
        let case_number = cases.fetch_add(1, Ordering::Relaxed);
        let room_id = format!("d{case_number}");
        // Both generators start each case alike, so a case (and its shrinking) replays the
        // same whatever the cases before it did.
        for environment in &environments {
            environment.reseed(case_number);
        }
        let stores: [&dyn Store; 2] = [&memory, &durable];
        runtime.block_on(async {
            let case = run_case(stores, clock.clone(), room_id.clone(), &scenario);
            tokio::time::timeout(CASE_LIMIT, case)
                .await
                .unwrap_or_else(|_| {
                    Err(TestCaseError::fail(format!(
                        "room {room_id}: the case did not finish within {CASE_LIMIT:?}"
                    )))
                })
        })
    });
    eprintln!(
        "store_differential: {} rooms run",
        cases.load(Ordering::Relaxed)
    );
    for (kind, count) in COVERAGE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .iter()
    {
        eprintln!("  {count:>5}  {kind}");
    }

    runtime.block_on(async move { drop(durable) });
    runtime.shutdown_timeout(Duration::from_secs(2));
    drop(valkey);
    drop(database);

    match result {
        Ok(()) => {}
        Err(TestError::Fail(reason, scenario)) => {
            panic!("minimal failing scenario: {scenario:#?}\n{reason}")
        }
        Err(TestError::Abort(reason)) => panic!("the property test aborted: {reason}"),
    }
}
