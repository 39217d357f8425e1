//! Operators, monitor tokens and the audit trail in Postgres (`operators`, `monitor_tokens`,
//! `access_verifiers`, `audit`; migration 0003), on the journal's pool. Nothing is cached: every
//! lookup reads the tables, so a revocation made through one engine holds on every engine at
//! once, and all of it survives restarts. The trail is only ever inserted into and read (the
//! table's triggers refuse UPDATE, DELETE and TRUNCATE).

use qm_core::{ApiError, ErrorCode};
use sqlx::Row;
use sqlx::postgres::{PgPool, PgRow};

use super::{
    AuditPage, AuditQuery, Credential, MonitorToken, NewMonitorToken, NewOperator, Operator, Role,
    new_id,
};

const OPERATOR_COLUMNS: &str = "id, name, role, created_at_ms, created_by";
const MONITOR_COLUMNS: &str = "id, label, created_at_ms, created_by, expires_at_ms";
const AUDIT_COLUMNS: &str =
    "id, at_ms, actor_kind, actor_id, actor_name, action, room_id, route, summary, client, status";

pub(crate) struct PgAccess {
    pool: PgPool,
}

/// A database failure as the admin answers it: 503, try again.
fn unavailable(error: sqlx::Error) -> ApiError {
    tracing::warn!(error = %error, "access storage failed");
    ApiError::new(
        ErrorCode::StorageUnavailable,
        "operator and audit storage is unavailable right now; try again shortly",
    )
    .with_retry_after(2)
}

/// Whether `error` is a unique violation of `constraint`.
fn violates(error: &sqlx::Error, constraint: &str) -> bool {
    match error {
        sqlx::Error::Database(database) => {
            database.code().as_deref() == Some("23505")
                && database.constraint().is_some_and(|name| name == constraint)
        }
        _ => false,
    }
}

fn read_operator(row: &PgRow) -> Result<Operator, ApiError> {
    let role: String = row.try_get("role").map_err(unavailable)?;
    Ok(Operator {
        id: row.try_get("id").map_err(unavailable)?,
        name: row.try_get("name").map_err(unavailable)?,
        role: Role::parse(&role)
            .map_err(|_| ApiError::internal(format!("stored operator role {role:?}")))?,
        created_at_ms: row.try_get("created_at_ms").map_err(unavailable)?,
        created_by: row.try_get("created_by").map_err(unavailable)?,
    })
}

fn read_monitor(row: &PgRow) -> Result<MonitorToken, ApiError> {
    Ok(MonitorToken {
        id: row.try_get("id").map_err(unavailable)?,
        label: row.try_get("label").map_err(unavailable)?,
        created_at_ms: row.try_get("created_at_ms").map_err(unavailable)?,
        created_by: row.try_get("created_by").map_err(unavailable)?,
        expires_at_ms: row.try_get("expires_at_ms").map_err(unavailable)?,
    })
}

fn read_audit(row: &PgRow) -> Result<qm_proto::AuditEntry, sqlx::Error> {
    let id: i64 = row.try_get("id")?;
    let status: i32 = row.try_get("status")?;
    Ok(qm_proto::AuditEntry {
        id: id.max(0) as u64,
        at_ms: row.try_get("at_ms")?,
        actor_kind: row.try_get("actor_kind")?,
        actor_id: row.try_get("actor_id")?,
        actor_name: row.try_get("actor_name")?,
        action: row.try_get("action")?,
        room_id: row.try_get("room_id")?,
        route: row.try_get("route")?,
        summary: row.try_get("summary")?,
        client: row.try_get("client")?,
        status: status.max(0) as u32,
    })
}

impl PgAccess {
    pub(crate) fn new(pool: PgPool) -> PgAccess {
        PgAccess { pool }
    }

    pub(super) fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Inserts `verifiers` for a credential in `transaction` (column `column` names it).
    async fn insert_verifiers(
        transaction: &mut sqlx::Transaction<'_, sqlx::Postgres>,
        column: &str,
        id: &str,
        verifiers: &[Vec<u8>],
    ) -> Result<(), ApiError> {
        let sql = format!(
            "INSERT INTO access_verifiers (verifier, {column}) SELECT unnest($1::bytea[]), $2"
        );
        sqlx::query(&sql)
            .bind(verifiers)
            .bind(id)
            .execute(&mut **transaction)
            .await
            .map_err(|error| {
                if violates(&error, "access_verifiers_pkey") {
                    ApiError::internal("a verifier of this credential belongs to another one")
                } else {
                    unavailable(error)
                }
            })?;
        Ok(())
    }

    pub(crate) async fn create_operator(
        &self,
        new: NewOperator,
        now_ms: i64,
    ) -> Result<Operator, ApiError> {
        let operator = Operator {
            id: new_id("op_"),
            name: new.name,
            role: new.role,
            created_at_ms: now_ms,
            created_by: new.created_by,
        };
        let mut transaction = self.pool.begin().await.map_err(unavailable)?;
        sqlx::query(
            "INSERT INTO operators (id, name, role, created_at_ms, created_by) \
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(&operator.id)
        .bind(&operator.name)
        .bind(operator.role.as_str())
        .bind(operator.created_at_ms)
        .bind(&operator.created_by)
        .execute(&mut *transaction)
        .await
        .map_err(|error| {
            if violates(&error, "operators_live_name") {
                ApiError::new(
                    ErrorCode::OperatorExists,
                    format!("an operator named {:?} exists already", operator.name),
                )
            } else {
                unavailable(error)
            }
        })?;
        Self::insert_verifiers(
            &mut transaction,
            "operator_id",
            &operator.id,
            &new.verifiers,
        )
        .await?;
        transaction.commit().await.map_err(unavailable)?;
        Ok(operator)
    }

    /// Live operators, oldest first.
    pub(crate) async fn list_operators(&self) -> Result<Vec<Operator>, ApiError> {
        let sql = format!(
            "SELECT {OPERATOR_COLUMNS} FROM operators WHERE revoked_at_ms IS NULL \
             ORDER BY seq"
        );
        let rows = sqlx::query(&sql)
            .fetch_all(&self.pool)
            .await
            .map_err(unavailable)?;
        rows.iter().map(read_operator).collect()
    }

    pub(crate) async fn revoke_operator(
        &self,
        id: &str,
        now_ms: i64,
    ) -> Result<Operator, ApiError> {
        let sql = format!(
            "UPDATE operators SET revoked_at_ms = $2 WHERE id = $1 AND revoked_at_ms IS NULL \
             RETURNING {OPERATOR_COLUMNS}"
        );
        let row = sqlx::query(&sql)
            .bind(id)
            .bind(now_ms)
            .fetch_optional(&self.pool)
            .await
            .map_err(unavailable)?;
        match row {
            Some(row) => read_operator(&row),
            None => Err(ApiError::new(
                ErrorCode::OperatorNotFound,
                format!("no operator {id:?}"),
            )),
        }
    }

    pub(crate) async fn create_monitor_token(
        &self,
        new: NewMonitorToken,
        now_ms: i64,
    ) -> Result<MonitorToken, ApiError> {
        let token = MonitorToken {
            id: new_id("mt_"),
            label: new.label,
            created_at_ms: now_ms,
            created_by: new.created_by,
            expires_at_ms: new.expires_at_ms,
        };
        let mut transaction = self.pool.begin().await.map_err(unavailable)?;
        sqlx::query(
            "INSERT INTO monitor_tokens (id, label, created_at_ms, created_by, expires_at_ms) \
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(&token.id)
        .bind(&token.label)
        .bind(token.created_at_ms)
        .bind(&token.created_by)
        .bind(token.expires_at_ms)
        .execute(&mut *transaction)
        .await
        .map_err(unavailable)?;
        Self::insert_verifiers(
            &mut transaction,
            "monitor_token_id",
            &token.id,
            &new.verifiers,
        )
        .await?;
        transaction.commit().await.map_err(unavailable)?;
        Ok(token)
    }

    /// Live monitor tokens, oldest first.
    pub(crate) async fn list_monitor_tokens(
        &self,
        now_ms: i64,
    ) -> Result<Vec<MonitorToken>, ApiError> {
        let sql = format!(
            "SELECT {MONITOR_COLUMNS} FROM monitor_tokens WHERE revoked_at_ms IS NULL \
             AND (expires_at_ms = 0 OR expires_at_ms > $1) ORDER BY seq"
        );
        let rows = sqlx::query(&sql)
            .bind(now_ms)
            .fetch_all(&self.pool)
            .await
            .map_err(unavailable)?;
        rows.iter().map(read_monitor).collect()
    }

    /// Revokes the live token `id` (`None`: every live one).
    pub(crate) async fn revoke_monitor_tokens(
        &self,
        id: Option<&str>,
        now_ms: i64,
    ) -> Result<u32, ApiError> {
        let done = sqlx::query(
            "UPDATE monitor_tokens SET revoked_at_ms = $2 WHERE revoked_at_ms IS NULL \
             AND (expires_at_ms = 0 OR expires_at_ms > $2) AND ($1::text IS NULL OR id = $1)",
        )
        .bind(id)
        .bind(now_ms)
        .execute(&self.pool)
        .await
        .map_err(unavailable)?;
        let revoked = u32::try_from(done.rows_affected()).unwrap_or(u32::MAX);
        match id {
            Some(id) if revoked == 0 => Err(ApiError::new(
                ErrorCode::MonitorTokenNotFound,
                format!("no live monitor token {id:?}"),
            )),
            _ => Ok(revoked),
        }
    }

    /// The live credential one of `verifiers` belongs to: one statement, an index probe per
    /// verifier.
    pub(crate) async fn find_credential(
        &self,
        verifiers: &[Vec<u8>],
        now_ms: i64,
    ) -> Result<Option<Credential>, ApiError> {
        if verifiers.is_empty() {
            return Ok(None);
        }
        let sql = format!(
            "SELECT {OPERATOR_COLUMNS} FROM operators WHERE revoked_at_ms IS NULL AND id IN \
             (SELECT operator_id FROM access_verifiers WHERE verifier = ANY($1)) LIMIT 1"
        );
        let row = sqlx::query(&sql)
            .bind(verifiers)
            .fetch_optional(&self.pool)
            .await
            .map_err(unavailable)?;
        if let Some(row) = row {
            return Ok(Some(Credential::Operator(read_operator(&row)?)));
        }
        let sql = format!(
            "SELECT {MONITOR_COLUMNS} FROM monitor_tokens WHERE revoked_at_ms IS NULL \
             AND (expires_at_ms = 0 OR expires_at_ms > $2) AND id IN \
             (SELECT monitor_token_id FROM access_verifiers WHERE verifier = ANY($1)) LIMIT 1"
        );
        let row = sqlx::query(&sql)
            .bind(verifiers)
            .bind(now_ms)
            .fetch_optional(&self.pool)
            .await
            .map_err(unavailable)?;
        row.as_ref()
            .map(read_monitor)
            .transpose()
            .map(|token| token.map(Credential::Monitor))
    }

    pub(crate) async fn append_audit(&self, entry: qm_proto::AuditEntry) -> Result<u64, ApiError> {
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO audit (at_ms, actor_kind, actor_id, actor_name, action, room_id, route, \
             summary, client, status) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) \
             RETURNING id",
        )
        .bind(entry.at_ms)
        .bind(&entry.actor_kind)
        .bind(&entry.actor_id)
        .bind(&entry.actor_name)
        .bind(&entry.action)
        .bind(&entry.room_id)
        .bind(&entry.route)
        .bind(&entry.summary)
        .bind(&entry.client)
        .bind(i32::try_from(entry.status).unwrap_or(i32::MAX))
        .fetch_one(&self.pool)
        .await
        .map_err(unavailable)?;
        Ok(id.max(0) as u64)
    }

    pub(crate) async fn list_audit(&self, query: &AuditQuery) -> Result<AuditPage, ApiError> {
        // Only the filters asked for reach the statement, so each is an index condition
        // (`audit_room`, `audit_action`, `audit_actor_*`) rather than an `OR` the plan must keep.
        let mut builder = sqlx::QueryBuilder::<sqlx::Postgres>::new(format!(
            "SELECT {AUDIT_COLUMNS} FROM audit WHERE at_ms >= "
        ));
        builder.push_bind(query.since_ms);
        if query.until_ms != 0 {
            builder.push(" AND at_ms <= ").push_bind(query.until_ms);
        }
        if query.before_id != 0 {
            let before_id = i64::try_from(query.before_id).unwrap_or(i64::MAX);
            builder.push(" AND id < ").push_bind(before_id);
        }
        if !query.room_id.is_empty() {
            builder.push(" AND room_id = ").push_bind(&query.room_id);
        }
        if !query.operator.is_empty() {
            builder
                .push(" AND (actor_id = ")
                .push_bind(&query.operator)
                .push(" OR actor_name = ")
                .push_bind(&query.operator)
                .push(")");
        }
        if !query.action.is_empty() {
            builder.push(" AND action = ").push_bind(&query.action);
        }
        // One more than asked, to tell whether an older page exists.
        builder
            .push(" ORDER BY id DESC LIMIT ")
            .push_bind(i64::from(query.limit) + 1);
        let rows = builder
            .build()
            .fetch_all(&self.pool)
            .await
            .map_err(unavailable)?;
        let mut entries = rows
            .iter()
            .map(read_audit)
            .collect::<Result<Vec<_>, _>>()
            .map_err(unavailable)?;
        let more = entries.len() > query.limit as usize;
        entries.truncate(query.limit as usize);
        let next_before_id = match (more, entries.last()) {
            (true, Some(last)) => last.id,
            _ => 0,
        };
        Ok(AuditPage {
            entries,
            next_before_id,
        })
    }
}
