// The console's session: signing in with the admin key, an operator key or a monitor token
// (POST /api/admin/session, whose HttpOnly cookie this script never reads; the answer names
// who signed in and their role), signing out, noticing a session that ended elsewhere, and the
// first question at load (GET /api/admin/session) of whether this browser is signed in. A
// shared monitor link (`#monitor=<token>`) signs in read-only with the token from the URL
// fragment, which no browser sends to a server; the page takes it out of the address bar
// before anything else and sends it only in the sign-in body.
'use strict';

window.QMConsoleSession = (() => {
  const CHART_REFRESH_MS = 5000;
  const SESSION_CHECK_MS = 30000;

  const { root, $, state, api, describe, onSessionEnded, setStatus } = window.QMConsoleCore;
  const Access = window.QMConsoleAccess;
  const { resetRooms, refreshChart } = window.QMConsoleRooms;
  const { startStream, stopStream, pollRooms } = window.QMConsoleStream;

  function showSignIn(notice) {
    state.signedIn = false;
    hint(false);
    monitorHint(false);
    Access.clearPrincipal();
    stopStream();
    root.dataset.console = 'signed-out';
    $('#app').hidden = true;
    $('#signin-view').hidden = false;
    const noticeElement = $('#signin-notice');
    noticeElement.textContent = notice || '';
    noticeElement.hidden = !notice;
    $('#signin-error').textContent = '';
    const key = $('#signin-key');
    key.value = '';
    key.removeAttribute('aria-invalid');
    key.focus();
  }

  /** `who` is the server's {name, role, …} of the signed-in principal. */
  function showApp(who, monitor) {
    Access.setPrincipal(who, monitor);
    state.signedIn = true;
    hint(true);
    root.dataset.console = 'ready';
    $('#signin-view').hidden = true;
    $('#app').hidden = false;
    $('#signin-key').value = '';
    startStream();
    clearInterval(state.chartTimer);
    state.chartTimer = setInterval(refreshChart, CHART_REFRESH_MS);
    // An open stream does not notice a session revoked elsewhere; a light check every 30 s does
    // (api() returns to the sign-in form on its 401).
    clearInterval(state.sessionTimer);
    state.sessionTimer = setInterval(() => {
      api('GET', '/session').catch(() => {});
    }, SESSION_CHECK_MS);
    // The list straight away, before the stream's first frame arrives.
    pollRooms();
    refreshChart();
  }

  function sessionEnded() {
    if (!state.signedIn) return;
    resetRooms();
    showSignIn('Your console session ended: it expired, was signed out elsewhere, the key or share link it signed in with was revoked, or the admin process restarted. Sign in again to carry on.');
  }

  onSessionEnded(sessionEnded);

  async function signIn(event) {
    event.preventDefault();
    const key = $('#signin-key');
    const error = $('#signin-error');
    const button = $('#signin button[type=submit]');
    error.textContent = '';
    key.removeAttribute('aria-invalid');
    if (!key.value) {
      error.textContent = 'Enter the admin key.';
      key.setAttribute('aria-invalid', 'true');
      key.focus();
      return;
    }
    button.disabled = true;
    try {
      const monitor = key.value.startsWith('qmm_');
      const who = await api('POST', '/session', { key: key.value });
      key.value = '';
      $('#signin-notice').hidden = true;
      monitorHint(monitor);
      showApp(who, monitor);
      setStatus('Signed in as ' + (who.name || 'unknown') + ' (' + (monitor ? 'shared view, read only' : who.role) + ').', 'ok');
      const first = $('#rooms-heading');
      if (first) first.focus();
    } catch (failure) {
      key.setAttribute('aria-invalid', 'true');
      error.textContent = signInRefusal(failure);
      key.select();
    } finally {
      button.disabled = false;
    }
  }

  function signInRefusal(failure) {
    if (failure.status === 401) return 'This server does not accept that key: it is not the admin key, nor a live operator key or monitor token (a revoked one stops working at once).';
    if (failure.code === 'too_many_auth_failures') return 'Too many wrong keys from this address: sign-in is locked for now, whatever key is typed. ' + failure.message;
    return 'Sign-in failed: ' + describe(failure);
  }

  async function signOut() {
    const button = $('#signout');
    button.disabled = true;
    try {
      await api('DELETE', '/session');
    } catch (failure) {
      // The session is gone either way for this page; say what the server said.
      if (failure.status !== 401) setStatus('Sign-out: ' + describe(failure), 'error');
    } finally {
      button.disabled = false;
    }
    resetRooms();
    showSignIn('You are signed out.');
  }

  // Whether this browser signed in last time. It holds no secret, only spares a signed-out
  // browser the 401 of asking; the server's answer is what counts whenever it is asked.
  const HINT = 'qm_console_signed_in';

  function hint(on) {
    try {
      if (on) localStorage.setItem(HINT, '1');
      else localStorage.removeItem(HINT);
    } catch (_) {
      // Storage can be off; the page then asks the server every time.
    }
  }

  // Whether this tab signed in from a share link, in case the server's answer does not say.
  const MONITOR_HINT = 'qm_console_monitor';

  function monitorHint(on) {
    try {
      if (on) sessionStorage.setItem(MONITOR_HINT, '1');
      else sessionStorage.removeItem(MONITOR_HINT);
    } catch (_) {
      // Storage can be off; the server's role then decides alone.
    }
  }

  function monitorHinted() {
    try {
      return sessionStorage.getItem(MONITOR_HINT) !== null;
    } catch (_) {
      return false;
    }
  }

  /** The token of a `#monitor=<token>` link, taken out of the address bar at once. */
  function takeMonitorToken() {
    const match = /^#monitor=([^&]+)/.exec(window.location.hash || '');
    if (!match) return null;
    history.replaceState(null, '', window.location.pathname + window.location.search);
    try {
      return decodeURIComponent(match[1]);
    } catch (_) {
      return match[1];
    }
  }

  async function openSharedView(token) {
    try {
      const who = await api('POST', '/session', { key: token });
      monitorHint(true);
      showApp(who, true);
      setStatus('Shared view: read only.', 'ok');
    } catch (failure) {
      showSignIn(failure.status === 401
        ? 'This share link no longer works: it was revoked or has expired. Ask whoever shared it for a new one.'
        : 'The share link could not be opened: ' + signInRefusal(failure));
    }
  }

  function hinted() {
    try {
      return localStorage.getItem(HINT) !== null;
    } catch (_) {
      return true;
    }
  }

  async function boot() {
    const token = takeMonitorToken();
    if (token) {
      await openSharedView(token);
      return;
    }
    if (!hinted()) {
      showSignIn('');
      return;
    }
    try {
      const who = await api('GET', '/session');
      showApp(who, monitorHinted());
    } catch (failure) {
      if (failure.status === 401) {
        showSignIn('');
      } else {
        showSignIn('The admin server could not be asked whether this browser is signed in: ' + describe(failure));
      }
    }
  }

  // A share link opened in a tab already showing the console changes only the fragment, which
  // reloads nothing: the page notices and signs in with it the same way.
  window.addEventListener('hashchange', () => {
    const token = takeMonitorToken();
    if (token) openSharedView(token);
  });

  return { signIn, signOut, boot };
})();
