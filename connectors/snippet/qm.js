/*! Queue Manager browser snippet 1.0.0: asks the queue server's door check for this page and
 * sends a visitor who has no pass to the waiting room. Plain ES5, no dependencies, one global
 * (QueueManager).
 *
 * Configured by its script tag:
 *   <script src="https://queue.example/snippet/latest.js" data-room="launch"></script>
 *   data-room    the room id (required; `?room=` on the src does the same, for Tag Manager,
 *                which cannot set attributes)
 *   data-server  the queue server's base URL (default: the origin this script came from)
 *   data-fail    "open" (default) or "closed": what to do when the server cannot answer
 *   data-hide    "true" hides the page until the verdict (never longer than 3 s)
 * Each also reads from the src's query (`server=`, `fail=`, `hide=`).
 */
(function (window, document) {
  "use strict";

  if (window.QueueManager && window.QueueManager.version) {
    return; // Loaded twice (a tag and a template): the first one does the work.
  }

  var VERSION = "1.0.0";
  // How long the check may take before the page is served (or refused, failing closed).
  var TIMEOUT_MS = 3000;
  var RETRY_AFTER_SEC = 30;
  var HIDE_STYLE_ID = "qm-hide";
  var PASS_PARAM = "qm_token";

  var script = ownScript();
  var settings = readSettings(script);
  // Set once a /api/v1 check met a server older than the prefix: ask /api/check from then on.
  var legacyPath = false;
  var warned = false;

  var api = {
    version: VERSION,
    roomId: settings.room,
    server: settings.server,
    failMode: settings.failMode,
    // "idle" | "checking" | "pass" | "queue" | "failed-open" | "failed-closed"
    state: "idle",
    reason: null,
    check: check
  };
  window.QueueManager = api;

  function ownScript() {
    if (document.currentScript) {
      return document.currentScript;
    }
    // An old browser: the last script whose src names the snippet is the one running now.
    var scripts = document.getElementsByTagName("script");
    for (var index = scripts.length - 1; index >= 0; index -= 1) {
      if (/\/snippet\/[^\/?#]*\.js|\/qm\.js/.test(scripts[index].src || "")) {
        return scripts[index];
      }
    }
    return null;
  }

  function queryOf(url) {
    var params = {};
    var queryAt = url.indexOf("?");
    if (queryAt < 0) {
      return params;
    }
    var query = url.slice(queryAt + 1).split("#")[0].split("&");
    for (var index = 0; index < query.length; index += 1) {
      var equals = query[index].indexOf("=");
      var name = equals < 0 ? query[index] : query[index].slice(0, equals);
      var value = equals < 0 ? "" : query[index].slice(equals + 1);
      try {
        params[decodeURIComponent(name)] = decodeURIComponent(value.replace(/\+/g, " "));
      } catch (error) {
        // A malformed escape names nothing we could use.
      }
    }
    return params;
  }

  function originOf(url) {
    var match = /^(https?:\/\/[^\/?#]+)/i.exec(url || "");
    return match ? match[1] : "";
  }

  function readSettings(element) {
    var src = (element && element.src) || "";
    var query = queryOf(src);
    var attribute = function (name) {
      var value = element && element.getAttribute("data-" + name);
      return value || query[name] || "";
    };
    var server = attribute("server") || originOf(src);
    return {
      room: attribute("room"),
      server: server.replace(/\/+$/, ""),
      failMode: attribute("fail") === "closed" ? "closed" : "open",
      hide: attribute("hide") === "true" || attribute("hide") === "1"
    };
  }

  // ---- The page's URL -------------------------------------------------------------------

  // The page as the visitor asked for it, and the pass it carries: the URL without qm_token
  // is what the check judges and what the waiting room sends the visitor back to.
  function splitPass(href) {
    var hashAt = href.indexOf("#");
    var fragment = hashAt < 0 ? "" : href.slice(hashAt);
    var rest = hashAt < 0 ? href : href.slice(0, hashAt);
    var queryAt = rest.indexOf("?");
    if (queryAt < 0) {
      return { url: href, pass: null };
    }
    var kept = [];
    var pass = null;
    var pairs = rest.slice(queryAt + 1).split("&");
    for (var index = 0; index < pairs.length; index += 1) {
      var equals = pairs[index].indexOf("=");
      var name = equals < 0 ? pairs[index] : pairs[index].slice(0, equals);
      if (name === PASS_PARAM) {
        try {
          pass = decodeURIComponent(pairs[index].slice(equals + 1)) || pass;
        } catch (error) {
          pass = null;
        }
      } else if (pairs[index] !== "") {
        kept.push(pairs[index]);
      }
    }
    var base = rest.slice(0, queryAt);
    return { url: base + (kept.length ? "?" + kept.join("&") : "") + fragment, pass: pass };
  }

  // ---- The door-session key ------------------------------------------------------------

  function keyName() {
    return "qm_sess_" + settings.room;
  }

  function storedKey() {
    try {
      return window.sessionStorage.getItem(keyName());
    } catch (error) {
      return null; // Storage refused (a sandboxed frame, some private modes): no key.
    }
  }

  function storeKey(key) {
    try {
      if (key) {
        window.sessionStorage.setItem(keyName(), key);
      } else {
        window.sessionStorage.removeItem(keyName());
      }
    } catch (error) {
      // Without storage each page asks without a key; a pass still let this page through.
    }
  }

  // ---- Hiding the page until the verdict -----------------------------------------------

  function hidePage() {
    if (!settings.hide || document.getElementById(HIDE_STYLE_ID)) {
      return;
    }
    var style = document.createElement("style");
    style.id = HIDE_STYLE_ID;
    style.appendChild(document.createTextNode("html{visibility:hidden!important}"));
    (document.head || document.documentElement).appendChild(style);
    // The failsafe: the page shows after the timeout whatever happens to the check.
    window.setTimeout(showPage, TIMEOUT_MS + 500);
  }

  function showPage() {
    var style = document.getElementById(HIDE_STYLE_ID);
    if (style && style.parentNode) {
      style.parentNode.removeChild(style);
    }
  }

  // ---- The check -----------------------------------------------------------------------

  function checkUrl(page, pass) {
    var path = legacyPath ? "/api/check" : "/api/v1/check";
    var url = settings.server + path + "?roomId=" + encodeURIComponent(settings.room) +
      "&url=" + encodeURIComponent(page);
    if (pass) {
      url += "&token=" + encodeURIComponent(pass);
    }
    return url;
  }

  // One GET; `done(status, answer)` with answer the parsed JSON object or null. Status 0 is no
  // answer at all: refused, timed out, or a CORS refusal the browser hides from the script.
  function get(url, key, done) {
    var request;
    var finished = false;
    var finish = function (status, answer) {
      if (!finished) {
        finished = true;
        done(status, answer);
      }
    };
    try {
      request = new window.XMLHttpRequest();
      request.open("GET", url, true);
      request.timeout = TIMEOUT_MS;
      if (key) {
        // The header keeps the key out of URLs and access logs.
        request.setRequestHeader("X-QM-Session", key);
      }
    } catch (error) {
      finish(0, null);
      return;
    }
    request.onreadystatechange = function () {
      if (request.readyState !== 4) {
        return;
      }
      var answer = null;
      try {
        answer = JSON.parse(request.responseText);
      } catch (error) {
        answer = null;
      }
      finish(request.status, answer && typeof answer === "object" ? answer : null);
    };
    request.ontimeout = function () { finish(0, null); };
    request.onerror = function () { finish(0, null); };
    // A browser without XHR timeouts still gives up in time.
    window.setTimeout(function () {
      if (!finished) {
        try { request.abort(); } catch (error) { /* already ended */ }
        finish(0, null);
      }
    }, TIMEOUT_MS + 200);
    request.send(null);
  }

  function ask(page, pass, key, retried, done) {
    get(checkUrl(page, pass), key, function (status, answer) {
      if (status === 404 && !(answer && answer.code) && !legacyPath) {
        // A server older than /api/v1: ask the alias, and keep asking it on this page.
        legacyPath = true;
        ask(page, pass, key, retried, done);
        return;
      }
      if (status === 400 && answer && answer.code === "invalid_session" && key && !retried) {
        // A stored key the server cannot read is dropped, and the page asked about afresh.
        storeKey(null);
        ask(page, pass, null, true, done);
        return;
      }
      done(status, answer);
    });
  }

  function waitingRoom(answer, page) {
    var target = String(answer.waitingRoomUrl || "/w/" + encodeURIComponent(settings.room));
    if (!/^https?:\/\//i.test(target)) {
      target = settings.server + (target.charAt(0) === "/" ? "" : "/") + target;
    }
    return target + (target.indexOf("?") < 0 ? "?" : "&") + "qm_return=" + encodeURIComponent(page);
  }

  function failed(why, callback) {
    if (!warned && window.console && window.console.warn) {
      warned = true;
      window.console.warn("queue-manager: the door check failed (" + why + "); failing " + settings.failMode);
    }
    if (settings.failMode === "closed") {
      api.state = "failed-closed";
      refusePage();
    } else {
      api.state = "failed-open";
      showPage();
    }
    finish(callback);
  }

  // failMode "closed": the page is replaced by a short notice and tried again after a while,
  // the browser's counterpart of a 503 with Retry-After.
  function refusePage() {
    var show = function () {
      var body = document.body || document.documentElement.appendChild(document.createElement("body"));
      body.innerHTML = "";
      var notice = document.createElement("p");
      notice.id = "qm-unavailable";
      notice.appendChild(document.createTextNode(
        "This page is not available right now. It will try again in " + RETRY_AFTER_SEC + " seconds."));
      body.appendChild(notice);
      showPage();
    };
    if (document.body) {
      show();
    } else {
      document.addEventListener("DOMContentLoaded", show);
    }
    window.setTimeout(function () { window.location.reload(); }, RETRY_AFTER_SEC * 1000);
  }

  function finish(callback) {
    if (typeof callback === "function") {
      callback(api.state, api.reason);
    }
  }

  // Asks the door check about the page now showing and acts on the verdict; `callback(state,
  // reason)` when it is known. Runs on load; a single-page app calls it again on a route change.
  function check(callback) {
    if (!settings.room) {
      failed("no room: set data-room on the script tag", callback);
      return;
    }
    if (!settings.server) {
      failed("no server: set data-server on the script tag", callback);
      return;
    }
    api.state = "checking";
    api.reason = null;
    hidePage();
    var split = splitPass(window.location.href);
    var key = split.pass ? null : storedKey();
    ask(split.url, split.pass, key, false, function (status, answer) {
      if (status !== 200 || !answer || (answer.action !== "pass" && answer.action !== "queue")) {
        failed(status ? "status " + status : "no answer", callback);
        return;
      }
      api.reason = answer.reason || null;
      if (answer.action === "pass") {
        if (typeof answer.sess === "string" && answer.sess) {
          storeKey(answer.sess);
        }
        if (split.pass && window.history && window.history.replaceState) {
          // The spent pass leaves the address bar (and so any link the visitor copies).
          window.history.replaceState(window.history.state, "", split.url);
        }
        api.state = "pass";
        showPage();
        finish(callback);
        return;
      }
      if (answer.clearToken) {
        storeKey(null);
      }
      api.state = "queue";
      finish(callback);
      window.location.replace(waitingRoom(answer, split.url));
    });
  }

  check();
})(window, document);
