//! Turn notifications (EMAIL_NOTIFY): a visitor leaves an e-mail address against their place
//! and is mailed when it passes.
//!
//! The record is filed against the place, not the visitor, so it follows the place wherever
//! the server replaces it: a pre-queue handle's record follows its drawn ticket, and a rejoin
//! presenting a claim the engine will not honour (an expired pass, a re-created room) carries
//! it to the new place — only for the browser that registered it. An eject or a purge deletes
//! it: the operator discarded that place.
//!
//! - [`address`]: checking, masking and sealing the address (it is never stored or logged).
//! - [`book`]: the records, in memory or in Postgres ([`pg`]).
//! - [`mailer`]: the background task that sends, retries and tidies.
//!
//! The hooks ([`Notifier::annotate_join`], [`Notifier::after_eject`],
//! [`Notifier::after_purge`]) run in the gRPC service around the store's own operations, so no
//! store implementation knows about notifications.

mod address;
mod book;
mod mailer;
mod pg;
mod record;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use qm_core::clock::now_ms;
use qm_core::config::Config;
use qm_core::{ApiError, ErrorCode};
use qm_proto::engine::{place_reply, place_status};
use qm_proto::{NotifyStatement, PlaceReply};
use secrecy::ExposeSecret;
use sqlx::PgPool;

pub use mailer::MailerConfigError;
pub(crate) use mailer::run_mailer;

use self::address::{AddressCipher, EmailAddress};
use self::book::{Book, MemoryBook};
use self::mailer::Postman;
use self::pg::PgBook;
use self::record::{PlaceKey, PlaceKind, Record};
use crate::domain::{Claim, ClaimedPlace, JoinRequest, LapseReason, PlaceAnswer};
use crate::store::Store;

/// The engine's turn-notification service; present only when EMAIL_NOTIFY is on.
pub struct Notifier {
    book: Book,
    cipher: AddressCipher,
    store: Arc<dyn Store>,
    postman: Postman,
    /// How long a record of an expired or reset place waits for the rejoin that carries it:
    /// TOKEN_MAX_AGE_SEC, past which no token naming that place verifies.
    lapsed_retention_ms: i64,
}

impl Notifier {
    /// The notifier of `config`, keeping its records in Postgres when `pg_pool` is given (the
    /// durable store's pool; the table comes with its migrations), else in memory.
    pub fn new(
        config: &Config,
        store: Arc<dyn Store>,
        pg_pool: Option<PgPool>,
    ) -> Result<Notifier, MailerConfigError> {
        let smtp_url = config
            .smtp_url()
            .ok_or_else(|| MailerConfigError::SmtpUrl("required with EMAIL_NOTIFY=1".to_owned()))?;
        let postman = Postman::new(smtp_url.expose_secret(), &config.email_from)?;
        let book = match pg_pool {
            Some(pool) => Book::Pg(PgBook::new(pool)),
            None => Book::Memory(MemoryBook::default()),
        };
        Ok(Notifier {
            book,
            cipher: AddressCipher::from_keyring(&config.keyring()),
            store,
            postman,
            lapsed_retention_ms: (config.token_max_age_sec as i64).saturating_mul(1000),
        })
    }

    /// What is held against `key`, as the wire states it.
    async fn statement(&self, key: &PlaceKey) -> Result<Option<NotifyStatement>, ApiError> {
        Ok(self.book.get(key).await?.as_ref().map(statement_of))
    }

    /// POST /api/notify: files `email` against the claimed place (empty: withdraws it). The
    /// claim must be a live place of the room's current generation, bound to `session_hash`.
    pub(crate) async fn register(
        &self,
        room_id: &str,
        claim: Claim,
        session_hash: &str,
        email: &str,
    ) -> Result<Option<NotifyStatement>, ApiError> {
        let address = match email.trim() {
            "" => None,
            text => Some(EmailAddress::parse(text)?),
        };
        let info = self.store.room_info(room_id.to_owned()).await?;
        if !info.found {
            return Err(ApiError::new(
                ErrorCode::RoomNotFound,
                format!("no room {room_id:?}"),
            ));
        }
        if claim.generation != info.generation {
            return Err(ApiError::new(
                ErrorCode::StaleTicket,
                "this ticket belongs to an earlier instance of the room; join again for a place in the current line",
            ));
        }
        let place = match self
            .store
            .status(room_id.to_owned(), claim, session_hash.to_owned())
            .await?
        {
            PlaceAnswer::Place(place) => place,
            PlaceAnswer::Lapsed(reason) => {
                return Err(ApiError::new(
                    ErrorCode::PlaceLapsed,
                    format!(
                        "this place is no longer in line ({}); join again first",
                        reason.as_str()
                    ),
                ));
            }
        };
        if session_hash.is_empty() || !place.bound {
            return Err(ApiError::new(
                ErrorCode::InvalidToken,
                "this place belongs to the browser that queued for it; its ownership cookie was not sent",
            ));
        }
        let key = match claim.place {
            // A drawn handle is its ticket now.
            ClaimedPlace::Handle(_) if place.ticket > 0 => {
                PlaceKey::ticket(room_id, claim.generation, place.ticket)
            }
            _ => PlaceKey::of_claim(room_id, &claim),
        };
        let Some(key) = key else {
            return Err(ApiError::new(
                ErrorCode::PlaceLapsed,
                "a bypass pass holds no place in line, so there is no turn to be told about",
            ));
        };
        let Some(address) = address else {
            self.book.delete(&key).await?;
            if let Some(handle_key) = PlaceKey::of_claim(room_id, &claim)
                && handle_key != key
            {
                self.book.delete(&handle_key).await?;
            }
            tracing::debug!(
                room_id,
                kind = key.kind.as_str(),
                number = key.number,
                "turn notification withdrawn"
            );
            return Ok(None);
        };
        let record = Record::new(
            key.clone(),
            self.cipher.seal(&address),
            address.masked(),
            session_hash.to_owned(),
            now_ms(),
        );
        let statement = statement_of(&record);
        self.book.put(record).await?;
        tracing::debug!(
            room_id,
            kind = key.kind.as_str(),
            number = key.number,
            "turn notification registered"
        );
        Ok(Some(statement))
    }

    /// After a join: carries or deletes the record of the claim it replaced, then states what
    /// is held against the place the reply names. A failure here never fails the join (its
    /// place is already taken): the reply then makes no statement at all.
    pub(crate) async fn annotate_join(
        &self,
        room_id: &str,
        request: &JoinRequest,
        reply: &mut PlaceReply,
    ) {
        let Some(place_reply::Outcome::Place(place)) = &reply.outcome else {
            return;
        };
        let named = match place.place {
            Some(place_status::Place::Ticket(ticket)) => {
                PlaceKey::ticket(room_id, place.generation, ticket)
            }
            Some(place_status::Place::Handle(handle)) => Some(PlaceKey {
                room_id: room_id.to_owned(),
                generation: place.generation,
                kind: PlaceKind::Handle,
                number: handle,
            }),
            None => None,
        };
        let replaced = request
            .claim
            .as_ref()
            .and_then(|claim| PlaceKey::of_claim(room_id, claim));
        let outcome = async {
            if let Some(dead) = &replaced {
                self.follow_replacement(
                    dead,
                    &place.replaced_reason,
                    named.as_ref(),
                    &request.session_hash,
                )
                .await?;
            }
            match &named {
                Some(key) => self.statement(key).await,
                None => Ok(None),
            }
        }
        .await;
        match outcome {
            Ok(statement) => {
                reply.notify = statement;
                reply.notify_enabled = true;
            }
            Err(error) => {
                tracing::warn!(room_id, code = %error.code, "join made no turn notification statement");
            }
        }
    }

    /// What a join's replacement of `dead` does to its record.
    async fn follow_replacement(
        &self,
        dead: &PlaceKey,
        replaced_reason: &str,
        named: Option<&PlaceKey>,
        session_hash: &str,
    ) -> Result<(), ApiError> {
        let carries = match replaced_reason {
            // A claim the engine would not honour through no act of the operator.
            "expired" | "room_reset" => true,
            // Kept claim, or a handle exchanged for its drawn ticket.
            "" => dead.kind == PlaceKind::Handle,
            reason
                if reason == LapseReason::Ejected.as_str()
                    || reason == LapseReason::Purged.as_str() =>
            {
                self.book.delete(dead).await?;
                return Ok(());
            }
            // "unbound": somebody else's place; nobody's record moves.
            _ => false,
        };
        let Some(named) = named else {
            return Ok(());
        };
        if !carries || named == dead || session_hash.is_empty() {
            return Ok(());
        }
        match self.book.get(dead).await? {
            // Only the browser that registered the address takes it along.
            Some(record) if record.owner_hash == session_hash => {
                if self.book.carry(dead, named).await? {
                    tracing::debug!(room_id = %named.room_id, number = named.number, reason = replaced_reason, "turn notification carried to the new place");
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// After an eject: the ticket's record is deleted (the operator discarded that place).
    pub(crate) async fn after_eject(&self, room_id: &str, ticket: u64) {
        let outcome = async {
            let info = self.store.room_info(room_id.to_owned()).await?;
            if let Some(key) = PlaceKey::ticket(room_id, info.generation, ticket) {
                self.book.delete(&key).await?;
            }
            Ok::<_, ApiError>(())
        }
        .await;
        if let Err(error) = outcome {
            // The mailer deletes it on its next scan, when it reads the place as ejected.
            tracing::warn!(room_id, code = %error.code, "turn notification of an ejected ticket not yet deleted");
        }
    }

    /// After a purge: every record of the room whose place now reads purged is deleted.
    pub(crate) async fn after_purge(&self, room_id: &str) {
        let outcome = async {
            for record in self.book.list(Some(room_id)).await? {
                let answer = self
                    .store
                    .status(room_id.to_owned(), record.key.claim(), String::new())
                    .await?;
                if answer == PlaceAnswer::Lapsed(LapseReason::Purged) {
                    self.book.delete(&record.key).await?;
                }
            }
            Ok::<_, ApiError>(())
        }
        .await;
        if let Err(error) = outcome {
            tracing::warn!(room_id, code = %error.code, "turn notifications of a purge not yet deleted");
        }
    }
}

fn statement_of(record: &Record) -> NotifyStatement {
    NotifyStatement {
        email_masked: record.masked_email.clone(),
        requested_at_ms: record.requested_at_ms,
        delivery: record.delivery.as_str().to_owned(),
    }
}
