//! An SMTP sink for the tests: a small server on `127.0.0.1:0` that speaks enough SMTP for a
//! real client (EHLO/HELO, MAIL, RCPT, DATA, RSET, NOOP, QUIT), keeps every message it accepts,
//! and can be told to refuse the next K messages with `451` to exercise a sender's retries.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// One message the sink accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceivedMail {
    /// The envelope: MAIL FROM and RCPT TO addresses, without the angle brackets.
    pub mail_from: String,
    pub rcpt_to: Vec<String>,
    /// The DATA section, dot-unstuffed, lines joined with `\r\n`.
    pub data: String,
}

impl ReceivedMail {
    /// The value of the first header `name` (case-insensitive), unfolded.
    pub fn header(&self, name: &str) -> Option<String> {
        let head = self.data.split("\r\n\r\n").next().unwrap_or_default();
        let mut value: Option<String> = None;
        for line in head.split("\r\n") {
            if let Some(current) = value.as_mut() {
                // Unfolding drops the line break and keeps the whitespace (RFC 5322 2.2.3).
                if line.starts_with([' ', '\t']) {
                    current.push_str(line);
                    continue;
                }
                break;
            }
            if let Some((key, rest)) = line.split_once(':')
                && key.eq_ignore_ascii_case(name)
            {
                value = Some(rest.trim().to_owned());
            }
        }
        value
    }

    /// The body after the header block.
    pub fn body(&self) -> String {
        self.data
            .split_once("\r\n\r\n")
            .map(|(_, body)| body.to_owned())
            .unwrap_or_default()
    }
}

#[derive(Default)]
struct SinkState {
    received: Vec<ReceivedMail>,
    /// Messages still to refuse at the end of DATA.
    refuse_next: usize,
    /// Messages refused so far.
    refused: usize,
}

/// A running sink; it stops when dropped.
pub struct SmtpSink {
    port: u16,
    state: Arc<Mutex<SinkState>>,
    arrived: Arc<Notify>,
    task: JoinHandle<()>,
}

fn lock(state: &Mutex<SinkState>) -> MutexGuard<'_, SinkState> {
    state
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl SmtpSink {
    pub async fn start() -> SmtpSink {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the smtp sink");
        let port = listener.local_addr().expect("sink address").port();
        let state = Arc::new(Mutex::new(SinkState::default()));
        let arrived = Arc::new(Notify::new());
        let task = tokio::spawn(accept(listener, state.clone(), arrived.clone()));
        SmtpSink {
            port,
            state,
            arrived,
            task,
        }
    }

    /// `smtp://127.0.0.1:<port>`: plain SMTP, for SMTP_URL.
    pub fn url(&self) -> String {
        format!("smtp://127.0.0.1:{}", self.port)
    }

    /// Refuse the next `count` messages with `451` at the end of DATA.
    pub fn refuse_next(&self, count: usize) {
        lock(&self.state).refuse_next = count;
    }

    pub fn refused(&self) -> usize {
        lock(&self.state).refused
    }

    pub fn received(&self) -> Vec<ReceivedMail> {
        lock(&self.state).received.clone()
    }

    /// Waits until at least `count` messages have arrived, or `timeout` passes; answers what
    /// arrived.
    pub async fn wait_for(&self, count: usize, timeout: Duration) -> Vec<ReceivedMail> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.arrived.notified();
            let received = self.received();
            if received.len() >= count {
                return received;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return self.received();
            }
        }
    }
}

impl Drop for SmtpSink {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn accept(listener: TcpListener, state: Arc<Mutex<SinkState>>, arrived: Arc<Notify>) {
    while let Ok((stream, _)) = listener.accept().await {
        tokio::spawn(converse(stream, state.clone(), arrived.clone()));
    }
}

/// One SMTP session. Errors just end it, as a dropped connection would.
async fn converse(stream: TcpStream, state: Arc<Mutex<SinkState>>, arrived: Arc<Notify>) {
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read).lines();
    let mut mail_from = String::new();
    let mut rcpt_to = Vec::new();
    if write
        .write_all(b"220 qm-test-sink ESMTP\r\n")
        .await
        .is_err()
    {
        return;
    }
    while let Ok(Some(line)) = lines.next_line().await {
        let verb = line
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .to_ascii_uppercase();
        let reply: &[u8] = match verb.as_str() {
            "EHLO" => b"250-qm-test-sink\r\n250-8BITMIME\r\n250 SMTPUTF8\r\n",
            "HELO" => b"250 qm-test-sink\r\n",
            "MAIL" => {
                mail_from = angle_address(&line);
                rcpt_to.clear();
                b"250 OK\r\n"
            }
            "RCPT" => {
                rcpt_to.push(angle_address(&line));
                b"250 OK\r\n"
            }
            "DATA" => {
                if write
                    .write_all(b"354 end data with <CR><LF>.<CR><LF>\r\n")
                    .await
                    .is_err()
                {
                    return;
                }
                let mut data = Vec::new();
                loop {
                    match lines.next_line().await {
                        Ok(Some(line)) if line == "." => break,
                        Ok(Some(line)) => {
                            // Dot-unstuffing (RFC 5321 4.5.2).
                            let line = line.strip_prefix('.').map_or(line.clone(), |rest| {
                                if line.starts_with("..") {
                                    rest.to_owned()
                                } else {
                                    line.clone()
                                }
                            });
                            data.push(line);
                        }
                        _ => return,
                    }
                }
                let mail = ReceivedMail {
                    mail_from: std::mem::take(&mut mail_from),
                    rcpt_to: std::mem::take(&mut rcpt_to),
                    data: data.join("\r\n"),
                };
                let refuse = {
                    let mut state = lock(&state);
                    if state.refuse_next > 0 {
                        state.refuse_next -= 1;
                        state.refused += 1;
                        true
                    } else {
                        state.received.push(mail);
                        false
                    }
                };
                if refuse {
                    b"451 4.3.0 try again later\r\n"
                } else {
                    arrived.notify_waiters();
                    b"250 OK queued\r\n"
                }
            }
            "RSET" => {
                mail_from.clear();
                rcpt_to.clear();
                b"250 OK\r\n"
            }
            "NOOP" => b"250 OK\r\n",
            "QUIT" => {
                let _ = write.write_all(b"221 bye\r\n").await;
                return;
            }
            _ => b"502 command not implemented\r\n",
        };
        if write.write_all(reply).await.is_err() {
            return;
        }
    }
}

/// The address between `<` and `>` of a MAIL or RCPT line.
fn angle_address(line: &str) -> String {
    match (line.find('<'), line.rfind('>')) {
        (Some(open), Some(close)) if open < close => line[open + 1..close].to_owned(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_unfold_and_the_body_follows_the_blank_line() {
        let mail = ReceivedMail {
            mail_from: "a@b".into(),
            rcpt_to: vec!["c@d".into()],
            data: "Subject: It's your\r\n turn\r\nTo: c@d\r\n\r\nHello\r\nthere".into(),
        };
        assert_eq!(mail.header("subject").as_deref(), Some("It's your turn"));
        assert_eq!(mail.header("TO").as_deref(), Some("c@d"));
        assert_eq!(mail.header("From"), None);
        assert_eq!(mail.body(), "Hello\r\nthere");
        assert_eq!(angle_address("MAIL FROM:<x@y> SIZE=1"), "x@y");
    }
}
