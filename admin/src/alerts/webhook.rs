//! What an alert page looks like on the wire, and its delivery. One JSON body serves the common
//! receivers: Slack-style incoming webhooks read `text`; Alertmanager-style receivers (and the
//! bridges to PagerDuty, Opsgenie, Teams) read `status`, `alerts[].labels`, `annotations`,
//! `startsAt`, `endsAt` and `fingerprint`, in Alertmanager's webhook shape (version 4).

use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::rules::Transition;

/// How long a receiver has to answer a page.
const DELIVERY_TIMEOUT: Duration = Duration::from_secs(5);
/// Alertmanager's "no end yet".
const NO_END: &str = "0001-01-01T00:00:00Z";

/// One page to send: the labels that identify it and what it says.
#[derive(Debug, Clone)]
pub(crate) struct Page {
    pub(crate) alertname: &'static str,
    pub(crate) severity: &'static str,
    pub(crate) room: Option<String>,
    pub(crate) firing: bool,
    pub(crate) starts_at_ms: i64,
    pub(crate) ends_at_ms: Option<i64>,
    pub(crate) summary: String,
}

impl Page {
    pub(crate) fn from_transition(transition: &Transition) -> Page {
        Page {
            alertname: transition.rule.alertname(),
            severity: transition.rule.severity(),
            room: transition.room.clone(),
            firing: transition.firing,
            starts_at_ms: transition.started_at_ms,
            ends_at_ms: (!transition.firing).then_some(transition.at_ms),
            summary: transition.summary.clone(),
        }
    }

    /// Alertmanager's labels; `room` only on a room's alert.
    fn labels(&self) -> Value {
        let mut labels = json!({
            "alertname": self.alertname,
            "severity": self.severity,
            "service": "queue-manager",
        });
        if let (Some(room), Value::Object(map)) = (&self.room, &mut labels) {
            map.insert("room".to_owned(), json!(room));
        }
        labels
    }

    /// Stable per alert (name and room), so receivers group and deduplicate the fire and the
    /// resolve, and several admin processes paging the same alert are one alert to them.
    pub(crate) fn fingerprint(&self) -> String {
        let digest = Sha256::digest(format!(
            "{}\u{0}{}",
            self.alertname,
            self.room.as_deref().unwrap_or("")
        ));
        digest[..8]
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect()
    }

    /// The whole body.
    pub(crate) fn body(&self) -> Value {
        let status = if self.firing { "firing" } else { "resolved" };
        let headline = if self.firing {
            format!("[FIRING] {}", self.summary)
        } else {
            format!("[RESOLVED] {}", self.summary)
        };
        let labels = self.labels();
        let annotations = json!({ "summary": self.summary });
        json!({
            "version": "4",
            "receiver": "queue-manager",
            "status": status,
            "groupKey": format!("queue-manager:{}:{}", self.alertname, self.room.as_deref().unwrap_or("")),
            "groupLabels": { "alertname": self.alertname },
            "commonLabels": labels,
            "commonAnnotations": annotations,
            "text": headline,
            "alerts": [{
                "status": status,
                "labels": labels,
                "annotations": annotations,
                "startsAt": rfc3339(self.starts_at_ms),
                "endsAt": self.ends_at_ms.map_or_else(|| NO_END.to_owned(), rfc3339),
                "fingerprint": self.fingerprint(),
            }],
        })
    }
}

fn rfc3339(ms: i64) -> String {
    DateTime::<Utc>::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// Why a receiver did not take a page.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum Refused {
    #[error("the webhook answered {0}")]
    Status(u16),
    #[error("the webhook could not be reached: {0}")]
    Unreachable(String),
}

/// The configured receiver.
pub(crate) struct Webhook {
    url: SecretString,
    client: reqwest::Client,
}

impl Webhook {
    pub(crate) fn new(url: SecretString) -> Webhook {
        let client = reqwest::Client::builder()
            .timeout(DELIVERY_TIMEOUT)
            // A page goes where it was configured to; a redirect is a refusal, not a hop.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap_or_default();
        Webhook { url, client }
    }

    /// Posts the page; Ok with the receiver's status when it took it (2xx).
    pub(crate) async fn send(&self, page: &Page) -> Result<u16, Refused> {
        let response = self
            .client
            .post(self.url.expose_secret())
            .json(&page.body())
            .send()
            .await
            // Without the URL: its path may be the credential.
            .map_err(|error| Refused::Unreachable(error.without_url().to_string()))?;
        let status = response.status();
        if status.is_success() {
            Ok(status.as_u16())
        } else {
            Err(Refused::Status(status.as_u16()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_body_speaks_slack_and_alertmanager() {
        let page = Page {
            alertname: "QmRoomStalled",
            severity: "critical",
            room: Some("drop".to_owned()),
            firing: false,
            starts_at_ms: 1_700_000_000_000,
            ends_at_ms: Some(1_700_000_060_500),
            summary: "room drop admits nobody".to_owned(),
        };
        let body = page.body();
        assert_eq!(body["text"], "[RESOLVED] room drop admits nobody");
        assert_eq!(body["status"], "resolved");
        assert_eq!(body["alerts"][0]["labels"]["room"], "drop");
        assert_eq!(body["alerts"][0]["labels"]["alertname"], "QmRoomStalled");
        assert_eq!(body["alerts"][0]["startsAt"], "2023-11-14T22:13:20.000Z");
        assert_eq!(body["alerts"][0]["endsAt"], "2023-11-14T22:14:20.500Z");
        let firing = Page {
            firing: true,
            ends_at_ms: None,
            ..page.clone()
        };
        assert_eq!(firing.body()["alerts"][0]["endsAt"], NO_END);
        assert_eq!(firing.fingerprint(), page.fingerprint());
        let other_room = Page {
            room: Some("other".to_owned()),
            ..page.clone()
        };
        assert_ne!(other_room.fingerprint(), page.fingerprint());
        let storage = Page { room: None, ..page };
        assert!(storage.body()["alerts"][0]["labels"].get("room").is_none());
    }
}
