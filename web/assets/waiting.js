// The waiting page's flow: join the room's line, follow the place live over the event stream,
// poll /api/status while the stream is down (backing off with jitter, and at once when the
// device comes back online), and go through when the visitor's turn comes. What is shown, and
// how, is waiting-ui.js, and the e-mail form is waiting-notify.js; every sentence comes from the
// server in the page config.
(function () {
  "use strict";

  var POLL_INTERVAL_MS = 5000;
  var RETRY_BASE_MS = 1000;
  var RETRY_MAX_MS = 30000;
  var REJOIN_GUARD_MS = 10000;
  var REDIRECT_DELAY_MS = 300;

  var config = readConfig();
  window.QM_CONFIG = config;
  if (!window.QMUI) {
    return;
  }
  var ui = window.QMUI.create(config);
  var elements = ui.elements;
  var t = ui.t;

  var roomId = typeof config.roomId === "string" ? config.roomId : "";
  // Inline mode: the page stands in for the site's own page, on the site's host. Its API lives
  // under `apiBase` (/__qm), the place travels in cookies only (never in a URL or in storage),
  // and the way through is the very URL the page stands on.
  var inline = config.inline === true;
  var apiBase = typeof config.apiBase === "string" ? config.apiBase : "";
  var storageKey = "qm_token_" + roomId;
  var token = null;
  var stream = null;
  var pollTimer = null;
  var retryTimer = null;
  var retryAttempt = 0;
  var lastRejoinAt = 0;
  // The token of a place that lapsed, sent on the rejoin that replaces it: the server carries
  // what was filed against the old place (a turn notification) over to the new one.
  var deadToken = null;
  // What the visitor was told about a lapse, until the replacement place is theirs.
  var lapsedKind = null;
  var redirecting = false;
  var holdsPlace = false;

  function readConfig() {
    var element = document.getElementById("qm-config");
    try {
      var parsed = JSON.parse((element && element.textContent) || "{}");
      return parsed && typeof parsed === "object" ? parsed : {};
    } catch (error) {
      return {};
    }
  }

  function storeToken(value) {
    token = value;
    if (inline) {
      return;
    }
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
    if (inline) {
      return null; // The queue cookie is presented with every request.
    }
    try {
      // `qm:<room>` is where pages before this one kept it.
      return window.localStorage.getItem(storageKey) || window.localStorage.getItem("qm:" + roomId);
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

  function safeRedirectTarget(status) {
    if (inline) {
      return window.location.href;
    }
    var candidates = [config.returnUrl, status.redirectUrl];
    for (var index = 0; index < candidates.length; index += 1) {
      var candidate = candidates[index];
      if (typeof candidate === "string" && /^https?:\/\//i.test(candidate)) {
        return withPass(candidate, token);
      }
    }
    return null;
  }

  // The site's connector runs on another origin and cannot read this host's cookies or
  // storage, so the pass travels in the return URL as `qm_token`; the connector's first check
  // spends it into a door session and strips it from the address bar.
  function withPass(url, pass) {
    if (!pass) {
      return url;
    }
    var hashAt = url.indexOf("#");
    var fragment = hashAt < 0 ? "" : url.slice(hashAt);
    var rest = hashAt < 0 ? url : url.slice(0, hashAt);
    var queryAt = rest.indexOf("?");
    var base = queryAt < 0 ? rest : rest.slice(0, queryAt);
    var kept = [];
    if (queryAt >= 0) {
      var pairs = rest.slice(queryAt + 1).split("&");
      for (var index = 0; index < pairs.length; index += 1) {
        var name = pairs[index].split("=")[0];
        if (pairs[index] !== "" && name !== "qm_token") {
          kept.push(pairs[index]);
        }
      }
    }
    kept.push("qm_token=" + encodeURIComponent(pass));
    return base + "?" + kept.join("&") + fragment;
  }

  // ---- Rendering an answer -------------------------------------------------------------

  function render(status) {
    ui.learnClock(status.now);
    if (typeof status.token === "string" && status.token) {
      // The server re-signed this place (a refresh, or a drawn pre-queue handle).
      storeToken(status.token);
    }
    if (status.expired) {
      renderLapsed(status.reason);
      return;
    }
    ui.renderMessage(status.message, status.messageAt);
    ui.renderRef(status.ref);
    if (status.passed) {
      renderPassed(status);
      return;
    }
    holdsPlace = true;
    ui.renderFigures(status);
    ui.renderPassedLink(null);
    if (status.scheduled || status.state === "scheduled") {
      ui.setState("scheduled");
      ui.setText(elements.lead, t("leadScheduled"));
      ui.renderScheduled(status, function () {
        // The doors are open: the draw runs now, and the stream says when the place is drawn.
        ui.setText(elements.lead, t("leadDrawing"));
        ui.announce(t("leadDrawing"));
      });
    } else if (status.state === "paused") {
      ui.hideScheduled();
      ui.setState("paused");
      ui.setText(elements.lead, t("leadPaused"));
    } else {
      ui.hideScheduled();
      ui.setState("waiting");
      ui.setText(elements.lead, t("leadWaiting"));
    }
    notifyForm.show(true);
  }

  function renderPassed(status) {
    holdsPlace = false;
    ui.setState("passed");
    ui.hideScheduled();
    elements.lapsed.hidden = true;
    elements.figures.hidden = true;
    elements.progress.hidden = true;
    notifyForm.show(false);
    ui.setText(elements.lead, t("leadPassed"));
    ui.showNotice("");
    var target = safeRedirectTarget(status);
    ui.renderPassedLink(target);
    if (target && !redirecting) {
      redirecting = true;
      stopFollowing();
      ui.announce(t("leadPassed"));
      window.setTimeout(function () { window.location.assign(target); }, REDIRECT_DELAY_MS);
    }
  }

  function lapsedKindOf(reason) {
    // The engine's word for the refusal: the visitor's own window ran out, or we discarded it.
    return reason === "expired" ? "expired" : "reset";
  }

  function showLapsed(kind, follow) {
    lapsedKind = kind;
    ui.showLapsed(t(kind === "expired" ? "lapsedExpired" : "lapsedReset") + " " + t(follow));
  }

  function renderLapsed(reason) {
    holdsPlace = false;
    ui.setState("lapsed");
    ui.hideScheduled();
    elements.figures.hidden = true;
    elements.progress.hidden = true;
    ui.renderRef(null);
    notifyForm.show(false);
    stopFollowing();
    if (token) {
      deadToken = token;
    }
    storeToken(null);
    showLapsed(lapsedKindOf(reason), "lapsedRejoining");
    ui.setText(elements.lead, t("lapsedRejoining"));
    var now = Date.now();
    if (now - lastRejoinAt < REJOIN_GUARD_MS) {
      // The new place lapsed at once: wait a little rather than loop.
      window.setTimeout(function () { join(deadToken); }, REJOIN_GUARD_MS);
      return;
    }
    lastRejoinAt = now;
    join(deadToken);
  }

  function renderNotFound() {
    holdsPlace = false;
    stopFollowing();
    ui.setState("not-found");
    elements.figures.hidden = true;
    elements.progress.hidden = true;
    ui.hideScheduled();
    notifyForm.show(false);
    ui.setText(elements.lead, t("noRoom"));
  }

  // ---- Joining -------------------------------------------------------------------------

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
    fetch(apiBase + "/api/join", {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "Accept": "application/json" },
      body: JSON.stringify(body)
    }).then(function (response) {
      return readJson(response).then(function (answer) {
        if (response.ok && typeof answer.token === "string") {
          joined(answer);
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
        ui.setState("error");
        var wait = retryAfterMs(response, 5000);
        ui.showNotice(joinRefusal(answer.code, ui.formatNumber(Math.round(wait / 1000))));
        window.setTimeout(function () { join(token || deadToken); }, wait);
      });
    }).catch(function () {
      ui.showNotice(t("joinOffline"));
      window.setTimeout(function () { join(presentedToken); }, 5000);
    });
  }

  // The refusal's sentence in the visitor's language; the page tries again after Retry-After.
  function joinRefusal(code, seconds) {
    switch (code) {
      case "rate_limited":
        return t("joinRateLimited", { seconds: seconds });
      case "prequeue_full":
      case "storage_unavailable":
        return t("joinBusy", { seconds: seconds });
      case "queue_identity_limit":
      case "prequeue_identity_limit":
        return t("joinIdentityLimit");
      case "blocked_by_protection":
        return t("joinBlocked");
      default:
        return t("joinRetry", { seconds: seconds });
    }
  }

  function joined(answer) {
    ui.showNotice("");
    storeToken(answer.token);
    if (lapsedKind && answer.token !== deadToken) {
      showLapsed(lapsedKind, "lapsedRejoined");
    } else if (lapsedKind) {
      // The server kept the place after all: there is no lapse to tell.
      lapsedKind = null;
      elements.lapsed.hidden = true;
    }
    deadToken = null;
    if (Object.prototype.hasOwnProperty.call(answer, "notify")) {
      notifyForm.statement(answer.notify);
    }
    render(answer);
    if (!answer.passed) {
      openStream();
    }
  }

  // ---- Following the place: stream, back-off, polling ----------------------------------

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
    clearRetry();
    if (redirecting || !token) {
      return;
    }
    if (typeof window.EventSource !== "function") {
      ui.setConnection("polling", false);
      startPolling();
      return;
    }
    var source = new window.EventSource(inline ? apiBase + "/events" : "/events?token=" + encodeURIComponent(token));
    stream = source;
    source.addEventListener("status", function (event) {
      // A frame from a stream this page already replaced says nothing about the current place.
      if (source === stream) {
        handleFrame(event);
      }
    });
    source.addEventListener("refresh", function () {
      // The server ends the stream so the reconnect can re-sign the token (or exchange a drawn
      // pre-queue handle for its ticket) and set the cookies: reopen at once.
      if (source === stream) {
        openStream();
      }
    });
    source.onopen = function () {
      if (source !== stream) {
        return;
      }
      retryAttempt = 0;
      ui.setConnection("live", false);
      stopPolling();
    };
    source.onerror = function () {
      if (source !== stream) {
        return;
      }
      // Our own back-off rather than the browser's fixed retry: a restart or a deploy must not
      // bring every open page back in the same second.
      closeStream();
      lostStream(!navigatorOnline());
    };
  }

  function navigatorOnline() {
    return !window.navigator || window.navigator.onLine !== false;
  }

  function lostStream(offline) {
    if (redirecting || !holdsPlace) {
      return;
    }
    ui.setConnection("reconnecting", offline);
    startPolling();
    if (offline) {
      return; // The `online` event retries at once.
    }
    poll(); // The place right away, not only at the next poll.
    var ceiling = Math.min(RETRY_MAX_MS, RETRY_BASE_MS * Math.pow(2, retryAttempt));
    retryAttempt += 1;
    var delay = Math.round(ceiling / 2 + Math.random() * ceiling / 2);
    clearRetry();
    retryTimer = window.setTimeout(function () {
      retryTimer = null;
      openStream();
    }, delay);
  }

  function clearRetry() {
    if (retryTimer !== null) {
      window.clearTimeout(retryTimer);
      retryTimer = null;
    }
  }

  function closeStream() {
    if (stream) {
      var source = stream;
      stream = null;
      source.onerror = null;
      source.onopen = null;
      source.close();
    }
  }

  function stopFollowing() {
    closeStream();
    clearRetry();
    stopPolling();
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
    var url = inline
      ? apiBase + "/api/status"
      : "/api/status?roomId=" + encodeURIComponent(roomId) + "&token=" + encodeURIComponent(token);
    fetch(url, { credentials: "same-origin", headers: { "Accept": "application/json" } })
      .then(function (response) {
        return readJson(response).then(function (answer) {
          if (response.ok) {
            render(answer);
          } else if (answer.code === "invalid_token") {
            stopFollowing();
            storeToken(null);
            join(null);
          }
        });
      })
      .catch(function () {
        // Still unreachable: the connection line already says so.
      });
  }

  window.addEventListener("offline", function () {
    if (!holdsPlace) {
      return;
    }
    closeStream();
    clearRetry();
    lostStream(true);
  });

  window.addEventListener("online", function () {
    if (!holdsPlace || redirecting) {
      return;
    }
    retryAttempt = 0;
    ui.setConnection("reconnecting", false);
    poll();
    openStream();
  });

  // The turn-notification form (EMAIL_NOTIFY), in waiting-notify.js.
  var notifyForm = window.QMNotify
    ? window.QMNotify.create(config, ui, function () { return token; })
    : { statement: function () {}, show: function () {} };

  // ---- Start ---------------------------------------------------------------------------

  // With the script running, its live status replaces the server-rendered one.
  elements.status.hidden = false;
  ui.setState("joining");
  ui.learnClock(config.now);
  ui.applyBranding();
  if (config.branding && typeof config.branding === "object") {
    ui.renderMessage(config.branding.message, config.branding.messageAt);
  }
  if (!roomId) {
    ui.setState("error");
    ui.setText(elements.lead, t("noRoomId"));
    return;
  }
  if (config.found === false) {
    renderNotFound();
    return;
  }
  if (typeof config.retryAfterSec === "number") {
    // The queue's backend is down and the room keeps the site closed meanwhile: no place is
    // taken; the page asks again for the same URL once the server's Retry-After has passed.
    ui.setState("error");
    ui.setText(elements.lead, t("unavailable"));
    window.setTimeout(function () { window.location.reload(); }, Math.max(1, config.retryAfterSec) * 1000);
    return;
  }
  if (config.lapsed === "expired" || config.lapsed === "reset") {
    // The server read this browser's place and the engine said it is gone: say what happened,
    // and rejoin presenting the dead token so the server mints the replacement.
    deadToken = cookieToken() || storedToken();
    ui.setState("lapsed");
    showLapsed(config.lapsed, "lapsedRejoining");
    lastRejoinAt = Date.now();
    join(deadToken);
    return;
  }
  join(storedToken());
})();
