// What the waiting page shows, apart from how it learns it (waiting.js): the sentences the server
// sent for the chosen locale, numbers and times in that locale and in the device's clock frame,
// the figures and the honest progress bar, the scheduled-drop countdown, the connection line,
// the quiet screen-reader announcements, the support code and the brand's colours.
(function () {
  "use strict";

  // A position announcement at most this often, unless the line moved a lot.
  var ANNOUNCE_EVERY_MS = 30000;

  function byId(id) {
    return document.getElementById(id);
  }

  function setText(element, text) {
    // Only touch the DOM on a real change: no repaint, no repeated announcement.
    if (element && element.textContent !== text) {
      element.textContent = text;
    }
  }

  function create(config) {
    var sentences = config.sentences && typeof config.sentences === "object" ? config.sentences : {};
    var locale = config.locale === "th" ? "th" : "en";
    var intlLocale = locale === "th" ? "th-TH" : "en-GB";
    var numbers = window.Intl ? new window.Intl.NumberFormat(intlLocale) : null;
    var elements = {
      root: document.documentElement,
      status: byId("qm-status"),
      connection: byId("qm-connection"),
      lead: byId("qm-lead"),
      scheduled: byId("qm-scheduled"),
      countdown: byId("qm-countdown"),
      opensAt: byId("qm-opens-at"),
      preCount: byId("qm-pre-count"),
      figures: byId("qm-figures"),
      position: byId("qm-position"),
      ahead: byId("qm-ahead"),
      eta: byId("qm-eta"),
      progress: byId("qm-progress"),
      passed: byId("qm-passed"),
      passedLink: byId("qm-passed-link"),
      announce: byId("qm-announce"),
      notice: byId("qm-notice"),
      lapsed: byId("qm-lapsed"),
      message: byId("qm-message"),
      messageText: byId("qm-message-text"),
      messageTime: byId("qm-message-time"),
      support: byId("qm-support"),
      ref: byId("qm-ref"),
      supportText: byId("qm-support-text")
    };
    // Server clock minus device clock, from the last answer that carried `now`: a server
    // instant is shown at instant − (now − clientNow).
    var clockOffsetMs = 0;
    var countdownTimer = null;
    var countdownTarget = null;
    var onCountdownEnd = null;
    var progress = { ref: null, first: null, best: 0 };
    var announced = { position: null, at: 0 };

    function t(key, values) {
      var text = typeof sentences[key] === "string" ? sentences[key] : "";
      return text.replace(/\{(\w+)\}/g, function (whole, name) {
        return values && Object.prototype.hasOwnProperty.call(values, name) ? String(values[name]) : whole;
      });
    }

    function formatNumber(value) {
      return numbers ? numbers.format(value) : String(value);
    }

    function formatWait(seconds) {
      if (typeof seconds !== "number") {
        return t("waitUnknown");
      }
      if (seconds < 60) {
        return t("waitUnderMinute");
      }
      var minutes = Math.ceil(seconds / 60);
      if (minutes < 60) {
        return t("waitMinutes", { minutes: formatNumber(minutes) });
      }
      return t("waitHours", { hours: formatNumber(Math.floor(minutes / 60)), minutes: formatNumber(minutes % 60) });
    }

    function learnClock(now) {
      if (typeof now === "number") {
        clockOffsetMs = now - Date.now();
      }
    }

    function deviceInstant(serverInstantMs) {
      return serverInstantMs - clockOffsetMs;
    }

    function deviceTime(serverInstantMs) {
      var local = new Date(deviceInstant(serverInstantMs));
      var sameDay = local.toDateString() === new Date().toDateString();
      var options = sameDay ? { hour: "2-digit", minute: "2-digit" } : { weekday: "short", day: "numeric", month: "short", hour: "2-digit", minute: "2-digit" };
      return local.toLocaleString(intlLocale, options);
    }

    function setState(state) {
      elements.root.setAttribute("data-qm-state", state);
    }

    function setConnection(state, offline) {
      elements.root.setAttribute("data-qm-connection", state);
      if (state === "live") {
        elements.connection.hidden = true;
        return;
      }
      var text = state === "polling" ? t("connectionPolling") : t("connectionReconnecting");
      if (offline) {
        text += " " + t("connectionOffline");
      }
      setText(elements.connection, text);
      elements.connection.hidden = false;
    }

    function showNotice(text) {
      setText(elements.notice, text || "");
      elements.notice.hidden = !text;
    }

    function showLapsed(text) {
      setText(elements.lapsed, text || "");
      elements.lapsed.hidden = !text;
    }

    function announce(text) {
      // Cleared first so the same words, said again later, are read again.
      elements.announce.textContent = "";
      window.setTimeout(function () { elements.announce.textContent = text; }, 50);
    }

    function maybeAnnounce(position) {
      var now = Date.now();
      if (announced.position === null) {
        announced = { position: position, at: now };
        return;
      }
      if (position === announced.position) {
        return;
      }
      var moved = Math.abs(announced.position - position);
      var bigMove = moved >= Math.max(10, announced.position / 4);
      if (bigMove || now - announced.at >= ANNOUNCE_EVERY_MS) {
        announced = { position: position, at: now };
        announce(t("announcePosition", { position: formatNumber(position) }));
      }
    }

    function rememberedFirst(ref) {
      try {
        var stored = JSON.parse(window.localStorage.getItem("qm_first_" + config.roomId) || "null");
        return stored && stored.ref === ref && typeof stored.first === "number" ? stored.first : null;
      } catch (error) {
        return null;
      }
    }

    function rememberFirst(ref, first) {
      try {
        window.localStorage.setItem("qm_first_" + config.roomId, JSON.stringify({ ref: ref, first: first }));
      } catch (error) {
        // Private browsing can refuse storage: the bar then starts from this page load.
      }
    }

    function renderProgress(position, ref) {
      // From the position at first sight (remembered per place across reloads) to the front.
      // It never moves backwards, except for a new place, which starts its own bar.
      if (ref !== progress.ref) {
        progress = { ref: ref, first: ref ? rememberedFirst(ref) : null, best: 0 };
      }
      if (progress.first === null || position > progress.first) {
        progress.first = position;
        if (ref) {
          rememberFirst(ref, position);
        }
      }
      var done = progress.first > 0 ? (progress.first - position + 1) / (progress.first + 1) : 0;
      progress.best = Math.max(progress.best, Math.round(done * 100));
      elements.progress.value = Math.max(2, progress.best);
      elements.progress.setAttribute("aria-valuetext", t("announcePosition", { position: formatNumber(position) }));
      elements.progress.hidden = false;
    }

    function renderFigures(status) {
      var hasPosition = typeof status.position === "number";
      elements.figures.hidden = !hasPosition;
      if (!hasPosition) {
        elements.progress.hidden = true;
        return;
      }
      var ahead = typeof status.ahead === "number" ? status.ahead : Math.max(0, status.position - 1);
      setText(elements.position, formatNumber(status.position));
      setText(elements.ahead, formatNumber(ahead));
      setText(elements.eta, formatWait(status.etaSec));
      renderProgress(status.position, typeof status.ref === "string" ? status.ref : null);
      maybeAnnounce(status.position);
    }

    function countdownText(remainingMs) {
      var total = Math.max(0, Math.ceil(remainingMs / 1000));
      var hours = Math.floor(total / 3600);
      var minutes = Math.floor((total % 3600) / 60);
      var seconds = total % 60;
      var two = function (value) { return (value < 10 ? "0" : "") + value; };
      return (hours > 0 ? formatNumber(hours) + ":" : "") + two(minutes) + ":" + two(seconds);
    }

    function tick() {
      var remaining = countdownTarget - Date.now();
      setText(elements.countdown, countdownText(remaining));
      if (remaining <= 0) {
        stopCountdown();
        if (onCountdownEnd) {
          onCountdownEnd();
        }
      }
    }

    function stopCountdown() {
      if (countdownTimer !== null) {
        window.clearInterval(countdownTimer);
        countdownTimer = null;
      }
    }

    // Scheduled: counts down each second to opensAt in the device's frame; `onEnd` runs once
    // when it reaches zero (the draw is happening; the stream says when the place is drawn).
    function renderScheduled(status, onEnd) {
      elements.scheduled.hidden = false;
      if (typeof status.preCount === "number") {
        setText(elements.preCount, t("preCount", { count: formatNumber(status.preCount) }));
      }
      if (typeof status.opensAt !== "number") {
        return;
      }
      setText(elements.opensAt, deviceTime(status.opensAt));
      countdownTarget = deviceInstant(status.opensAt);
      onCountdownEnd = onEnd;
      if (countdownTarget - Date.now() <= 0) {
        stopCountdown();
        setText(elements.countdown, countdownText(0));
        onEnd();
        return;
      }
      if (countdownTimer === null) {
        countdownTimer = window.setInterval(tick, 1000);
      }
      tick();
    }

    function hideScheduled() {
      stopCountdown();
      elements.scheduled.hidden = true;
    }

    function renderPassedLink(target) {
      if (target) {
        elements.passedLink.href = target;
        elements.passed.hidden = false;
      } else {
        elements.passed.hidden = true;
      }
    }

    function renderMessage(message, messageAt) {
      // The pane stays in every state; only an answer that speaks for the room changes it.
      if (typeof message === "string" && message.replace(/^\s+|\s+$/g, "")) {
        setText(elements.messageText, message);
        setText(elements.messageTime, typeof messageAt === "number" ? t("messagePostedAt", { time: deviceTime(messageAt) }) : "");
        elements.message.hidden = false;
      } else {
        elements.message.hidden = true;
      }
    }

    function renderRef(code) {
      if (typeof code === "string" && code) {
        setText(elements.ref, code);
        elements.support.hidden = false;
      } else {
        elements.support.hidden = true;
      }
    }

    function applyBranding() {
      // Colours were checked on the server (#rgb/#rrggbb) and are checked again here.
      var theme = config.theme && typeof config.theme === "object" ? config.theme : {};
      ["primary", "accent", "background", "text"].forEach(function (name) {
        var value = theme[name];
        if (typeof value === "string" && /^#([0-9a-f]{3}|[0-9a-f]{6})$/i.test(value)) {
          elements.root.style.setProperty("--brand-" + name, value);
          elements.root.classList.add("brand-" + name);
        }
      });
      var branding = config.branding && typeof config.branding === "object" ? config.branding : {};
      if (typeof branding.supportText === "string") {
        setText(elements.supportText, branding.supportText);
      }
    }

    return {
      elements: elements,
      t: t,
      setText: setText,
      formatNumber: formatNumber,
      learnClock: learnClock,
      deviceTime: deviceTime,
      setState: setState,
      setConnection: setConnection,
      showNotice: showNotice,
      showLapsed: showLapsed,
      announce: announce,
      renderFigures: renderFigures,
      renderScheduled: renderScheduled,
      hideScheduled: hideScheduled,
      renderPassedLink: renderPassedLink,
      renderMessage: renderMessage,
      renderRef: renderRef,
      applyBranding: applyBranding
    };
  }

  window.QMUI = { create: create };
})();
