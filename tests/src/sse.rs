//! A minimal Server-Sent Events reader over a streaming HTTP response, for tests that watch a
//! visitor's stream frame by frame.

use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;

use crate::Reply;

/// One `event:` / `data:` frame.
#[derive(Debug, Clone)]
pub struct Frame {
    pub event: String,
    pub data: Value,
}

/// An open event stream.
pub struct SseStream {
    pub headers: reqwest::header::HeaderMap,
    body: futures::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    buffer: String,
}

impl SseStream {
    /// Sends the request; a non-200 answer comes back as the error.
    pub async fn open(request: reqwest::RequestBuilder) -> Result<SseStream, Reply> {
        let response = request
            .timeout(Duration::from_secs(3600))
            .send()
            .await
            .expect("request reaches the server");
        if response.status() != 200 {
            return Err(Reply::read(response).await);
        }
        let headers = response.headers().clone();
        Ok(SseStream {
            headers,
            body: response.bytes_stream().boxed(),
            buffer: String::new(),
        })
    }

    /// The next frame within `wait`; `None` when the stream ended or nothing came in time.
    pub async fn next_frame(&mut self, wait: Duration) -> Option<Frame> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            if let Some(frame) = self.take_frame() {
                return Some(frame);
            }
            let chunk = tokio::time::timeout_at(deadline, self.body.next())
                .await
                .ok()??;
            let chunk = chunk.ok()?;
            self.buffer
                .push_str(&String::from_utf8_lossy(&chunk).replace("\r\n", "\n"));
        }
    }

    /// Whether the server ended the stream within `wait`.
    pub async fn ends_within(&mut self, wait: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            match tokio::time::timeout_at(deadline, self.body.next()).await {
                Err(_) => return false,
                Ok(None) | Ok(Some(Err(_))) => return true,
                Ok(Some(Ok(_))) => continue,
            }
        }
    }

    /// Reads frames until one satisfies `accept`, within `wait` in all.
    pub async fn frame_where(
        &mut self,
        wait: Duration,
        accept: impl Fn(&Frame) -> bool,
    ) -> Option<Frame> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let frame = self.next_frame(left).await?;
            if accept(&frame) {
                return Some(frame);
            }
        }
    }

    fn take_frame(&mut self) -> Option<Frame> {
        let end = self.buffer.find("\n\n")?;
        let raw: String = self.buffer.drain(..end + 2).collect();
        let mut event = String::from("message");
        let mut data = String::new();
        for line in raw.lines() {
            if let Some(value) = line.strip_prefix("event:") {
                event = value.trim().to_owned();
            } else if let Some(value) = line.strip_prefix("data:") {
                if !data.is_empty() {
                    data.push('\n');
                }
                data.push_str(value.strip_prefix(' ').unwrap_or(value));
            }
        }
        if data.is_empty() && event == "message" {
            // A comment or keep-alive: not a frame.
            return self.take_frame();
        }
        Some(Frame {
            event,
            data: serde_json::from_str(&data).unwrap_or(Value::String(data)),
        })
    }
}
