//! The mailer: an engine task that every half second reads each record's place from the store
//! and acts on what it finds. A passed place gets its e-mail (over SMTP, retried with
//! exponential backoff); a handle that was drawn has its record follow the drawn ticket; an
//! ejected or purged place has its record deleted; an expired or reset place keeps its record
//! for the rejoin that carries it over, until no token that could present it is still valid.

use std::sync::Arc;
use std::time::Duration;

use lettre::message::header::ContentType;
use lettre::message::{Mailbox, Message};
use lettre::transport::smtp::AsyncSmtpTransport;
use lettre::{AsyncTransport, Tokio1Executor};
use qm_core::clock::now_ms;
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;

use super::Notifier;
use super::record::{Delivery, PlaceKey, PlaceKind, Record, Settlement};
use crate::domain::{LapseReason, PlaceAnswer, PlaceStatus};
use crate::shutdown::stopped;

/// How often the book is scanned.
const SCAN_PERIOD: Duration = Duration::from_millis(500);
/// Attempts before a record reads `failed`.
pub(crate) const MAX_ATTEMPTS: u32 = 6;
/// The first retry waits this long; each further one twice as long, up to [`RETRY_CAP_MS`].
const RETRY_BASE_MS: i64 = 1_000;
const RETRY_CAP_MS: i64 = 60_000;
/// Longest one SMTP conversation may take.
const SMTP_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a sender holds a record: past the SMTP timeout, so a live sender never loses it,
/// and short, so a crashed engine's record is retried by another soon.
const LEASE_MS: i64 = 30_000;
/// Sends in flight at once, so a slow relay cannot pile up connections.
const MAX_CONCURRENT_SENDS: usize = 4;

/// The delay before the next attempt after `attempts` failed ones (1 s, 2 s, 4 s … 60 s), or
/// `None` when the record has had its last attempt.
pub(crate) fn retry_delay_ms(attempts: u32) -> Option<i64> {
    if attempts >= MAX_ATTEMPTS {
        return None;
    }
    let doublings = attempts.saturating_sub(1).min(16);
    Some((RETRY_BASE_MS << doublings).min(RETRY_CAP_MS))
}

/// The SMTP side: the relay and who the mail is from.
pub(crate) struct Postman {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    from: Mailbox,
}

/// Why SMTP_URL or EMAIL_FROM cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum MailerConfigError {
    #[error("SMTP_URL: {0}")]
    SmtpUrl(String),
    #[error("EMAIL_FROM: {0}")]
    From(String),
}

impl Postman {
    pub(crate) fn new(smtp_url: &str, from: &str) -> Result<Postman, MailerConfigError> {
        // The error text of a URL parse could quote the URL, password included: name the
        // problem, never the value.
        let transport = AsyncSmtpTransport::<Tokio1Executor>::from_url(smtp_url)
            .map_err(|_| {
                MailerConfigError::SmtpUrl(
                    "not usable as an SMTP relay (smtp://host:port, smtp://host?tls=required, smtps://host)"
                        .to_owned(),
                )
            })?
            .timeout(Some(SMTP_TIMEOUT))
            .build();
        let from = from
            .parse::<Mailbox>()
            .map_err(|error| MailerConfigError::From(error.to_string()))?;
        Ok(Postman { transport, from })
    }

    async fn send(&self, message: Message) -> Result<(), String> {
        self.transport
            .send(message)
            .await
            .map(|_| ())
            .map_err(|error| {
                // lettre's errors name the server's reply, not the envelope.
                error.to_string()
            })
    }
}

/// Runs until the stop flag is set; sends in flight are abandoned then (their lease lapses and
/// a later run retries them).
pub(crate) async fn run_mailer(notifier: Arc<Notifier>, mut stop: watch::Receiver<bool>) {
    tracing::debug!("turn notification mailer started");
    let sends = Arc::new(Semaphore::new(MAX_CONCURRENT_SENDS));
    let mut in_flight = JoinSet::new();
    loop {
        tokio::select! {
            () = tokio::time::sleep(SCAN_PERIOD) => {}
            () = stopped(&mut stop) => break,
        }
        while in_flight.try_join_next().is_some() {}
        match notifier.book.list(None).await {
            Ok(records) => {
                for record in records {
                    notifier.follow(record, &sends, &mut in_flight).await;
                }
            }
            Err(error) => tracing::warn!(error = %error, "turn notification scan failed"),
        }
    }
    in_flight.abort_all();
    tracing::debug!("turn notification mailer stopped");
}

impl Notifier {
    /// One record's step of the scan.
    pub(super) async fn follow(
        self: &Arc<Self>,
        record: Record,
        sends: &Arc<Semaphore>,
        in_flight: &mut JoinSet<()>,
    ) {
        let key = &record.key;
        let answer = match self
            .store
            .status(key.room_id.clone(), key.claim(), String::new())
            .await
        {
            Ok(answer) => answer,
            // The store cannot say now (rebuilding, unreachable): ask again next scan.
            Err(_) => return,
        };
        let now = now_ms();
        let outcome = match answer {
            PlaceAnswer::Place(place) => {
                self.follow_place(&record, place, now, sends, in_flight)
                    .await
            }
            PlaceAnswer::Lapsed(LapseReason::Ejected | LapseReason::Purged) => {
                // The operator discarded the place: the record goes with it.
                self.book.delete(key).await.map(|_| ())
            }
            PlaceAnswer::Lapsed(_) => match record.lapsed_since_ms {
                None => self.book.set_lapsed(key, Some(now)).await,
                Some(since) if now - since > self.lapsed_retention_ms => {
                    // No token that could carry it over is valid any more.
                    self.book.delete(key).await.map(|_| ())
                }
                Some(_) => Ok(()),
            },
        };
        if let Err(error) = outcome {
            tracing::warn!(room_id = %key.room_id, error = %error, "turn notification step failed");
        }
    }

    async fn follow_place(
        self: &Arc<Self>,
        record: &Record,
        place: PlaceStatus,
        now: i64,
        sends: &Arc<Semaphore>,
        in_flight: &mut JoinSet<()>,
    ) -> Result<(), super::record::BookError> {
        let key = &record.key;
        if record.lapsed_since_ms.is_some() {
            self.book.set_lapsed(key, None).await?;
        }
        if key.kind == PlaceKind::Handle && place.ticket > 0 {
            // The draw gave this handle its ticket: the record follows it.
            if let Some(ticket_key) = PlaceKey::ticket(&key.room_id, place.generation, place.ticket)
            {
                self.book.carry(key, &ticket_key).await?;
                tracing::debug!(room_id = %key.room_id, ticket = place.ticket, "turn notification follows its drawn ticket");
            }
            return Ok(());
        }
        let due = place.passed
            && record.delivery == Delivery::Pending
            && record.next_attempt_at_ms <= now
            && record.lease_until_ms <= now;
        if !due {
            return Ok(());
        }
        let Ok(permit) = sends.clone().try_acquire_owned() else {
            // Every sender is busy: the next scan picks it up.
            return Ok(());
        };
        let notifier = self.clone();
        let key = key.clone();
        in_flight.spawn(async move {
            notifier.deliver(key, place).await;
            drop(permit);
        });
        Ok(())
    }

    /// Leases the record, sends its e-mail, and settles it.
    async fn deliver(&self, key: PlaceKey, place: PlaceStatus) {
        let now = now_ms();
        let lease_until = now + LEASE_MS;
        let record = match self.book.lease(&key, now, lease_until).await {
            Ok(Some(record)) => record,
            // Another engine has it, or it changed since the scan.
            Ok(None) => return,
            Err(error) => {
                tracing::warn!(room_id = %key.room_id, error = %error, "turn notification lease failed");
                return;
            }
        };
        let settlement = match self.send_turn_mail(&record, &place).await {
            Ok(()) => {
                tracing::info!(room_id = %key.room_id, ticket = key.number, attempt = record.attempts, "turn notification sent");
                Settlement::Sent
            }
            Err(SendFailure::Permanent(reason)) => {
                tracing::warn!(room_id = %key.room_id, ticket = key.number, reason = %reason, "turn notification cannot be sent");
                Settlement::Failed
            }
            Err(SendFailure::Transient(reason)) => match retry_delay_ms(record.attempts) {
                Some(delay_ms) => {
                    tracing::warn!(room_id = %key.room_id, ticket = key.number, attempt = record.attempts, retry_in_ms = delay_ms, reason = %reason, "turn notification send failed; retrying");
                    Settlement::RetryAt(now_ms() + delay_ms)
                }
                None => {
                    tracing::warn!(room_id = %key.room_id, ticket = key.number, attempt = record.attempts, reason = %reason, "turn notification send failed; giving up");
                    Settlement::Failed
                }
            },
        };
        if let Err(error) = self.book.settle(&key, lease_until, settlement).await {
            tracing::warn!(room_id = %key.room_id, error = %error, "turn notification settle failed");
        }
    }

    async fn send_turn_mail(
        &self,
        record: &Record,
        place: &PlaceStatus,
    ) -> Result<(), SendFailure> {
        let address = self
            .cipher
            .open(&record.sealed_email)
            .map_err(|error| SendFailure::Permanent(error.to_string()))?;
        let room_name = match self.store.room_info(record.key.room_id.clone()).await {
            Ok(info) if info.found && !info.name.is_empty() => info.name,
            _ => record.key.room_id.clone(),
        };
        let minutes_left = ((place.pass_expires_at_ms - now_ms()).max(0) + 59_999) / 60_000;
        let message = Message::builder()
            .from(self.postman.from.clone())
            .to(Mailbox::new(None, address.into_address()))
            .subject(turn_subject(&room_name))
            .header(ContentType::TEXT_PLAIN)
            .body(turn_body(&room_name, minutes_left.max(1)))
            .map_err(|error| SendFailure::Permanent(error.to_string()))?;
        self.postman
            .send(message)
            .await
            .map_err(SendFailure::Transient)
    }
}

/// Why a send did not happen.
enum SendFailure {
    /// Retrying cannot help (the address cannot be opened or built into a message).
    Permanent(String),
    /// The relay refused or could not be reached: retry with backoff.
    Transient(String),
}

pub(crate) fn turn_subject(room_name: &str) -> String {
    format!("It's your turn: {room_name}")
}

/// The plain-text body: what to do, and by when. No links, so nothing to track.
pub(crate) fn turn_body(room_name: &str, minutes_left: i64) -> String {
    let minutes = if minutes_left == 1 {
        "1 minute".to_owned()
    } else {
        format!("{minutes_left} minutes")
    };
    format!(
        "It's your turn in the queue for {room_name}.\n\
         \n\
         Go back to the waiting page in the browser you queued in:\n\
         it will take you through. Your turn is held for about {minutes};\n\
         after that the place is released.\n\
         \n\
         You get this message because you asked to be told when your turn\n\
         came. It is the only message that request sends.\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_back_off_exponentially_up_to_a_cap_then_stop() {
        assert_eq!(retry_delay_ms(1), Some(1_000));
        assert_eq!(retry_delay_ms(2), Some(2_000));
        assert_eq!(retry_delay_ms(3), Some(4_000));
        assert_eq!(retry_delay_ms(5), Some(16_000));
        assert_eq!(retry_delay_ms(MAX_ATTEMPTS), None);
        assert_eq!(retry_delay_ms(u32::MAX), None);
        assert!((1..MAX_ATTEMPTS).all(|n| retry_delay_ms(n).unwrap() <= RETRY_CAP_MS));
    }

    #[test]
    fn the_mail_names_the_room_and_the_time_left() {
        assert_eq!(turn_subject("Launch"), "It's your turn: Launch");
        let body = turn_body("Launch", 10);
        assert!(body.contains("queue for Launch"), "{body}");
        assert!(body.contains("about 10 minutes"), "{body}");
        assert!(body.contains("browser you queued in"), "{body}");
        assert!(!body.contains("http"), "no links: {body}");
        assert!(turn_body("Launch", 1).contains("about 1 minute;"));
    }

    #[test]
    fn smtp_urls_and_senders_are_checked() {
        assert!(Postman::new("smtp://127.0.0.1:2525", "Queue <q@localhost>").is_ok());
        assert!(Postman::new("smtps://user:pw@mail.example", "q@example.com").is_ok());
        let error = Postman::new("smtp://user:secretpw@", "q@example.com")
            .err()
            .expect("no host");
        assert!(!error.to_string().contains("secretpw"));
        assert!(matches!(
            Postman::new("smtp://127.0.0.1:25", "not an address"),
            Err(MailerConfigError::From(_))
        ));
    }
}
