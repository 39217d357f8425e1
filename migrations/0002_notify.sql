-- Turn notifications (POST /api/notify): one row per place a visitor asked to be e-mailed
-- about. The address is stored sealed (ChaCha20-Poly1305 under a key derived from SECRET) plus
-- a masked form for display; the plain address is never stored.
CREATE TABLE turn_notifications (
    room_id            text    NOT NULL,
    generation         bigint  NOT NULL,
    place_kind         text    NOT NULL CHECK (place_kind IN ('ticket', 'handle')),
    place_number       bigint  NOT NULL,
    sealed_email       bytea   NOT NULL,
    masked_email       text    NOT NULL,
    -- Hash of the ownership cookie that registered it: only that browser's rejoin carries it.
    owner_hash         text    NOT NULL,
    requested_at_ms    bigint  NOT NULL,
    delivery           text    NOT NULL DEFAULT 'pending'
                               CHECK (delivery IN ('pending', 'sent', 'failed')),
    attempts           integer NOT NULL DEFAULT 0,
    next_attempt_at_ms bigint  NOT NULL DEFAULT 0,
    -- The engine sending it holds it until then, so several engines never send one twice.
    lease_until_ms     bigint  NOT NULL DEFAULT 0,
    -- First seen lapsed (expired, room reset): kept for the rejoin that carries it over.
    lapsed_since_ms    bigint,
    PRIMARY KEY (room_id, generation, place_kind, place_number)
);
