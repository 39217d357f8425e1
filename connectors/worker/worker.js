// Queue Manager connector for Cloudflare Workers (module syntax, no dependencies).
//
// Deployed on the routes of the site it protects, it asks the queue server's door check
// (GET /api/v1/check) about every request and either lets it through to the origin, sends the
// visitor to the waiting room, or turns the pass the waiting page hands back (?qm_token=) into a
// door session kept in an HttpOnly cookie (qm_dk_<roomId>). The protocol is INTEGRATION.md's,
// "Installable connectors".
//
// Bindings (wrangler.toml [vars] / secrets):
//   QM_SERVER      the queue server's public base URL, e.g. https://queue.example.com
//   QM_ROOM_ID     the room protecting these routes
//   QM_API_KEY     secret: the server's PUBLIC_API_KEY (sent only as Authorization: Bearer)
//   QM_FAIL_MODE   optional: "open" (default) serves the page when the queue server cannot
//                  answer; "closed" answers 503 instead
//   QM_TIMEOUT_MS  optional: how long to wait for the door check (default 2000)
//   QM_ORIGIN      optional service binding: where passed requests go. Unset on Cloudflare,
//                  where fetch(request) already reaches the origin behind the route; set under
//                  workerd or in front of another Worker.

const CONNECTOR = "worker";
const VERSION = "1.0.0";
const TOKEN_PARAM = "qm_token";
const RETURN_PARAM = "qm_return";
const DEFAULT_TIMEOUT_MS = 2000;

// The check path, for this isolate's life: "/api/v1" until an old server (no /api/v1 routes)
// proves it has only the unversioned "/api" ones.
let apiPrefix = "/api/v1";
// So an outage is logged once per isolate, not on every request.
let outageLogged = false;

export default {
  async fetch(request, env, ctx) {
    const config = readConfig(env);
    if (!config) {
      logOnce("queue-manager: QM_SERVER and QM_ROOM_ID must be set; serving unprotected");
      return toOrigin(request, env);
    }
    try {
      return await protect(request, env, config);
    } catch (error) {
      return unavailable(request, env, config, error);
    }
  },
};

function readConfig(env) {
  const server = String(env.QM_SERVER || "").replace(/\/+$/, "");
  const roomId = String(env.QM_ROOM_ID || "");
  if (!server || !roomId) return null;
  const timeout = Number.parseInt(env.QM_TIMEOUT_MS, 10);
  return {
    server,
    roomId,
    apiKey: env.QM_API_KEY ? String(env.QM_API_KEY) : "",
    failClosed: String(env.QM_FAIL_MODE || "open").toLowerCase() === "closed",
    timeoutMs: Number.isFinite(timeout) && timeout > 0 ? timeout : DEFAULT_TIMEOUT_MS,
    cookieName: `qm_dk_${roomId}`,
  };
}

async function protect(request, env, config) {
  const pageUrl = new URL(request.url);
  const passToken = queryValue(pageUrl.search, TOKEN_PARAM);
  const cleanUrl = withoutParam(pageUrl, TOKEN_PARAM);
  const sessionKey = readCookie(request.headers.get("Cookie"), config.cookieName);
  const secure = pageUrl.protocol === "https:";

  let answer;
  if (passToken) {
    answer = await check(request, config, cleanUrl, { token: passToken });
    // A reload of the return URL after the pass was spent: the key it opened still admits.
    if (answer.action !== "pass" && sessionKey) {
      answer = await check(request, config, cleanUrl, { session: sessionKey });
    }
  } else if (sessionKey) {
    answer = await check(request, config, cleanUrl, { session: sessionKey });
  } else {
    answer = await check(request, config, cleanUrl, {});
  }

  if (answer.action === "queue") {
    const headers = new Headers({
      Location: waitingRoomLocation(answer.waitingRoomUrl, config, cleanUrl),
      "Cache-Control": "no-store",
    });
    if (answer.clearToken && sessionKey) {
      headers.append("Set-Cookie", expiredCookie(config.cookieName, secure));
    }
    return new Response(null, { status: 302, headers });
  }

  // A pass. The pass token never stays in the address bar: answer the clean URL.
  if (passToken) {
    const headers = new Headers({ Location: cleanUrl, "Cache-Control": "no-store" });
    if (answer.sess) headers.append("Set-Cookie", sessionCookie(config.cookieName, answer.sess, secure));
    return new Response(null, { status: 302, headers });
  }
  const response = await toOrigin(request, env);
  if (!answer.sess) return response;
  // A reclaimed session comes with a new key: keep it.
  const kept = new Response(response.body, response);
  kept.headers.append("Set-Cookie", sessionCookie(config.cookieName, answer.sess, secure));
  kept.headers.set("Cache-Control", "no-store");
  return kept;
}

// Asks the door check. Throws when the queue server cannot give an answer (unreachable, too
// slow, a 5xx, or a body that is not the check's JSON).
async function check(request, config, pageUrl, presented) {
  const first = await askCheck(request, config, pageUrl, presented, apiPrefix);
  if (first.status === 404 && apiPrefix === "/api/v1" && !first.coded) {
    // An old server without the /api/v1 prefix: use /api from now on.
    apiPrefix = "/api";
    return decide(await askCheck(request, config, pageUrl, presented, apiPrefix));
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

async function askCheck(request, config, pageUrl, presented, prefix) {
  const query = new URLSearchParams({ roomId: config.roomId, url: pageUrl });
  if (presented.token) query.set("token", presented.token);
  const ip = clientAddress(request);
  if (ip) query.set("ip", ip);
  const agent = request.headers.get("User-Agent");
  if (agent) query.set("agent", agent);
  // The connector names itself, so the server's logs tell connectors and versions apart.
  const headers = { Accept: "application/json", "User-Agent": `queue-manager-${CONNECTOR}/${VERSION}` };
  if (config.apiKey) headers.Authorization = `Bearer ${config.apiKey}`;
  if (presented.session) headers["X-QM-Session"] = presented.session;

  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), config.timeoutMs);
  try {
    const response = await fetch(`${config.server}${prefix}/check?${query}`, {
      headers,
      signal: controller.signal,
    });
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

// The visitor's address as Cloudflare saw it; off Cloudflare (workerd behind a proxy) the
// first X-Forwarded-For hop.
function clientAddress(request) {
  const connecting = request.headers.get("CF-Connecting-IP");
  if (connecting) return connecting.trim();
  const forwarded = request.headers.get("X-Forwarded-For");
  if (forwarded) return forwarded.split(",")[0].trim();
  return "";
}

function unavailable(request, env, config, error) {
  logOnce(`queue-manager: the queue server did not answer (${error && error.message}); failing ${config.failClosed ? "closed" : "open"}`);
  if (!config.failClosed) return toOrigin(request, env);
  return new Response(
    "<!doctype html><title>Busy</title><h1>We are busy right now</h1><p>Please try again in a moment.</p>",
    {
      status: 503,
      headers: {
        "Content-Type": "text/html; charset=utf-8",
        "Retry-After": "30",
        "Cache-Control": "no-store",
      },
    },
  );
}

function toOrigin(request, env) {
  if (env.QM_ORIGIN && typeof env.QM_ORIGIN.fetch === "function") return env.QM_ORIGIN.fetch(request);
  return fetch(request);
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
  if (!header) return "";
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

function logOnce(message) {
  if (outageLogged) return;
  outageLogged = true;
  console.log(message);
}
