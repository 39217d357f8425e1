// Queue Manager connector for Node: an Express-compatible middleware, no dependencies.
//
//   const queue = require("queue-manager-connector");
//   app.use(queue({ server: "https://queue.example.com", roomId: "launch",
//                   apiKey: process.env.QM_API_KEY }));
//
// On every request it asks the queue server's door check (GET /api/v1/check) and either calls
// next() (the page is served), sends the visitor to the waiting room, or turns the pass the
// waiting page hands back (?qm_token=) into a door session kept in an HttpOnly cookie
// (qm_dk_<roomId>). The protocol is INTEGRATION.md's, "Installable connectors". It works with
// Express, Connect, and a bare http.createServer handler alike: it only uses req.url (or
// req.originalUrl), req.headers, req.socket and res.setHeader / res.end.
"use strict";

const CONNECTOR = "node";
const VERSION = "1.0.0";
const TOKEN_PARAM = "qm_token";
const RETURN_PARAM = "qm_return";
const DEFAULT_TIMEOUT_MS = 2000;

/**
 * The middleware. Options: server (the queue server's public base URL), roomId, apiKey (the
 * server's PUBLIC_API_KEY), failMode ("open", the default, or "closed"), timeoutMs (2000),
 * trustProxy (read the client address, scheme and host from X-Forwarded-* headers; only behind
 * a proxy that sets them), logger (defaults to console).
 */
function queue(options) {
  const config = readOptions(options || {});
  // The check path, for this middleware's life: "/api/v1" until an old server (no /api/v1
  // routes) proves it has only the unversioned "/api" ones.
  const state = { apiPrefix: "/api/v1", outageLogged: false };

  return function queueManager(req, res, next) {
    protect(req, res, config, state).then(
      (pass) => {
        if (pass) next();
      },
      (error) => {
        if (!state.outageLogged) {
          state.outageLogged = true;
          config.logger.warn(
            `queue-manager: the queue server did not answer (${error && error.message}); failing ${config.failClosed ? "closed" : "open"}`,
          );
        }
        if (!config.failClosed) {
          next();
          return;
        }
        res.statusCode = 503;
        res.setHeader("Retry-After", "30");
        res.setHeader("Cache-Control", "no-store");
        res.setHeader("Content-Type", "text/html; charset=utf-8");
        res.end("<!doctype html><title>Busy</title><h1>We are busy right now</h1><p>Please try again in a moment.</p>");
      },
    );
  };
}

function readOptions(options) {
  const server = String(options.server || "").replace(/\/+$/, "");
  const roomId = String(options.roomId || "");
  if (!server || !roomId) throw new TypeError("queue-manager-connector: server and roomId are required");
  const timeout = Number(options.timeoutMs);
  return {
    server,
    roomId,
    apiKey: options.apiKey ? String(options.apiKey) : "",
    failClosed: String(options.failMode || "open").toLowerCase() === "closed",
    timeoutMs: Number.isFinite(timeout) && timeout > 0 ? timeout : DEFAULT_TIMEOUT_MS,
    trustProxy: Boolean(options.trustProxy),
    cookieName: `qm_dk_${roomId}`,
    logger: options.logger || console,
  };
}

// Resolves true when the request may go on to the page; false when it has been answered here.
// Rejects when the queue server could not give an answer.
async function protect(req, res, config, state) {
  const pageUrl = requestUrl(req, config);
  const passToken = queryValue(pageUrl.search, TOKEN_PARAM);
  const cleanUrl = withoutParam(pageUrl, TOKEN_PARAM);
  const sessionKey = readCookie(req.headers.cookie, config.cookieName);
  const secure = pageUrl.protocol === "https:";
  const client = { ip: clientAddress(req, config), agent: req.headers["user-agent"] || "" };

  let answer;
  if (passToken) {
    answer = await check(config, state, client, cleanUrl, { token: passToken });
    // A reload of the return URL after the pass was spent: the key it opened still admits.
    if (answer.action !== "pass" && sessionKey) {
      answer = await check(config, state, client, cleanUrl, { session: sessionKey });
    }
  } else if (sessionKey) {
    answer = await check(config, state, client, cleanUrl, { session: sessionKey });
  } else {
    answer = await check(config, state, client, cleanUrl, {});
  }

  if (answer.action === "queue") {
    if (answer.clearToken && sessionKey) appendCookie(res, expiredCookie(config.cookieName, secure));
    redirect(res, waitingRoomLocation(answer.waitingRoomUrl, config, cleanUrl));
    return false;
  }
  if (answer.sess) appendCookie(res, sessionCookie(config.cookieName, answer.sess, secure));
  // The pass token never stays in the address bar: answer the clean URL.
  if (passToken) {
    redirect(res, cleanUrl);
    return false;
  }
  if (answer.sess) res.setHeader("Cache-Control", "no-store");
  return true;
}

async function check(config, state, client, pageUrl, presented) {
  const first = await askCheck(config, client, pageUrl, presented, state.apiPrefix);
  if (first.status === 404 && state.apiPrefix === "/api/v1" && !first.coded) {
    // An old server without the /api/v1 prefix: use /api from now on.
    state.apiPrefix = "/api";
    return decide(await askCheck(config, client, pageUrl, presented, state.apiPrefix));
  }
  return decide(first);
}

function decide(reply) {
  const body = reply.body;
  if (reply.status >= 200 && reply.status < 300 && body && (body.action === "pass" || body.action === "queue")) {
    return body;
  }
  throw new Error(`door check answered ${reply.status}${body && body.code ? ` ${body.code}` : ""}`);
}

async function askCheck(config, client, pageUrl, presented, prefix) {
  const query = new URLSearchParams({ roomId: config.roomId, url: pageUrl });
  if (presented.token) query.set("token", presented.token);
  if (client.ip) query.set("ip", client.ip);
  if (client.agent) query.set("agent", client.agent);
  // The connector names itself, so the server's logs tell connectors and versions apart.
  const headers = { Accept: "application/json", "User-Agent": `queue-manager-${CONNECTOR}/${VERSION}` };
  if (config.apiKey) headers.Authorization = `Bearer ${config.apiKey}`;
  if (presented.session) headers["X-QM-Session"] = presented.session;
  return getJson(`${config.server}${prefix}/check?${query}`, headers, config.timeoutMs);
}

// GET a URL within `timeoutMs` (the body read included): {status, body (parsed JSON or null),
// coded (the body is an error with a code)}.
async function getJson(url, headers, timeoutMs) {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), timeoutMs);
  try {
    const response = await fetch(url, { headers, signal: controller.signal, redirect: "manual" });
    const text = await response.text();
    let body = null;
    try {
      body = JSON.parse(text);
    } catch {
      body = null;
    }
    const coded = Boolean(body && typeof body === "object" && typeof body.code === "string");
    return { status: response.status, body, coded };
  } finally {
    clearTimeout(timer);
  }
}

// The page as the visitor asked for it.
function requestUrl(req, config) {
  const forwarded = (name) => {
    const value = req.headers[name];
    return config.trustProxy && typeof value === "string" && value ? value.split(",")[0].trim() : "";
  };
  const scheme = forwarded("x-forwarded-proto") || (req.socket && req.socket.encrypted ? "https" : "http");
  const host = forwarded("x-forwarded-host") || req.headers.host || "localhost";
  const path = req.originalUrl || req.url || "/";
  return new URL(`${scheme}://${host}${path.startsWith("/") ? path : `/${path}`}`);
}

function clientAddress(req, config) {
  if (config.trustProxy) {
    const forwarded = req.headers["x-forwarded-for"];
    if (typeof forwarded === "string" && forwarded) return forwarded.split(",")[0].trim();
  }
  const address = (req.socket && req.socket.remoteAddress) || "";
  // An IPv4 peer on a dual-stack socket reads "::ffff:1.2.3.4".
  return address.startsWith("::ffff:") ? address.slice(7) : address;
}

function redirect(res, location) {
  res.statusCode = 302;
  res.setHeader("Location", location);
  res.setHeader("Cache-Control", "no-store");
  res.end();
}

function appendCookie(res, line) {
  const existing = res.getHeader("Set-Cookie");
  const lines = existing === undefined ? [] : Array.isArray(existing) ? existing : [String(existing)];
  res.setHeader("Set-Cookie", [...lines, line]);
}

function waitingRoomLocation(waitingRoomUrl, config, pageUrl) {
  const target = new URL(waitingRoomUrl || `/w/${encodeURIComponent(config.roomId)}`, `${config.server}/`).toString();
  const separator = target.includes("?") ? "&" : "?";
  return `${target}${separator}${RETURN_PARAM}=${encodeURIComponent(pageUrl)}`;
}

function sessionCookie(name, value, secure) {
  return `${name}=${value}; Path=/; HttpOnly; SameSite=Lax${secure ? "; Secure" : ""}`;
}

function expiredCookie(name, secure) {
  return `${name}=; Path=/; Max-Age=0; HttpOnly; SameSite=Lax${secure ? "; Secure" : ""}`;
}

function readCookie(header, name) {
  if (typeof header !== "string") return "";
  for (const part of header.split(";")) {
    const at = part.indexOf("=");
    if (at < 0) continue;
    if (part.slice(0, at).trim() === name) return part.slice(at + 1).trim();
  }
  return "";
}

// The first value of `name` in a raw query string ("?a=1&b=2"), decoded.
function queryValue(search, name) {
  for (const part of search.replace(/^\?/, "").split("&")) {
    const at = part.indexOf("=");
    const key = at < 0 ? part : part.slice(0, at);
    if (key === name) {
      try {
        return decodeURIComponent((at < 0 ? "" : part.slice(at + 1)).replace(/\+/g, " "));
      } catch {
        return "";
      }
    }
  }
  return "";
}

// The URL without `name`, every other parameter left exactly as the visitor sent it.
function withoutParam(url, name) {
  const kept = url.search
    .replace(/^\?/, "")
    .split("&")
    .filter((part) => part !== "" && (part.indexOf("=") < 0 ? part : part.slice(0, part.indexOf("="))) !== name);
  return `${url.origin}${url.pathname}${kept.length ? `?${kept.join("&")}` : ""}${url.hash}`;
}

/**
 * The install check (GET /api/v1/verify, falling back to /api/verify on an old server):
 * resolves the server's report, {ok, checks: [{id, status, title, detail?, fix?}], ...}.
 */
async function verify({ server, roomId, url, apiKey, timeoutMs }) {
  const base = String(server || "").replace(/\/+$/, "");
  const query = new URLSearchParams({ roomId: String(roomId || ""), connector: CONNECTOR, version: VERSION });
  if (url) query.set("url", url);
  const headers = { Accept: "application/json", "User-Agent": `queue-manager-${CONNECTOR}/${VERSION}` };
  if (apiKey) headers.Authorization = `Bearer ${apiKey}`;
  const limit = Number(timeoutMs) > 0 ? Number(timeoutMs) : 10000;
  let reply = await getJson(`${base}/api/v1/verify?${query}`, headers, limit);
  if (reply.status === 404 && !reply.coded) reply = await getJson(`${base}/api/verify?${query}`, headers, limit);
  if (reply.status !== 200 || !reply.body || !Array.isArray(reply.body.checks)) {
    const code = reply.body && reply.body.code ? ` ${reply.body.code}` : "";
    const said = reply.body && reply.body.error ? `: ${reply.body.error}` : "";
    throw new Error(`the install check answered ${reply.status}${code}${said}`);
  }
  return reply.body;
}

module.exports = queue;
module.exports.queue = queue;
module.exports.verify = verify;
module.exports.CONNECTOR = CONNECTOR;
module.exports.VERSION = VERSION;
