//! Who may do what: the operators and monitor tokens that exist, and the append-only audit
//! trail. The admin process signs and verifies every admin credential; the engine keeps only
//! what must agree across admin instances — each credential's one-way verifiers (never a key),
//! whether it is still live, and the trail.
//!
//! - Operators: a name of 1–64 printable characters (no leading or trailing space; `owner` is
//!   reserved for ADMIN_KEY) unique among live operators, case-insensitively
//!   (`operator_exists`), and a role `owner | operator | viewer` fixed at creation. A revoked
//!   operator is gone at once: never found by [`Access::find_credential`] again, not listed, and
//!   its name free for a new operator. (Its past actions keep its id and name in the trail.)
//! - Monitor tokens: an optional label and expiry; listed and found while live (not revoked,
//!   not expired).
//! - Every credential is found by any one of its verifiers through an index keyed by verifier,
//!   so a lookup costs the same however many credentials exist.
//! - Audit: ids increase; listed newest first with filters, paged by `before_id`.
//!
//! [`memory`] keeps all of it in this engine's memory (gone on restart; the trail bounded to the
//! newest [`memory::AUDIT_KEPT`] entries); [`pg`] keeps it in Postgres on the durable store, read
//! on every lookup, so a revocation holds on every engine at once and survives restarts.
//! [`records`] keeps the admin's short-lived shared records (console sessions, event-stream
//! tickets) the same two ways, and [`failures`] the credential lockout's wrong credentials.

pub(crate) mod failures;
mod memory;
mod pg;
pub(crate) mod records;
#[cfg(test)]
mod tests;

use qm_core::{ApiError, ErrorCode};
use rand::RngCore;
use sqlx::PgPool;

pub(crate) use self::memory::MemoryAccess;
pub(crate) use self::pg::PgAccess;

/// Longest operator name and monitor token label, in characters.
pub(crate) const MAX_NAME_CHARS: usize = 64;
/// Most verifiers one credential carries (one per signing key in force, with room to spare).
pub(crate) const MAX_VERIFIERS: usize = 8;
/// Longest verifier, in bytes (an HMAC-SHA256 is 32).
pub(crate) const MAX_VERIFIER_LEN: usize = 64;
/// Longest `created_by` kept, in bytes (a name of 64 characters at most 4 bytes each).
const MAX_CREATOR_LEN: usize = 256;
/// ListAudit's page size when none is asked for, and the most it answers.
pub(crate) const AUDIT_DEFAULT_LIMIT: u32 = 100;
pub(crate) const AUDIT_MAX_LIMIT: u32 = 500;

/// A role, fixed at creation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    Owner,
    Operator,
    Viewer,
}

impl Role {
    pub(crate) fn parse(text: &str) -> Result<Role, ApiError> {
        match text {
            "owner" => Ok(Role::Owner),
            "operator" => Ok(Role::Operator),
            "viewer" => Ok(Role::Viewer),
            other => Err(ApiError::new(
                ErrorCode::InvalidRole,
                format!("role {other:?} is not one of owner, operator, viewer"),
            )),
        }
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Role::Owner => "owner",
            Role::Operator => "operator",
            Role::Viewer => "viewer",
        }
    }
}

/// An operator as stored (the key itself never is).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Operator {
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) role: Role,
    pub(crate) created_at_ms: i64,
    pub(crate) created_by: String,
}

/// A monitor token as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MonitorToken {
    pub(crate) id: String,
    pub(crate) label: String,
    pub(crate) created_at_ms: i64,
    pub(crate) created_by: String,
    /// 0: no expiry.
    pub(crate) expires_at_ms: i64,
}

impl MonitorToken {
    pub(crate) fn live_at(&self, now_ms: i64) -> bool {
        self.expires_at_ms == 0 || now_ms < self.expires_at_ms
    }
}

/// What a verifier belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Credential {
    Operator(Operator),
    Monitor(MonitorToken),
}

/// A checked CreateOperator.
#[derive(Debug, Clone)]
pub(crate) struct NewOperator {
    pub(crate) name: String,
    pub(crate) role: Role,
    pub(crate) verifiers: Vec<Vec<u8>>,
    pub(crate) created_by: String,
}

/// A checked CreateMonitorToken.
#[derive(Debug, Clone)]
pub(crate) struct NewMonitorToken {
    pub(crate) label: String,
    pub(crate) verifiers: Vec<Vec<u8>>,
    pub(crate) created_by: String,
    pub(crate) expires_at_ms: i64,
}

/// ListAudit's question, checked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct AuditQuery {
    pub(crate) room_id: String,
    pub(crate) operator: String,
    pub(crate) action: String,
    pub(crate) since_ms: i64,
    /// 0: no upper bound.
    pub(crate) until_ms: i64,
    /// 0: from the newest.
    pub(crate) before_id: u64,
    pub(crate) limit: u32,
}

impl AuditQuery {
    /// Whether `entry` passes the filters (not the paging).
    pub(crate) fn matches(&self, entry: &qm_proto::AuditEntry) -> bool {
        (self.room_id.is_empty() || entry.room_id == self.room_id)
            && (self.operator.is_empty()
                || entry.actor_id == self.operator
                || entry.actor_name == self.operator)
            && (self.action.is_empty() || entry.action == self.action)
            && entry.at_ms >= self.since_ms
            && (self.until_ms == 0 || entry.at_ms <= self.until_ms)
    }
}

/// One page of the trail.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct AuditPage {
    pub(crate) entries: Vec<qm_proto::AuditEntry>,
    /// The before_id of the next page; 0 when this page reached the oldest.
    pub(crate) next_before_id: u64,
}

/// Cuts `text` to at most `max` bytes on a character boundary.
fn clamp(text: &mut String, max: usize) {
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
}

/// The longest each audit field is kept, in bytes: an entry is never refused (the trail must
/// not lose an action), only cut.
pub(crate) fn clamp_audit(entry: &mut qm_proto::AuditEntry) {
    clamp(&mut entry.actor_kind, 16);
    clamp(&mut entry.actor_id, 64);
    clamp(&mut entry.actor_name, 256);
    clamp(&mut entry.action, 64);
    clamp(&mut entry.room_id, 64);
    clamp(&mut entry.route, 512);
    clamp(&mut entry.summary, 4096);
    clamp(&mut entry.client, 128);
}

/// A name or label: at most 64 characters, none a control character, no space at either end.
fn printable(text: &str) -> bool {
    text.chars().count() <= MAX_NAME_CHARS
        && !text.chars().any(char::is_control)
        && text.trim() == text
}

pub(crate) fn check_operator_name(name: &str) -> Result<(), ApiError> {
    if name.is_empty() || !printable(name) {
        return Err(ApiError::new(
            ErrorCode::InvalidOperatorName,
            "an operator name is 1-64 printable characters with no space at either end",
        ));
    }
    if name.eq_ignore_ascii_case("owner") {
        return Err(ApiError::new(
            ErrorCode::InvalidOperatorName,
            "\"owner\" names ADMIN_KEY in the audit trail; choose another name",
        ));
    }
    Ok(())
}

fn check_verifiers(verifiers: &[Vec<u8>]) -> Result<(), ApiError> {
    let well_formed = !verifiers.is_empty()
        && verifiers.len() <= MAX_VERIFIERS
        && verifiers
            .iter()
            .all(|verifier| !verifier.is_empty() && verifier.len() <= MAX_VERIFIER_LEN);
    if well_formed {
        Ok(())
    } else {
        Err(ApiError::new(
            ErrorCode::BadRequest,
            "a credential carries 1-8 verifiers of 1-64 bytes",
        ))
    }
}

/// A CreateOperator request, checked.
pub(crate) fn new_operator(
    request: qm_proto::CreateOperatorRequest,
) -> Result<NewOperator, ApiError> {
    check_operator_name(&request.name)?;
    let role = Role::parse(&request.role)?;
    check_verifiers(&request.verifiers)?;
    let mut created_by = request.created_by;
    clamp(&mut created_by, MAX_CREATOR_LEN);
    Ok(NewOperator {
        name: request.name,
        role,
        verifiers: request.verifiers,
        created_by,
    })
}

/// A CreateMonitorToken request, checked against `now_ms`.
pub(crate) fn new_monitor_token(
    request: qm_proto::CreateMonitorTokenRequest,
    now_ms: i64,
) -> Result<NewMonitorToken, ApiError> {
    if !printable(&request.label) {
        return Err(ApiError::new(
            ErrorCode::InvalidLabel,
            "a label is at most 64 printable characters with no space at either end",
        ));
    }
    if request.expires_at_ms < 0 || (request.expires_at_ms != 0 && request.expires_at_ms <= now_ms)
    {
        return Err(ApiError::new(
            ErrorCode::InvalidExpiry,
            "expires_at_ms is 0 (no expiry) or an instant in the future",
        ));
    }
    check_verifiers(&request.verifiers)?;
    let mut created_by = request.created_by;
    clamp(&mut created_by, MAX_CREATOR_LEN);
    Ok(NewMonitorToken {
        label: request.label,
        verifiers: request.verifiers,
        created_by,
        expires_at_ms: request.expires_at_ms,
    })
}

/// A ListAudit request, checked: the limit defaulted and capped.
pub(crate) fn audit_query(request: qm_proto::ListAuditRequest) -> Result<AuditQuery, ApiError> {
    if request.since_ms < 0
        || request.until_ms < 0
        || (request.until_ms != 0 && request.until_ms < request.since_ms)
    {
        return Err(ApiError::new(
            ErrorCode::InvalidAuditQuery,
            "since and until are epoch ms, since not after until",
        ));
    }
    let limit = match request.limit {
        0 => AUDIT_DEFAULT_LIMIT,
        limit => limit.min(AUDIT_MAX_LIMIT),
    };
    Ok(AuditQuery {
        room_id: request.room_id,
        operator: request.operator,
        action: request.action,
        since_ms: request.since_ms,
        until_ms: request.until_ms,
        before_id: request.before_id,
        limit,
    })
}

/// A fresh id: `prefix` and 16 hex digits.
pub(crate) fn new_id(prefix: &str) -> String {
    let mut bytes = [0u8; 8];
    rand::rng().fill_bytes(&mut bytes);
    let mut id = String::with_capacity(prefix.len() + 16);
    id.push_str(prefix);
    for byte in bytes {
        id.push_str(&format!("{byte:02x}"));
    }
    id
}

/// The access store of this engine: memory, or Postgres beside the durable journal.
pub(crate) enum Access {
    Memory(Box<MemoryAccess>),
    Pg(PgAccess),
}

impl Access {
    /// In this engine's memory.
    pub(crate) fn memory() -> Access {
        Access::Memory(Box::default())
    }

    /// In Postgres when the durable store's pool is given, else in memory.
    pub(crate) fn new(pg_pool: Option<PgPool>) -> Access {
        match pg_pool {
            Some(pool) => Access::Pg(PgAccess::new(pool)),
            None => Access::memory(),
        }
    }

    pub(crate) async fn create_operator(&self, new: NewOperator) -> Result<Operator, ApiError> {
        let now = qm_core::clock::now_ms();
        match self {
            Access::Memory(memory) => memory.create_operator(new, now),
            Access::Pg(pg) => pg.create_operator(new, now).await,
        }
    }

    pub(crate) async fn list_operators(&self) -> Result<Vec<Operator>, ApiError> {
        match self {
            Access::Memory(memory) => Ok(memory.list_operators()),
            Access::Pg(pg) => pg.list_operators().await,
        }
    }

    pub(crate) async fn revoke_operator(&self, id: &str) -> Result<Operator, ApiError> {
        match self {
            Access::Memory(memory) => memory.revoke_operator(id),
            Access::Pg(pg) => pg.revoke_operator(id, qm_core::clock::now_ms()).await,
        }
    }

    pub(crate) async fn create_monitor_token(
        &self,
        new: NewMonitorToken,
    ) -> Result<MonitorToken, ApiError> {
        let now = qm_core::clock::now_ms();
        match self {
            Access::Memory(memory) => memory.create_monitor_token(new, now),
            Access::Pg(pg) => pg.create_monitor_token(new, now).await,
        }
    }

    pub(crate) async fn list_monitor_tokens(&self) -> Result<Vec<MonitorToken>, ApiError> {
        let now = qm_core::clock::now_ms();
        match self {
            Access::Memory(memory) => Ok(memory.list_monitor_tokens(now)),
            Access::Pg(pg) => pg.list_monitor_tokens(now).await,
        }
    }

    /// Revokes the live token `id`, or every live one with `all`; how many it revoked.
    pub(crate) async fn revoke_monitor_tokens(&self, id: &str, all: bool) -> Result<u32, ApiError> {
        let now = qm_core::clock::now_ms();
        if !all && id.is_empty() {
            return Err(ApiError::new(
                ErrorCode::MissingField,
                "name the monitor token to revoke (id), or revoke all",
            ));
        }
        let target = (!all).then_some(id);
        match self {
            Access::Memory(memory) => memory.revoke_monitor_tokens(target, now),
            Access::Pg(pg) => pg.revoke_monitor_tokens(target, now).await,
        }
    }

    /// The live credential one of `verifiers` belongs to.
    pub(crate) async fn find_credential(
        &self,
        verifiers: &[Vec<u8>],
    ) -> Result<Option<Credential>, ApiError> {
        // More than a keyring holds is no lookup the admin makes: nothing is found.
        if verifiers.len() > MAX_VERIFIERS {
            return Ok(None);
        }
        let now = qm_core::clock::now_ms();
        match self {
            Access::Memory(memory) => Ok(memory.find_credential(verifiers, now)),
            Access::Pg(pg) => pg.find_credential(verifiers, now).await,
        }
    }

    /// Appends one entry; its id.
    pub(crate) async fn append_audit(
        &self,
        mut entry: qm_proto::AuditEntry,
    ) -> Result<u64, ApiError> {
        clamp_audit(&mut entry);
        if entry.at_ms <= 0 {
            entry.at_ms = qm_core::clock::now_ms();
        }
        match self {
            Access::Memory(memory) => Ok(memory.append_audit(entry)),
            Access::Pg(pg) => pg.append_audit(entry).await,
        }
    }

    pub(crate) async fn list_audit(&self, query: &AuditQuery) -> Result<AuditPage, ApiError> {
        match self {
            Access::Memory(memory) => Ok(memory.list_audit(query)),
            Access::Pg(pg) => pg.list_audit(query).await,
        }
    }
}

/// The admin's short-lived shared records (see [`records`]).
impl Access {
    /// Stores a record; `false` when its kind is full of live ones.
    pub(crate) async fn put_record(&self, new: records::NewRecord) -> Result<bool, ApiError> {
        let now = qm_core::clock::now_ms();
        match self {
            Access::Memory(memory) => Ok(memory.records.put(new, now)),
            Access::Pg(pg) => records::pg_put(pg.pool(), new, now).await,
        }
    }

    /// The live record; taken (deleted in the same step) with `take`.
    pub(crate) async fn get_record(
        &self,
        key: &records::RecordKey,
        take: bool,
    ) -> Result<Option<records::Found>, ApiError> {
        let now = qm_core::clock::now_ms();
        match self {
            Access::Memory(memory) => Ok(memory.records.get(key, take, now)),
            Access::Pg(pg) => records::pg_get(pg.pool(), key, take, now).await,
        }
    }

    /// Counts a wrong credential (with `record`) and answers how long the address is locked.
    pub(crate) async fn auth_failures(
        &self,
        query: &failures::FailureQuery,
    ) -> Result<u64, ApiError> {
        let now = qm_core::clock::now_ms();
        match self {
            Access::Memory(memory) => Ok(memory.failures.answer(query, now)),
            Access::Pg(pg) => failures::pg_answer(pg.pool(), query, now).await,
        }
    }

    /// Deletes a record; whether a live one was there.
    pub(crate) async fn delete_record(&self, key: &records::RecordKey) -> Result<bool, ApiError> {
        let now = qm_core::clock::now_ms();
        match self {
            Access::Memory(memory) => Ok(memory.records.delete(key, now)),
            Access::Pg(pg) => records::pg_delete(pg.pool(), key, now).await,
        }
    }
}

pub(crate) fn operator_to_wire(operator: Operator) -> qm_proto::Operator {
    qm_proto::Operator {
        id: operator.id,
        name: operator.name,
        role: operator.role.as_str().to_owned(),
        created_at_ms: operator.created_at_ms,
        created_by: operator.created_by,
    }
}

pub(crate) fn monitor_token_to_wire(token: MonitorToken) -> qm_proto::MonitorToken {
    qm_proto::MonitorToken {
        id: token.id,
        label: token.label,
        created_at_ms: token.created_at_ms,
        created_by: token.created_by,
        expires_at_ms: token.expires_at_ms,
    }
}
