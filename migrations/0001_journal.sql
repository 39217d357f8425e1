-- The durable store's record of truth: one row per room id (its last committed seq and its
-- creation order) and the gap-free journal of every room's events.
CREATE TABLE rooms (
    room_id       text PRIMARY KEY,
    -- The seq of the room's newest committed event. A batch of events for seqs first..last is
    -- committed only if this reads first - 1, under the row lock, so the journal stays gap-free
    -- and in order even with several engines writing.
    last_seq      bigint NOT NULL DEFAULT 0,
    created_order bigserial NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE room_events (
    room_id text   NOT NULL REFERENCES rooms (room_id),
    seq     bigint NOT NULL,
    at_ms   bigint NOT NULL,
    -- The event's type tag, for people reading the journal; the payload is the whole event.
    kind    text   NOT NULL,
    payload jsonb  NOT NULL,
    PRIMARY KEY (room_id, seq)
);
