// The console's session: signing in with the admin key (POST /api/admin/session, whose HttpOnly
// cookie this script never reads), signing out, noticing a session that ended elsewhere, and the
// first question at load (GET /api/admin/session) of whether this browser is signed in.
'use strict';

window.QMConsoleSession = (() => {
  const CHART_REFRESH_MS = 5000;
  const SESSION_CHECK_MS = 30000;

  const { root, $, state, api, describe, onSessionEnded, setStatus } = window.QMConsoleCore;
  const { resetRooms, refreshChart } = window.QMConsoleRooms;
  const { startStream, stopStream, pollRooms } = window.QMConsoleStream;

  function showSignIn(notice) {
    state.signedIn = false;
    hint(false);
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

  function showApp() {
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
    showSignIn('Your console session ended: it expired, was signed out elsewhere, or the admin process restarted. Sign in again to carry on.');
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
      await api('POST', '/session', { key: key.value });
      key.value = '';
      $('#signin-notice').hidden = true;
      showApp();
      setStatus('Signed in.', 'ok');
      const first = $('#new-room');
      if (first) first.focus();
    } catch (failure) {
      key.setAttribute('aria-invalid', 'true');
      error.textContent = failure.status === 401
        ? 'That key is not the admin key of this server.'
        : 'Sign-in failed: ' + describe(failure);
      key.select();
    } finally {
      button.disabled = false;
    }
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

  function hinted() {
    try {
      return localStorage.getItem(HINT) !== null;
    } catch (_) {
      return true;
    }
  }

  async function boot() {
    if (!hinted()) {
      showSignIn('');
      return;
    }
    try {
      await api('GET', '/session');
      showApp();
    } catch (failure) {
      if (failure.status === 401) {
        showSignIn('');
      } else {
        showSignIn('The admin server could not be asked whether this browser is signed in: ' + describe(failure));
      }
    }
  }

  return { signIn, signOut, boot };
})();
