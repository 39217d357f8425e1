// The waiting page's turn-notification form (only when EMAIL_NOTIFY is on: `notify: true` in the
// page config): says what is held against the place (the masked address and its delivery),
// registers an address or, sent empty, withdraws it with POST /api/notify, and says a refusal
// in the visitor's language.
(function () {
  "use strict";

  function readJson(response) {
    return response.json().catch(function () { return {}; });
  }

  // `currentToken` reads the token of the place the page holds now (it changes on a refresh).
  function create(config, ui, currentToken) {
    var t = ui.t;
    var roomId = config.roomId;
    var form = document.getElementById("qm-notify");
    var input = document.getElementById("qm-notify-email");
    var state = document.getElementById("qm-notify-state");
    var enabled = config.notify === true && !!form;
    var busy = false;
    var ERRORS = {
      invalid_email: "notifyInvalidEmail",
      rate_limited: "notifyRateLimited",
      place_lapsed: "notifyPlaceGone",
      stale_ticket: "notifyPlaceGone",
      invalid_token: "notifyPlaceGone",
      notify_disabled: "notifyDisabled"
    };

    function statement(notify) {
      if (!enabled) {
        return;
      }
      if (!notify || typeof notify !== "object") {
        ui.setText(state, t("notifyNone"));
        return;
      }
      var email = typeof notify.emailMasked === "string" ? notify.emailMasked : "";
      var key = notify.delivery === "sent" ? "notifySent" : notify.delivery === "failed" ? "notifyFailed" : "notifyPending";
      ui.setText(state, t(key, { email: email }));
    }

    function show(visible) {
      if (form) {
        form.hidden = !(enabled && visible);
      }
    }

    if (enabled) {
      form.addEventListener("submit", function (event) {
        event.preventDefault();
        var token = currentToken();
        if (busy || !token) {
          return;
        }
        if (input.value && typeof input.checkValidity === "function" && !input.checkValidity()) {
          // Said at once, without a round trip that can only be refused; the server still
          // checks every address it is sent, and its refusal reads the same.
          input.setAttribute("aria-invalid", "true");
          ui.setText(state, t("notifyInvalidEmail"));
          return;
        }
        busy = true;
        ui.setText(state, t("notifySaving"));
        fetch((typeof config.apiBase === "string" ? config.apiBase : "") + "/api/notify", {
          method: "POST",
          credentials: "same-origin",
          headers: { "Content-Type": "application/json", "Accept": "application/json" },
          body: JSON.stringify({ roomId: roomId, token: token, email: input.value.replace(/^\s+|\s+$/g, "") })
        }).then(function (response) {
          return readJson(response).then(function (answer) {
            if (response.ok) {
              input.value = "";
              input.removeAttribute("aria-invalid");
              statement(answer.notify);
            } else {
              if (answer.code === "invalid_email") {
                input.setAttribute("aria-invalid", "true");
              }
              ui.setText(state, t(ERRORS[answer.code] || "notifyError"));
            }
          });
        }).catch(function () {
          ui.setText(state, t("notifyError"));
        }).then(function () {
          busy = false;
        });
      });
    }

    return { statement: statement, show: show };
  }

  window.QMNotify = { create: create };
})();
