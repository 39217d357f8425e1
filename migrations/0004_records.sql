-- What every admin process must see alike: console sessions and event-stream tickets, and the
-- credential lockout's wrong credentials. Opaque to the engine: the id is a digest of the bearer secret (never the secret), the
-- payload is the admin's, and a row past expires_at_ms is never answered (and is swept).
CREATE TABLE admin_records (
    kind          text   NOT NULL CHECK (kind IN ('session', 'ticket')),
    id            bytea  NOT NULL,
    payload       bytea  NOT NULL,
    expires_at_ms bigint NOT NULL,
    PRIMARY KEY (kind, id)
);

CREATE INDEX admin_records_expiry ON admin_records (kind, expires_at_ms);

-- One row per wrong credential, by client address, for the lockout's sliding window; rows older
-- than the window are swept as new ones arrive.
CREATE TABLE admin_failures (
    address text   NOT NULL,
    at_ms   bigint NOT NULL
);

CREATE INDEX admin_failures_by_address ON admin_failures (address, at_ms);
CREATE INDEX admin_failures_by_age ON admin_failures (at_ms);
