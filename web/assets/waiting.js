// The plain waiting page: join the room's line, follow the place live over the event stream (or
// by polling while the stream is down), and go through when the visitor's turn comes.
(function () {
  "use strict";

  var POLL_INTERVAL_MS = 5000;
  var STREAM_RETRY_MS = 10000;
  var REJOIN_GUARD_MS = 10000;

  var config = readConfig();
  window.QM_CONFIG = config;

  var elements = {
    lead: document.getElementById("qm-lead"),
    figures: document.getElementById("qm-figures"),
    position: document.getElementById("qm-position"),
    ahead: document.getElementById("qm-ahead"),
    eta: document.getElementById("qm-eta"),
    progress: document.getElementById("qm-progress"),
    notice: document.getElementById("qm-notice"),
    message: document.getElementById("qm-message"),
    messageText: document.getElementById("qm-message-text"),
    messageTime: document.getElementById("qm-message-time")
  };

  var roomId = typeof config.roomId === "string" ? config.roomId : "";
  var storageKey = "qm:" + roomId;
  var token = null;
  var stream = null;
  var pollTimer = null;
  var streamRetryTimer = null;
  var lastRejoinAt = 0;
  var firstPosition = null;
  var redirecting = false;
  // Server clock minus device clock, from the last frame that carried `now`.
  var clockOffsetMs = 0;

  function readConfig() {
    var element = document.getElementById("qm-config");
    if (!element) {
      return {};
    }
    try {
      var parsed = JSON.parse(element.textContent || "{}");
      return parsed && typeof parsed === "object" ? parsed : {};
    } catch (error) {
      return {};
    }
  }

  function setText(element, text) {
    // Only touch the DOM on a real change, so the live region does not repeat itself.
    if (element && element.textContent !== text) {
      element.textContent = text;
    }
  }

  function showNotice(text) {
    if (text) {
      setText(elements.notice, text);
      elements.notice.hidden = false;
    } else {
      elements.notice.hidden = true;
    }
  }

  function storeToken(value) {
    token = value;
    try {
      if (value) {
        window.localStorage.setItem(storageKey, value);
      } else {
        window.localStorage.removeItem(storageKey);
      }
    } catch (error) {
      // Private browsing can refuse storage; the queue cookie still carries the place.
    }
  }

  function storedToken() {
    try {
      return window.localStorage.getItem(storageKey);
    } catch (error) {
      return null;
    }
  }

  function formatWait(seconds) {
    if (seconds === null || seconds === undefined) {
      return "Not known yet";
    }
    if (seconds < 60) {
      return "Under a minute";
    }
    var minutes = Math.round(seconds / 60);
    if (minutes < 60) {
      return "About " + minutes + (minutes === 1 ? " minute" : " minutes");
    }
    var hours = Math.floor(minutes / 60);
    var rest = minutes % 60;
    return "About " + hours + " h" + (rest ? " " + rest + " min" : "");
  }

  function deviceTime(serverInstantMs) {
    // Server instants are shown in the device's frame, the clock the visitor compares against.
    var local = new Date(serverInstantMs - clockOffsetMs);
    return local.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
  }

  function safeRedirectTarget(status) {
    var candidates = [config.returnUrl, status.redirectUrl];
    for (var index = 0; index < candidates.length; index += 1) {
      var candidate = candidates[index];
      if (typeof candidate === "string" && /^https?:\/\//i.test(candidate)) {
        return candidate;
      }
    }
    return null;
  }

  function renderMessage(status) {
    if (typeof status.message === "string" && status.message) {
      setText(elements.messageText, status.message);
      setText(elements.messageTime, typeof status.messageAt === "number" ? "Posted at " + deviceTime(status.messageAt) : "");
      elements.message.hidden = false;
    } else {
      elements.message.hidden = true;
    }
  }

  function renderFigures(status) {
    var hasPosition = typeof status.position === "number";
    elements.figures.hidden = !hasPosition;
    if (!hasPosition) {
      elements.progress.hidden = true;
      return;
    }
    setText(elements.position, String(status.position));
    setText(elements.ahead, String(typeof status.ahead === "number" ? status.ahead : status.position - 1));
    setText(elements.eta, formatWait(status.etaSec));
    if (firstPosition === null || status.position > firstPosition) {
      firstPosition = status.position;
    }
    var done = firstPosition > 0 ? (firstPosition - status.position) / firstPosition : 0;
    elements.progress.value = Math.max(2, Math.round(done * 100));
    elements.progress.hidden = false;
  }

  function render(status) {
    if (typeof status.now === "number") {
      clockOffsetMs = status.now - Date.now();
    }
    renderMessage(status);
    if (status.expired) {
      renderLapsed(status.reason);
      return;
    }
    if (status.passed) {
      renderPassed(status);
      return;
    }
    renderFigures(status);
    if (status.state === "scheduled" && typeof status.opensAt === "number") {
      setText(elements.lead, "The doors open at " + deviceTime(status.opensAt) + ". You are in the pre-queue; places are drawn at random when the doors open, so there is no need to hurry.");
    } else if (status.state === "paused") {
      setText(elements.lead, "The line is paused for the moment. You keep your place.");
    } else {
      setText(elements.lead, "You are in line. When it is your turn, this page takes you through automatically.");
    }
  }

  function renderPassed(status) {
    elements.figures.hidden = true;
    elements.progress.hidden = true;
    setText(elements.lead, "It is your turn! Taking you through…");
    showNotice("");
    var target = safeRedirectTarget(status);
    if (target && !redirecting) {
      redirecting = true;
      closeStream();
      stopPolling();
      window.location.assign(target);
    }
  }

  function lapsedSentence(reason) {
    switch (reason) {
      case "expired":
        return "Your turn came, but the time to enter ran out.";
      case "ejected":
      case "purged":
        return "Your earlier place in line was removed by the organiser.";
      case "room_reset":
        return "The waiting room was reset, so your earlier place no longer exists.";
      default:
        return "Your earlier place in line is no longer valid.";
    }
  }

  function renderLapsed(reason) {
    elements.figures.hidden = true;
    elements.progress.hidden = true;
    closeStream();
    stopPolling();
    storeToken(null);
    firstPosition = null;
    var now = Date.now();
    if (now - lastRejoinAt < REJOIN_GUARD_MS) {
      // The new place lapsed at once: wait a little rather than loop.
      setText(elements.lead, lapsedSentence(reason) + " Trying again shortly…");
      window.setTimeout(function () { join(null); }, REJOIN_GUARD_MS);
      return;
    }
    setText(elements.lead, lapsedSentence(reason) + " Getting you a new place in line…");
    lastRejoinAt = now;
    join(null);
  }

  function retryAfterMs(response, fallbackMs) {
    var header = response && response.headers ? response.headers.get("Retry-After") : null;
    var seconds = header ? parseInt(header, 10) : NaN;
    return isNaN(seconds) ? fallbackMs : Math.max(1, seconds) * 1000;
  }

  function readJson(response) {
    return response.json().catch(function () { return {}; });
  }

  function join(presentedToken) {
    var body = { roomId: roomId };
    if (presentedToken) {
      body.token = presentedToken;
    }
    fetch("/api/join", {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "Accept": "application/json" },
      body: JSON.stringify(body)
    }).then(function (response) {
      return readJson(response).then(function (answer) {
        if (response.ok && typeof answer.token === "string") {
          showNotice("");
          storeToken(answer.token);
          render(answer);
          if (!answer.passed) {
            openStream();
          }
          return;
        }
        if (answer.code === "room_not_found") {
          renderNotFound();
          return;
        }
        if (answer.code === "invalid_token_field") {
          storeToken(null);
        }
        var wait = retryAfterMs(response, 5000);
        showNotice((answer.error || "We could not get you a place in line just now.") + " Retrying in " + Math.round(wait / 1000) + " s.");
        window.setTimeout(function () { join(token); }, wait);
      });
    }).catch(function () {
      showNotice("You seem to be offline. Retrying…");
      window.setTimeout(function () { join(presentedToken); }, 5000);
    });
  }

  function renderNotFound() {
    closeStream();
    stopPolling();
    elements.figures.hidden = true;
    elements.progress.hidden = true;
    setText(elements.lead, "This waiting room does not exist, or it has been closed.");
  }

  function handleFrame(event) {
    var status;
    try {
      status = JSON.parse(event.data);
    } catch (error) {
      return;
    }
    if (status && typeof status === "object") {
      render(status);
    }
  }

  function openStream() {
    closeStream();
    if (!token || typeof window.EventSource !== "function") {
      startPolling();
      return;
    }
    var source = new window.EventSource("/events?token=" + encodeURIComponent(token));
    stream = source;
    source.addEventListener("status", function (event) {
      // A frame from a stream this page already replaced says nothing about the current place.
      if (source === stream) {
        handleFrame(event);
      }
    });
    stream.onopen = function () {
      showNotice("");
      stopPolling();
    };
    stream.onerror = function () {
      showNotice("Reconnecting…");
      startPolling();
      if (stream && stream.readyState === window.EventSource.CLOSED) {
        // The server refused the stream (a limit, a restart): poll, and try the stream again later.
        closeStream();
        scheduleStreamRetry();
      }
    };
  }

  function closeStream() {
    if (stream) {
      stream.onerror = null;
      stream.onopen = null;
      stream.close();
      stream = null;
    }
  }

  function scheduleStreamRetry() {
    if (streamRetryTimer === null) {
      streamRetryTimer = window.setTimeout(function () {
        streamRetryTimer = null;
        if (!redirecting) {
          openStream();
        }
      }, STREAM_RETRY_MS);
    }
  }

  function startPolling() {
    if (pollTimer === null) {
      pollTimer = window.setInterval(poll, POLL_INTERVAL_MS);
    }
  }

  function stopPolling() {
    if (pollTimer !== null) {
      window.clearInterval(pollTimer);
      pollTimer = null;
    }
  }

  function poll() {
    if (!token) {
      return;
    }
    var url = "/api/status?roomId=" + encodeURIComponent(roomId) + "&token=" + encodeURIComponent(token);
    fetch(url, { credentials: "same-origin", headers: { "Accept": "application/json" } })
      .then(function (response) {
        return readJson(response).then(function (answer) {
          if (response.ok) {
            render(answer);
          } else if (answer.code === "invalid_token") {
            stopPolling();
            closeStream();
            storeToken(null);
            join(null);
          }
        });
      })
      .catch(function () {
        showNotice("Reconnecting…");
      });
  }

  if (!roomId) {
    setText(elements.lead, "This page does not name a waiting room.");
    return;
  }
  if (config.found === false) {
    renderNotFound();
    return;
  }
  join(storedToken());
})();
