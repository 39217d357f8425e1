//! Who a credential speaks for ([`Principal`]) and what a route needs ([`Grant`]). The roles
//! form one ladder — monitor < viewer < operator < owner — so a grant is the lowest rung that
//! may use the route, and the check is one comparison. The table that names each route's grant
//! is `crate::routes`.

use qm_core::{ApiError, ErrorCode};
use serde::{Deserialize, Serialize};

/// A rung of the ladder. The order of the variants is the order of the ladder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Role {
    /// The read-only monitor token behind a share link: viewer minus audit, visitors,
    /// targeting and the list of share links.
    Monitor,
    Viewer,
    Operator,
    Owner,
}

impl Role {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Role::Monitor => "monitor",
            Role::Viewer => "viewer",
            Role::Operator => "operator",
            Role::Owner => "owner",
        }
    }

    /// The roles an operator may be created with (a monitor is a token, not an operator).
    pub(crate) fn parse_operator_role(text: &str) -> Option<Role> {
        match text {
            "viewer" => Some(Role::Viewer),
            "operator" => Some(Role::Operator),
            "owner" => Some(Role::Owner),
            _ => None,
        }
    }
}

/// What kind of credential the principal holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum PrincipalKind {
    /// ADMIN_KEY.
    Owner,
    /// A named operator key (`qmo_…`).
    Operator,
    /// A monitor token (`qmm_…`).
    Monitor,
}

impl PrincipalKind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            PrincipalKind::Owner => "owner",
            PrincipalKind::Operator => "operator",
            PrincipalKind::Monitor => "monitor",
        }
    }
}

/// Who a credential speaks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Principal {
    pub(crate) kind: PrincipalKind,
    /// The operator's or monitor token's id; `owner` for ADMIN_KEY.
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) role: Role,
}

impl Principal {
    /// ADMIN_KEY.
    pub(crate) fn owner() -> Principal {
        Principal {
            kind: PrincipalKind::Owner,
            id: "owner".to_owned(),
            name: "owner".to_owned(),
            role: Role::Owner,
        }
    }
}

/// What a route needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Grant {
    /// No credential checked by the gate: the route judges its own (the console's sign-in,
    /// sign-out and who-am-I).
    Open,
    /// A read: rooms, events, metrics, health. Open to the monitor token.
    Read,
    /// A read the monitor token is refused: audit, visitors, targeting, share links.
    ReadSensitive,
    /// Changes queue state or room settings: operator and owner.
    Change,
    /// Operators, monitor tokens, deleting a room, shutting down: owner only.
    Own,
}

impl Grant {
    /// The lowest role that holds this grant (`None`: no credential needed).
    pub(crate) fn needs(self) -> Option<Role> {
        match self {
            Grant::Open => None,
            Grant::Read => Some(Role::Monitor),
            Grant::ReadSensitive => Some(Role::Viewer),
            Grant::Change => Some(Role::Operator),
            Grant::Own => Some(Role::Owner),
        }
    }

    /// Lets `principal` through, or answers 403 `insufficient_role` naming the role needed.
    pub(crate) fn check(self, principal: &Principal) -> Result<(), ApiError> {
        let Some(needed) = self.needs() else {
            return Ok(());
        };
        if principal.role >= needed {
            return Ok(());
        }
        let message = if principal.role == Role::Monitor && needed == Role::Viewer {
            "this needs the viewer role or above: the monitor token is read-only and may not read \
             the audit trail, visitors, targeting or the share links"
                .to_owned()
        } else {
            format!(
                "this needs the {} role{} (signed in as {}, role {})",
                needed.as_str(),
                if needed == Role::Owner {
                    ""
                } else {
                    " or above"
                },
                principal.name,
                principal.role.as_str()
            )
        };
        Err(ApiError::new(ErrorCode::InsufficientRole, message))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_role(role: Role) -> Principal {
        Principal {
            kind: PrincipalKind::Operator,
            id: "op".to_owned(),
            name: "someone".to_owned(),
            role,
        }
    }

    #[test]
    fn each_grant_admits_its_role_and_those_above_only() {
        let roles = [Role::Monitor, Role::Viewer, Role::Operator, Role::Owner];
        let grants = [
            (Grant::Read, 0),
            (Grant::ReadSensitive, 1),
            (Grant::Change, 2),
            (Grant::Own, 3),
        ];
        for (grant, lowest) in grants {
            for (rung, role) in roles.iter().enumerate() {
                let verdict = grant.check(&with_role(*role));
                assert_eq!(verdict.is_ok(), rung >= lowest, "{grant:?} {role:?}");
                if let Err(error) = verdict {
                    assert_eq!(error.code, ErrorCode::InsufficientRole);
                    let needed = grant.needs().map(Role::as_str).unwrap_or_default();
                    assert!(error.message.contains(needed), "{}", error.message);
                }
            }
        }
        assert!(Grant::Open.check(&with_role(Role::Monitor)).is_ok());
    }

    #[test]
    fn only_the_three_operator_roles_parse() {
        assert_eq!(Role::parse_operator_role("viewer"), Some(Role::Viewer));
        assert_eq!(Role::parse_operator_role("owner"), Some(Role::Owner));
        assert_eq!(Role::parse_operator_role("monitor"), None);
        assert_eq!(Role::parse_operator_role("Owner"), None);
    }
}
