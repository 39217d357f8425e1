// The plain waiting page: join the room's line, follow the place live over the event stream (or
// by polling while the stream is down), and go through when the visitor's turn comes.
(function () {
  "use strict";

  var POLL_INTERVAL_MS = 5000;
  var STREAM_RETRY_MS = 10000;
  var REJOIN_GUARD_MS = 10000;

  // The sentences this page has in every locale it speaks. The page's language is the one the
  // server chose from Accept-Language (<html lang>), which the browser derives from its own
  // language list; navigator.language is the fallback when the attribute names none we speak.
  var SENTENCES = {
    en: {
      lapsedExpired: "Your turn came, but the time to enter ran out.",
      lapsedReset: "Your earlier place in line was cancelled on our side, not because of anything you did.",
      lapsedRejoining: "Getting you a new place in line…",
      lapsedRejoined: "You have a new place at the back of the line.",
      messagePostedAt: "Posted at {time}"
    },
    th: {
      lapsedExpired: "ถึงคิวของคุณแล้ว แต่หมดเวลาเข้าใช้งาน",
      lapsedReset: "ที่ของคุณในคิวก่อนหน้านี้ถูกยกเลิกโดยทางเรา ไม่ได้เกิดจากสิ่งที่คุณทำ",
      lapsedRejoining: "กำลังจัดที่ใหม่ในคิวให้คุณ…",
      lapsedRejoined: "คุณได้รับที่ใหม่ต่อท้ายคิวแล้ว",
      messagePostedAt: "ประกาศเมื่อเวลา {time}"
    }
  };

  var config = readConfig();
  window.QM_CONFIG = config;
  var locale = pickLocale();

  var elements = {
    status: document.getElementById("qm-status"),
    lapsed: document.getElementById("qm-lapsed"),
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
  // The token of a place that lapsed, sent on the rejoin that replaces it: the server carries
  // what was filed against the old place (a turn notification) over to the new one.
  var deadToken = null;
  // What the visitor was told about a lapse, until the replacement place is theirs.
  var lapsedKind = null;
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

  function pickLocale() {
    var candidates = [document.documentElement.getAttribute("lang"), window.navigator && window.navigator.language];
    for (var index = 0; index < candidates.length; index += 1) {
      var primary = String(candidates[index] || "").toLowerCase().split("-")[0];
      if (Object.prototype.hasOwnProperty.call(SENTENCES, primary)) {
        return primary;
      }
    }
    return "en";
  }

  function t(key, values) {
    var text = SENTENCES[locale][key] || SENTENCES.en[key] || "";
    return text.replace(/\{(\w+)\}/g, function (whole, name) {
      return values && Object.prototype.hasOwnProperty.call(values, name) ? String(values[name]) : whole;
    });
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

  function cookieToken() {
    var name = "qm_" + roomId + "=";
    var parts = (document.cookie || "").split(";");
    for (var index = 0; index < parts.length; index += 1) {
      var part = parts[index].replace(/^\s+/, "");
      if (part.indexOf(name) === 0) {
        return part.slice(name.length) || null;
      }
    }
    return null;
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

  function renderMessage(message, messageAt) {
    // The pane stays in every state; only a frame that speaks for the room changes it.
    if (typeof message === "string" && message.replace(/^\s+|\s+$/g, "")) {
      setText(elements.messageText, message);
      setText(elements.messageTime, typeof messageAt === "number" ? t("messagePostedAt", { time: deviceTime(messageAt) }) : "");
      elements.message.hidden = false;
    } else {
      elements.message.hidden = true;
    }
  }

  function lapsedKindOf(reason) {
    // The engine's word for the refusal: the visitor's own window ran out, or we discarded it.
    return reason === "expired" ? "expired" : "reset";
  }

  function showLapsed(kind, follow) {
    lapsedKind = kind;
    setText(elements.lapsed, t(kind === "expired" ? "lapsedExpired" : "lapsedReset") + " " + t(follow));
    elements.lapsed.hidden = false;
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
    if (status.expired) {
      renderLapsed(status.reason);
      return;
    }
    if (status.passed) {
      renderPassed(status);
      return;
    }
    renderMessage(status.message, status.messageAt);
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
    renderMessage(status.message, status.messageAt);
    elements.lapsed.hidden = true;
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

  function renderLapsed(reason) {
    elements.figures.hidden = true;
    elements.progress.hidden = true;
    closeStream();
    stopPolling();
    if (token) {
      deadToken = token;
    }
    storeToken(null);
    firstPosition = null;
    showLapsed(lapsedKindOf(reason), "lapsedRejoining");
    setText(elements.lead, t("lapsedRejoining"));
    var now = Date.now();
    if (now - lastRejoinAt < REJOIN_GUARD_MS) {
      // The new place lapsed at once: wait a little rather than loop.
      window.setTimeout(function () { join(deadToken); }, REJOIN_GUARD_MS);
      return;
    }
    lastRejoinAt = now;
    join(deadToken);
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
          if (lapsedKind && answer.token !== deadToken) {
            showLapsed(lapsedKind, "lapsedRejoined");
          } else if (lapsedKind) {
            // The server kept the place after all: there is no lapse to tell.
            lapsedKind = null;
            elements.lapsed.hidden = true;
          }
          deadToken = null;
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
          deadToken = null;
        }
        var wait = retryAfterMs(response, 5000);
        showNotice((answer.error || "We could not get you a place in line just now.") + " Retrying in " + Math.round(wait / 1000) + " s.");
        window.setTimeout(function () { join(token || deadToken); }, wait);
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

  // With the script running, its live status replaces the server-rendered one.
  elements.status.hidden = false;
  if (typeof config.now === "number") {
    clockOffsetMs = config.now - Date.now();
  }
  if (config.branding && typeof config.branding === "object") {
    renderMessage(config.branding.message, config.branding.messageAt);
  }
  if (!roomId) {
    setText(elements.lead, "This page does not name a waiting room.");
    return;
  }
  if (config.found === false) {
    renderNotFound();
    return;
  }
  if (config.lapsed === "expired" || config.lapsed === "reset") {
    // The server read this browser's place and the engine said it is gone: say what happened,
    // and rejoin presenting the dead token so the server mints the replacement.
    deadToken = cookieToken() || storedToken();
    showLapsed(config.lapsed, "lapsedRejoining");
    lastRejoinAt = Date.now();
    join(deadToken);
    return;
  }
  join(storedToken());
})();
