// What every part of the operator console shares: the page's state, the one call to the admin
// API (a refusal becomes an ApiFailure with the server's text and code), the status line, the
// dialogs' focus bookkeeping, and the words numbers and times are put in.
//
// The console's other scripts (console-rooms.js, console-stream.js, console-session.js,
// console-controls.js, console.js) load after this one and read what it returns below.
'use strict';

window.QMConsoleCore = (() => {
  const API = '/api/admin';
  const CSRF = { 'X-QM-CSRF': '1' };

  const root = document.documentElement;
  const $ = (selector, scope) => (scope || document).querySelector(selector);
  const $$ = (selector, scope) => Array.from((scope || document).querySelectorAll(selector));
  const numberFormat = new Intl.NumberFormat();
  const people = (count) => fmt(count) + (count === 1 ? ' person' : ' people');
  const fmt = (value) => (typeof value === 'number' && Number.isFinite(value) ? numberFormat.format(value) : '–');

  /** Server defaults of a new room's optional fields, rendered into the page by the server. */
  const defaults = (() => {
    try {
      return JSON.parse($('#qm-console-defaults').textContent || '{}');
    } catch (_) {
      return {};
    }
  })();

  const state = {
    signedIn: false,
    /** Rooms in server order (creation order), as the last frame or reply left them. */
    rooms: [],
    /** id → [{t, w}] waiting counts measured by the stream, newest last. */
    history: new Map(),
    /** Header sparkline, straight from the frame's own `sparkline`. */
    totalsSpark: null,
    selected: null,
    range: '5m',
    filter: '',
    /** Server clock minus this device's clock, from the frames' `now`. */
    clockOffset: 0,
    source: null,
    attempt: 0,
    reconnectTimer: 0,
    pollTimer: 0,
    chartTimer: 0,
    sessionTimer: 0,
    chartBusy: false,
    chartAgain: false,
    statusTimer: 0,
    editing: null,
    scheduling: null,
    lastMetrics: null,
  };

  // ---------------------------------------------------------------------------------------
  // Talking to the server

  class ApiFailure extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }

  /** What a 401 in the middle of use does; console-session.js sets it (back to the sign-in form). */
  let sessionEnded = () => {};

  function onSessionEnded(callback) {
    sessionEnded = callback;
  }

  /** One admin call. Non-2xx becomes an ApiFailure carrying the body's error text and code. */
  async function api(method, path, body) {
    const headers = Object.assign({ Accept: 'application/json' }, CSRF);
    const init = { method, headers, credentials: 'same-origin', cache: 'no-store' };
    if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    let response;
    try {
      response = await fetch(API + path, init);
    } catch (_) {
      throw new ApiFailure(0, 'network', 'the admin server did not answer; check that it is running and reachable');
    }
    let data = null;
    try {
      data = await response.json();
    } catch (_) {
      data = null;
    }
    if (!response.ok) {
      const code = (data && data.code) || 'http_' + response.status;
      const message = (data && data.error) || 'the server answered ' + response.status;
      const failure = new ApiFailure(response.status, code, message);
      if (response.status === 401 && state.signedIn && !(path === '/session' && method === 'POST')) {
        sessionEnded();
      }
      throw failure;
    }
    return data || {};
  }

  function describe(error) {
    if (error instanceof ApiFailure) {
      return error.code === 'network' ? error.message : error.message + ' (' + error.code + ')';
    }
    return String(error && error.message ? error.message : error);
  }

  // ---------------------------------------------------------------------------------------
  // Status line

  function setStatus(text, kind) {
    const status = $('#console-status');
    clearTimeout(state.statusTimer);
    status.textContent = text;
    status.dataset.kind = kind || 'info';
    if (kind === 'ok') {
      // Confirmations step aside after a while; errors stay until the next action.
      state.statusTimer = setTimeout(() => {
        if (status.textContent === text) status.textContent = '';
      }, 12000);
    }
  }

  /** Disables `control` (a button, or null for none) while `work` runs. */
  async function withBusy(control, work) {
    const buttons = control ? [control] : [];
    for (const button of buttons) button.disabled = true;
    try {
      await work();
    } finally {
      for (const button of buttons) button.disabled = false;
    }
  }

  // ---------------------------------------------------------------------------------------
  // Rooms as held, and how their figures read

  function roomById(id) {
    return state.rooms.find((room) => room.id === id) || null;
  }

  function cardOf(id) {
    return $$('#rooms > li').find((card) => card.dataset.roomId === id) || null;
  }

  function rateOf(room) {
    return typeof room.ratePerMinute === 'number' ? room.ratePerMinute : room.rate;
  }

  function duration(seconds) {
    if (typeof seconds !== 'number' || !Number.isFinite(seconds)) return '–';
    const s = Math.max(0, Math.round(seconds));
    if (s < 60) return s + ' s';
    if (s < 3600) return Math.round(s / 60) + ' min';
    if (s >= 172800) return Math.round(s / 86400) + ' days';
    const hours = Math.floor(s / 3600);
    const minutes = Math.round((s % 3600) / 60);
    return hours + ' h' + (minutes ? ' ' + minutes + ' min' : '');
  }

  function localTime(ms, withSeconds) {
    const options = { dateStyle: 'medium', timeStyle: withSeconds ? 'medium' : 'short' };
    return new Date(ms).toLocaleString(undefined, options);
  }

  // ---------------------------------------------------------------------------------------
  // Dialogs: focus goes back to whatever opened one

  const openers = new WeakMap();

  function openDialog(dialog) {
    openers.set(dialog, document.activeElement);
    if (!dialog.open) dialog.showModal();
  }

  function restoreFocus(dialog) {
    const opener = openers.get(dialog);
    if (opener && document.contains(opener) && typeof opener.focus === 'function') opener.focus();
  }

  return {
    API, root, $, $$, fmt, people, defaults, state,
    api, describe, onSessionEnded, setStatus, withBusy,
    roomById, cardOf, rateOf, duration, localTime,
    openDialog, restoreFocus,
  };
})();
