//! Operators, monitor tokens and the audit trail in this engine's memory (STORE=memory): gone
//! on restart, and the trail bounded to the newest [`AUDIT_KEPT`] entries (the oldest goes
//! first). A revoked credential is dropped with its verifiers, so nothing revoked is kept.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, PoisonError};

use qm_core::{ApiError, ErrorCode};

use super::{
    AuditPage, AuditQuery, Credential, MonitorToken, NewMonitorToken, NewOperator, Operator, new_id,
};

/// Audit entries kept in memory.
pub(crate) const AUDIT_KEPT: usize = 100_000;

/// What a verifier points at.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Holder {
    Operator(String),
    Monitor(String),
}

#[derive(Debug, Default)]
struct State {
    /// Live operators by id, with their verifiers and creation order.
    operators: HashMap<String, (Operator, Vec<Vec<u8>>, u64)>,
    /// Live (possibly expired) monitor tokens by id.
    monitors: HashMap<String, (MonitorToken, Vec<Vec<u8>>, u64)>,
    /// Counts creations, for listing in creation order (several can share a millisecond).
    created: u64,
    /// Every live credential's verifiers.
    verifiers: HashMap<Vec<u8>, Holder>,
    audit: VecDeque<qm_proto::AuditEntry>,
    last_audit_id: u64,
}

impl State {
    fn forget(&mut self, verifiers: &[Vec<u8>]) {
        for verifier in verifiers {
            self.verifiers.remove(verifier);
        }
    }

    /// Whether any of `verifiers` is taken already (a key minted twice: refused, never shared).
    fn taken(&self, verifiers: &[Vec<u8>]) -> Result<(), ApiError> {
        if verifiers
            .iter()
            .any(|verifier| self.verifiers.contains_key(verifier))
        {
            return Err(ApiError::internal(
                "a verifier of this credential belongs to another one",
            ));
        }
        Ok(())
    }

    /// Drops expired monitor tokens, so the map holds live ones only.
    fn prune(&mut self, now_ms: i64) {
        let expired: Vec<String> = self
            .monitors
            .values()
            .filter(|(token, _, _)| !token.live_at(now_ms))
            .map(|(token, _, _)| token.id.clone())
            .collect();
        for id in expired {
            if let Some((_, verifiers, _)) = self.monitors.remove(&id) {
                self.forget(&verifiers);
            }
        }
    }
}

/// The memory access store; one lock, held for a few map operations.
#[derive(Debug, Default)]
pub(crate) struct MemoryAccess {
    state: Mutex<State>,
    pub(super) records: super::records::MemoryRecords,
    pub(super) failures: super::failures::MemoryFailures,
}

impl MemoryAccess {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn create_operator(
        &self,
        new: NewOperator,
        now_ms: i64,
    ) -> Result<Operator, ApiError> {
        let mut state = self.state();
        let lower = new.name.to_lowercase();
        if state
            .operators
            .values()
            .any(|(operator, _, _)| operator.name.to_lowercase() == lower)
        {
            return Err(ApiError::new(
                ErrorCode::OperatorExists,
                format!("an operator named {:?} exists already", new.name),
            ));
        }
        state.taken(&new.verifiers)?;
        let operator = Operator {
            id: new_id("op_"),
            name: new.name,
            role: new.role,
            created_at_ms: now_ms,
            created_by: new.created_by,
        };
        for verifier in &new.verifiers {
            state
                .verifiers
                .insert(verifier.clone(), Holder::Operator(operator.id.clone()));
        }
        state.created += 1;
        let order = state.created;
        state.operators.insert(
            operator.id.clone(),
            (operator.clone(), new.verifiers, order),
        );
        Ok(operator)
    }

    /// Live operators, in creation order.
    pub(crate) fn list_operators(&self) -> Vec<Operator> {
        let state = self.state();
        let mut operators: Vec<(u64, Operator)> = state
            .operators
            .values()
            .map(|(operator, _, order)| (*order, operator.clone()))
            .collect();
        operators.sort_by_key(|(order, _)| *order);
        operators
            .into_iter()
            .map(|(_, operator)| operator)
            .collect()
    }

    pub(crate) fn revoke_operator(&self, id: &str) -> Result<Operator, ApiError> {
        let mut state = self.state();
        let Some((operator, verifiers, _)) = state.operators.remove(id) else {
            return Err(ApiError::new(
                ErrorCode::OperatorNotFound,
                format!("no operator {id:?}"),
            ));
        };
        state.forget(&verifiers);
        Ok(operator)
    }

    pub(crate) fn create_monitor_token(
        &self,
        new: NewMonitorToken,
        now_ms: i64,
    ) -> Result<MonitorToken, ApiError> {
        let mut state = self.state();
        state.prune(now_ms);
        state.taken(&new.verifiers)?;
        let token = MonitorToken {
            id: new_id("mt_"),
            label: new.label,
            created_at_ms: now_ms,
            created_by: new.created_by,
            expires_at_ms: new.expires_at_ms,
        };
        for verifier in &new.verifiers {
            state
                .verifiers
                .insert(verifier.clone(), Holder::Monitor(token.id.clone()));
        }
        state.created += 1;
        let order = state.created;
        state
            .monitors
            .insert(token.id.clone(), (token.clone(), new.verifiers, order));
        Ok(token)
    }

    /// Live monitor tokens, in creation order.
    pub(crate) fn list_monitor_tokens(&self, now_ms: i64) -> Vec<MonitorToken> {
        let mut state = self.state();
        state.prune(now_ms);
        let mut tokens: Vec<(u64, MonitorToken)> = state
            .monitors
            .values()
            .map(|(token, _, order)| (*order, token.clone()))
            .collect();
        tokens.sort_by_key(|(order, _)| *order);
        tokens.into_iter().map(|(_, token)| token).collect()
    }

    /// Revokes the live token `id` (`None`: every live one).
    pub(crate) fn revoke_monitor_tokens(
        &self,
        id: Option<&str>,
        now_ms: i64,
    ) -> Result<u32, ApiError> {
        let mut state = self.state();
        state.prune(now_ms);
        let ids: Vec<String> = match id {
            Some(id) if state.monitors.contains_key(id) => vec![id.to_owned()],
            Some(id) => {
                return Err(ApiError::new(
                    ErrorCode::MonitorTokenNotFound,
                    format!("no live monitor token {id:?}"),
                ));
            }
            None => state.monitors.keys().cloned().collect(),
        };
        let mut revoked = 0u32;
        for id in ids {
            if let Some((_, verifiers, _)) = state.monitors.remove(&id) {
                state.forget(&verifiers);
                revoked = revoked.saturating_add(1);
            }
        }
        Ok(revoked)
    }

    pub(crate) fn find_credential(&self, verifiers: &[Vec<u8>], now_ms: i64) -> Option<Credential> {
        let state = self.state();
        verifiers
            .iter()
            .find_map(|verifier| match state.verifiers.get(verifier)? {
                Holder::Operator(id) => state
                    .operators
                    .get(id)
                    .map(|(operator, _, _)| Credential::Operator(operator.clone())),
                Holder::Monitor(id) => state
                    .monitors
                    .get(id)
                    .filter(|(token, _, _)| token.live_at(now_ms))
                    .map(|(token, _, _)| Credential::Monitor(token.clone())),
            })
    }

    pub(crate) fn append_audit(&self, mut entry: qm_proto::AuditEntry) -> u64 {
        let mut state = self.state();
        state.last_audit_id += 1;
        entry.id = state.last_audit_id;
        if state.audit.len() >= AUDIT_KEPT {
            state.audit.pop_front();
        }
        state.audit.push_back(entry);
        state.last_audit_id
    }

    pub(crate) fn list_audit(&self, query: &AuditQuery) -> AuditPage {
        let state = self.state();
        let limit = query.limit as usize;
        let mut entries = Vec::with_capacity(limit.min(64));
        let mut more = false;
        for entry in state
            .audit
            .iter()
            .rev()
            .filter(|entry| query.before_id == 0 || entry.id < query.before_id)
            .filter(|entry| query.matches(entry))
        {
            if entries.len() == limit {
                more = true;
                break;
            }
            entries.push(entry.clone());
        }
        let next_before_id = match (more, entries.last()) {
            (true, Some(last)) => last.id,
            _ => 0,
        };
        AuditPage {
            entries,
            next_before_id,
        }
    }
}
