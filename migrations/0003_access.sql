-- Who may do what (the admin's operators and monitor tokens) and the audit trail. The engine
-- stores one-way verifiers of each key (HMAC-SHA256 under a key derived from SECRET), never a
-- key. Rows of revoked credentials stay (revoked_at_ms set) so the trail's ids keep naming
-- somebody; a revoked credential is never found or listed again.
CREATE TABLE operators (
    id            text   PRIMARY KEY,
    -- Creation order, for listing (several can share a millisecond).
    seq           bigserial,
    name          text   NOT NULL,
    role          text   NOT NULL CHECK (role IN ('owner', 'operator', 'viewer')),
    created_at_ms bigint NOT NULL,
    created_by    text   NOT NULL,
    revoked_at_ms bigint
);

-- A name is unique among live operators, whatever its case.
CREATE UNIQUE INDEX operators_live_name ON operators (lower(name)) WHERE revoked_at_ms IS NULL;

CREATE TABLE monitor_tokens (
    id            text   PRIMARY KEY,
    seq           bigserial,
    label         text   NOT NULL,
    created_at_ms bigint NOT NULL,
    created_by    text   NOT NULL,
    -- 0: no expiry.
    expires_at_ms bigint NOT NULL DEFAULT 0,
    revoked_at_ms bigint
);

-- Every credential's verifiers (one per signing key in force when it was made), so a lookup is
-- one index probe per verifier however many credentials exist.
CREATE TABLE access_verifiers (
    verifier         bytea PRIMARY KEY,
    operator_id      text  REFERENCES operators (id),
    monitor_token_id text  REFERENCES monitor_tokens (id),
    CHECK ((operator_id IS NULL) <> (monitor_token_id IS NULL))
);

-- The audit trail: append-only. Ids increase (a sequence: gaps are possible, order is kept).
CREATE TABLE audit (
    id         bigserial PRIMARY KEY,
    at_ms      bigint NOT NULL,
    actor_kind text   NOT NULL,
    actor_id   text   NOT NULL,
    actor_name text   NOT NULL,
    action     text   NOT NULL,
    room_id    text   NOT NULL,
    route      text   NOT NULL,
    summary    text   NOT NULL,
    client     text   NOT NULL,
    status     integer NOT NULL
);

CREATE INDEX audit_room ON audit (room_id, id);
CREATE INDEX audit_action ON audit (action, id);
CREATE INDEX audit_actor_id ON audit (actor_id, id);
CREATE INDEX audit_actor_name ON audit (actor_name, id);
CREATE INDEX audit_at ON audit (at_ms);

-- Nothing changes or removes an entry once written: not the engine, not a stray statement.
CREATE FUNCTION audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the audit trail is append-only (% refused)', TG_OP;
END;
$$;

CREATE TRIGGER audit_no_update_or_delete BEFORE UPDATE OR DELETE ON audit
    FOR EACH ROW EXECUTE FUNCTION audit_append_only();
CREATE TRIGGER audit_no_truncate BEFORE TRUNCATE ON audit
    FOR EACH STATEMENT EXECUTE FUNCTION audit_append_only();
