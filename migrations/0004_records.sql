-- Short-lived records every admin process must see alike: console sessions and event-stream
-- tickets. Opaque to the engine: the id is a digest of the bearer secret (never the secret), the
-- payload is the admin's, and a row past expires_at_ms is never answered (and is swept).
CREATE TABLE admin_records (
    kind          text   NOT NULL CHECK (kind IN ('session', 'ticket')),
    id            bytea  NOT NULL,
    payload       bytea  NOT NULL,
    expires_at_ms bigint NOT NULL,
    PRIMARY KEY (kind, id)
);

CREATE INDEX admin_records_expiry ON admin_records (kind, expires_at_ms);
