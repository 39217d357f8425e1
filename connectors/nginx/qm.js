/**
 * Queue Manager connector for nginx (njs): the handler of the internal location that nginx's
 * `auth_request` asks before every protected request (see qm-njs.conf). It asks the queue
 * server's door check (GET {server}/api/v1/check) for the visitor and answers nginx in the
 * shape auth_request reads:
 *   204            serve the page (proxy_pass to the origin, unchanged);
 *   401            send the visitor to X-QM-Location (302), with X-QM-Set-Cookie when set:
 *                  the waiting room, or the page itself once its qm_token opened a door session;
 *   403            fail closed ($qm_fail_mode closed and the queue server cannot answer).
 * Configuration comes from nginx variables, so one nginx can protect locations with different
 * rooms: $qm_server, $qm_room, $qm_api_key, $qm_fail_mode ("open", the default, or "closed").
 */

var VERSION = '1.0.0';
var CONNECTOR = 'nginx';

/** The variable `name`, trimmed, or `fallback` when unset or empty. */
function setting(r, name, fallback) {
    var value = r.variables[name];
    value = value ? String(value).trim() : '';
    return value ? value : fallback;
}

/** `text` as a query value; never throws on a lone surrogate. */
function enc(text) {
    try {
        return encodeURIComponent(text);
    } catch (e) {
        return '';
    }
}

function dec(text) {
    try {
        return decodeURIComponent(text.replace(/\+/g, ' '));
    } catch (e) {
        return text;
    }
}

/**
 * The page the visitor asked for, split into the URL without qm_token (what the queue server
 * judges, and where the visitor comes back to) and the token itself. $request_uri is the
 * original request's URI even inside the auth_request subrequest.
 */
function visitedPage(r) {
    var host = r.headersIn.Host || r.variables.host;
    var uri = r.variables.request_uri || '/';
    var mark = uri.indexOf('?');
    var path = mark < 0 ? uri : uri.slice(0, mark);
    var query = mark < 0 ? '' : uri.slice(mark + 1);
    var token = '';
    var kept = [];
    query.split('&').forEach(function (pair) {
        if (!pair) {
            return;
        }
        var eq = pair.indexOf('=');
        var name = eq < 0 ? pair : pair.slice(0, eq);
        if (name === 'qm_token') {
            token = token || dec(eq < 0 ? '' : pair.slice(eq + 1));
        } else {
            kept.push(pair);
        }
    });
    var clean = path + (kept.length ? '?' + kept.join('&') : '');
    return {url: r.variables.scheme + '://' + host + clean, token: token};
}

/** The value of cookie `name` in the request, or ''. */
function cookie(r, name) {
    var header = r.headersIn.Cookie || '';
    var parts = header.split(';');
    for (var i = 0; i < parts.length; i++) {
        var part = parts[i].trim();
        if (part.indexOf(name + '=') === 0) {
            return part.slice(name.length + 1);
        }
    }
    return '';
}

/** The Set-Cookie line that stores the door-session key, or expires it when `key` is ''. */
function keyCookie(r, room, key) {
    var line = 'qm_dk_' + room + '=' + key + '; Path=/; HttpOnly; SameSite=Lax';
    if (!key) {
        line += '; Max-Age=0';
    }
    if (r.variables.scheme === 'https') {
        line += '; Secure';
    }
    return line;
}

/** `waiting` made absolute against the server, with qm_return=<page> appended. */
function waitingRoom(server, waiting, page) {
    var base = waiting || '';
    if (base.charAt(0) === '/') {
        base = server + base;
    }
    return base + (base.indexOf('?') < 0 ? '?' : '&') + 'qm_return=' + enc(page);
}

/** `host[:port]` of a base URL. */
function authority(base) {
    var rest = base.replace(/^[a-zA-Z][a-zA-Z0-9+.-]*:\/\//, '');
    var end = rest.search(/[\/?#]/);
    return end < 0 ? rest : rest.slice(0, end);
}

/** Asks the door check once at `prefix`; resolves to {status, body (parsed or null), text}. */
async function ask(r, config, prefix, page, token, key) {
    var url = config.server + prefix + '/check?roomId=' + enc(config.room)
        + '&url=' + enc(page)
        + '&ip=' + enc(r.variables.remote_addr || '')
        + '&agent=' + enc(r.headersIn['User-Agent'] || '-');
    if (token) {
        url += '&token=' + enc(token);
    }
    // ngx.fetch's own Host leaves out the port; the server builds waitingRoomUrl from it.
    var headers = {'Accept': 'application/json', 'Host': authority(config.server)};
    if (config.apiKey) {
        headers['Authorization'] = 'Bearer ' + config.apiKey;
    }
    if (key) {
        headers['X-QM-Session'] = key;
    }
    var reply = await ngx.fetch(url, {method: 'GET', headers: headers});
    var text = await reply.text();
    var body = null;
    try {
        body = JSON.parse(text);
    } catch (e) {
        body = null;
    }
    return {status: reply.status, body: body, text: text};
}

/** Asks at /api/v1, falling back once to /api for a server without the prefix. */
async function askWithFallback(r, config, page, token, key) {
    var answer = await ask(r, config, '/api/v1', page, token, key);
    if (answer.status === 404 && !(answer.body && answer.body.code)) {
        answer = await ask(r, config, '/api', page, token, key);
    }
    return answer;
}

/** The queue server could not decide: serve the page (open) or refuse it (closed). */
function failed(r, config, why) {
    ngx.log(ngx.WARN, 'queue-manager ' + CONNECTOR + ' ' + VERSION + ': room ' + config.room
        + ': door check failed (' + why + '); failing ' + config.failMode);
    if (config.failMode === 'closed') {
        // A body, so nginx answers this status as it is instead of through error_page.
        r.return(403, 'closed');
    } else {
        r.return(204);
    }
}

/** Sends the visitor to `location` (through the 401 → @qm_redirect named location). */
function redirect(r, location, setCookie) {
    r.headersOut['X-QM-Location'] = location;
    if (setCookie) {
        r.headersOut['X-QM-Set-Cookie'] = setCookie;
    }
    // A body, so nginx answers this status as it is: an error_page 401 inherited from the
    // server block would otherwise catch it inside the subrequest.
    r.return(401, 'redirect');
}

/** js_content of the internal door-check location. */
async function check(r) {
    var config = {
        server: setting(r, 'qm_server', '').replace(/\/+$/, ''),
        room: setting(r, 'qm_room', ''),
        apiKey: setting(r, 'qm_api_key', ''),
        failMode: setting(r, 'qm_fail_mode', 'open') === 'closed' ? 'closed' : 'open',
    };
    if (!config.server || !config.room) {
        failed(r, config, '$qm_server and $qm_room must be set');
        return;
    }
    var page = visitedPage(r);
    var key = cookie(r, 'qm_dk_' + config.room);
    var dropped = false;
    var answer;
    try {
        answer = await askWithFallback(r, config, page.url, page.token, key);
        if (answer.status === 400 && answer.body && answer.body.code === 'invalid_session') {
            // A key this server never issues: drop it and ask again with what is left.
            dropped = true;
            key = '';
            answer = await askWithFallback(r, config, page.url, page.token, '');
        }
    } catch (e) {
        failed(r, config, 'unreachable: ' + e);
        return;
    }
    var body = answer.body;
    if (answer.status !== 200 || !body || typeof body.action !== 'string') {
        var code = body && body.code ? body.code : 'not a door-check answer';
        failed(r, config, 'HTTP ' + answer.status + ' ' + code);
        return;
    }
    if (body.action === 'queue') {
        // A dead key (clearToken) is expired so the visitor does not present it again.
        var clear = body.clearToken === true || dropped;
        redirect(r, waitingRoom(config.server, body.waitingRoomUrl, page.url),
            clear ? keyCookie(r, config.room, '') : '');
        return;
    }
    if (body.sess) {
        // The pass became a door session: keep its key in the cookie and take the pass out of
        // the address bar (a copied link must not carry it).
        redirect(r, page.url, keyCookie(r, config.room, body.sess));
        return;
    }
    r.return(204);
}

export default {check: check, version: VERSION};
