// The operator console: sign-in, the live rooms list from /api/admin/events, a depth and flow
// chart from /api/admin/metrics, per-room controls and the create/edit form.
//
// Every figure on screen is one the server measured: the sparklines are the waiting counts this
// page received from the stream (one per 2 s tick), the chart is the engine's own 10 s samples.
// Nothing is interpolated or invented; a gap in the stream is a gap in the line.
//
// The page runs under `default-src 'self'` with no inline script or style: markup lives in
// console.html, colours in console.css, and this file only sets text, attributes and classes.
'use strict';

(() => {
  const API = '/api/admin';
  const CSRF = { 'X-QM-CSRF': '1' };
  const SPARK_WINDOW_MS = 120000;
  /** Two stream ticks are 2 s apart; more than 5 s between measurements is a gap. */
  const SPARK_GAP_MS = 5000;
  const SURGE_WINDOW_MS = 60000;
  const SURGE_MIN_GROWTH = 10;
  const SURGE_MIN_RATIO = 0.2;
  const LONG_WAIT_SEC = 600;
  const CHART_REFRESH_MS = 5000;
  const POLL_MS = 5000;
  const SESSION_CHECK_MS = 30000;
  const RANGES = { '5m': 300000, '15m': 900000, '30m': 1800000, '1h': 3600000 };
  const SVG_NS = 'http://www.w3.org/2000/svg';

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

  // ---------------------------------------------------------------------------------------
  // Sign-in and sign-out

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

  function resetRooms() {
    state.rooms = [];
    state.history.clear();
    state.selected = null;
    $('#rooms').textContent = '';
    drawChart(null);
  }

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

  // ---------------------------------------------------------------------------------------
  // The live stream: full frames, delta frames, reconnect with back-off

  function setConnection(kind, text) {
    const pill = $('#connection');
    pill.dataset.state = kind;
    pill.textContent = text;
    root.dataset.qmConnection = kind;
  }

  function stopStream() {
    clearTimeout(state.reconnectTimer);
    clearInterval(state.pollTimer);
    clearInterval(state.chartTimer);
    clearInterval(state.sessionTimer);
    state.pollTimer = 0;
    if (state.source) {
      state.source.close();
      state.source = null;
    }
  }

  function startStream() {
    stopStream();
    state.attempt = 0;
    connect();
  }

  async function connect() {
    if (!state.signedIn) return;
    setConnection(state.attempt === 0 ? 'connecting' : 'reconnecting', state.attempt === 0 ? 'Connecting…' : 'Reconnecting…');
    let ticket;
    try {
      ticket = (await api('POST', '/sse-ticket')).ticket;
    } catch (failure) {
      if (failure.status === 401) return;
      scheduleReconnect();
      return;
    }
    if (!state.signedIn) return;
    const source = new EventSource(API + '/events?ticket=' + encodeURIComponent(ticket));
    state.source = source;
    // Per connection: a delta is only meaningful on top of this connection's full frame.
    let fullSeen = false;
    source.addEventListener('stats', (event) => {
      if (state.source !== source) return;
      let frame;
      try {
        frame = JSON.parse(event.data);
      } catch (_) {
        resync(source);
        return;
      }
      if (frame.delta === true) {
        if (!fullSeen) {
          resync(source);
          return;
        }
        applyDelta(frame.rooms || [], frame.removed || []);
      } else {
        fullSeen = true;
        state.rooms = (frame.rooms || []).slice();
      }
      state.attempt = 0;
      clearInterval(state.pollTimer);
      state.pollTimer = 0;
      setConnection('live', 'Live');
      onFrame(frame);
    });
    source.addEventListener('unavailable', (event) => {
      if (state.source !== source) return;
      let reason = '';
      try {
        const body = JSON.parse(event.data);
        reason = body.error + ' (' + body.code + ')';
      } catch (_) {
        reason = 'no reason given';
      }
      setConnection('unavailable', 'Engine not answering');
      setStatus('The engine did not answer this tick: ' + reason + '. The figures shown are the last ones received.', 'error');
    });
    source.onerror = () => {
      if (state.source !== source) return;
      source.close();
      state.source = null;
      scheduleReconnect();
    };
  }

  /** A delta with no full frame under it: the only fix is a new connection (a new full frame). */
  function resync(source) {
    source.close();
    if (state.source === source) state.source = null;
    connect();
  }

  function scheduleReconnect() {
    if (!state.signedIn) return;
    state.attempt += 1;
    // 1, 2, 4 … 30 s, with jitter so a restarted admin process is not hit by every console at once.
    const base = Math.min(30000, 1000 * 2 ** Math.min(state.attempt - 1, 5));
    const delay = Math.round(base * (0.75 + Math.random() * 0.5));
    setConnection('reconnecting', 'Reconnecting… (next try in ' + Math.ceil(delay / 1000) + ' s)');
    clearTimeout(state.reconnectTimer);
    state.reconnectTimer = setTimeout(connect, delay);
    // Meanwhile the list is kept current by plain reads.
    if (!state.pollTimer) state.pollTimer = setInterval(pollRooms, POLL_MS);
  }

  async function pollRooms() {
    try {
      const reply = await api('GET', '/rooms');
      if (state.source && root.dataset.qmConnection === 'live') return;
      state.rooms = reply.rooms || [];
      renderRooms();
    } catch (failure) {
      if (failure.status !== 401) setStatus('Could not read the rooms: ' + describe(failure), 'error');
    }
  }

  function applyDelta(changed, removed) {
    const gone = new Set(removed);
    const rooms = state.rooms.filter((room) => !gone.has(room.id));
    for (const room of changed) {
      const index = rooms.findIndex((held) => held.id === room.id);
      if (index >= 0) rooms[index] = room;
      else rooms.push(room);
    }
    state.rooms = rooms;
  }

  function onFrame(frame) {
    const now = typeof frame.now === 'number' ? frame.now : Date.now();
    state.clockOffset = now - Date.now();
    // Every held room's waiting count is a measurement at `now`: a room absent from a delta is
    // unchanged, by the stream's own definition.
    const ids = new Set();
    for (const room of state.rooms) {
      ids.add(room.id);
      let points = state.history.get(room.id);
      if (!points) {
        points = [];
        state.history.set(room.id, points);
      }
      points.push({ t: now, w: Number(room.waiting) || 0 });
      while (points.length && points[0].t < now - SPARK_WINDOW_MS) points.shift();
    }
    for (const id of Array.from(state.history.keys())) {
      if (!ids.has(id)) state.history.delete(id);
    }
    if (frame.totals) {
      $('#total-rooms').textContent = fmt(frame.totals.rooms);
      $('#total-waiting').textContent = fmt(frame.totals.waiting);
      $('#total-passed').textContent = fmt(frame.totals.passedLastMin);
    }
    if (frame.sparkline && Array.isArray(frame.sparkline.at)) {
      const spark = frame.sparkline;
      const points = spark.at.map((t, index) => ({ t, w: Number(spark.waiting[index]) || 0 }));
      drawSparkline($('#total-sparkline'), points, 'All rooms waiting');
    }
    renderRooms();
    const touched = frame.delta !== true || (frame.rooms || []).some((room) => room.id === state.selected);
    if (touched) refreshChart();
  }

  // ---------------------------------------------------------------------------------------
  // Rooms list

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

  /** Which badges a room earns, each with the measured numbers behind it. */
  function signals(room) {
    const out = [];
    const points = state.history.get(room.id) || [];
    if (points.length >= 2) {
      const last = points[points.length - 1];
      const first = points.find((point) => point.t >= last.t - SURGE_WINDOW_MS) || points[0];
      const growth = last.w - first.w;
      const span = last.t - first.t;
      if (span >= 10000 && growth >= SURGE_MIN_GROWTH && growth >= SURGE_MIN_RATIO * Math.max(first.w, 1)) {
        out.push({
          kind: 'surge',
          label: 'Surge +' + fmt(growth),
          why: 'Waiting grew from ' + fmt(first.w) + ' to ' + fmt(last.w) + ' in the last ' + Math.round(span / 1000) + ' s.',
        });
      }
    }
    const waiting = Number(room.waiting) || 0;
    if (waiting > 0 && room.estWaitSec === null && room.effectiveState !== 'scheduled') {
      out.push({
        kind: 'stalled',
        label: 'Not admitting',
        why: fmt(waiting) + ' waiting and nobody is being let in (state ' + room.state + ', rate ' + fmt(rateOf(room)) + ' / min).',
      });
    }
    if (typeof room.oldestWaitSec === 'number' && room.oldestWaitSec > LONG_WAIT_SEC) {
      out.push({
        kind: 'slow',
        label: 'Long wait',
        why: 'The oldest visitor in line has waited ' + duration(room.oldestWaitSec) + ' (over ' + duration(LONG_WAIT_SEC) + ').',
      });
    }
    return out;
  }

  function renderRooms() {
    const list = $('#rooms');
    const seen = new Set();
    let previous = null;
    for (const room of state.rooms) {
      seen.add(room.id);
      let card = cardOf(room.id);
      if (!card) card = createCard(room.id);
      // Move only when out of place: moving a node that holds focus would drop the focus.
      const wanted = previous ? previous.nextElementSibling : list.firstElementChild;
      if (wanted !== card) list.insertBefore(card, wanted);
      updateCard(card, room);
      previous = card;
    }
    for (const card of $$('#rooms > li')) {
      if (!seen.has(card.dataset.roomId)) card.remove();
    }
    const attention = $$('#rooms > li').filter((card) => seen.has(card.dataset.roomId) && card.dataset.surge).length;
    const attentionCell = $('#total-attention');
    attentionCell.textContent = fmt(attention);
    attentionCell.dataset.alert = attention > 0 ? 'true' : 'false';
    if (state.selected && !seen.has(state.selected)) state.selected = null;
    if (!state.selected && state.rooms.length) select(state.rooms[0].id, false);
    applyFilter();
  }

  function createCard(id) {
    const card = $('#room-template').content.firstElementChild.cloneNode(true);
    card.dataset.roomId = id;
    for (const form of $$('form', card)) form.noValidate = true;
    const labelled = 'room-' + id;
    card.setAttribute('aria-labelledby', labelled);
    $('.room-select', card).id = labelled;
    return card;
  }

  function updateCard(card, room) {
    $('.room-name', card).textContent = room.name || room.id;
    $('.room-id', card).textContent = room.id;
    const effective = room.effectiveState || room.state;
    const badge = $('.room-state', card);
    badge.textContent = effective;
    badge.className = 'badge room-state state-' + effective;
    badge.title = effective === 'scheduled'
      ? 'Doors still shut; the room will be ' + room.state + ' when they open.'
      : 'The room is ' + effective + '.';

    const badges = $('.room-badges', card);
    const found = signals(room);
    badges.textContent = '';
    for (const signal of found) {
      const element = document.createElement('span');
      element.className = 'badge ' + signal.kind;
      element.textContent = signal.label;
      element.title = signal.why;
      const text = document.createElement('span');
      text.className = 'visually-hidden';
      text.textContent = ': ' + signal.why;
      element.appendChild(text);
      badges.appendChild(element);
    }
    card.dataset.surge = found.length ? found[0].kind : '';

    const waiting = Number(room.waiting) || 0;
    $('.room-depth', card).textContent = fmt(waiting);
    $('.room-passed', card).textContent = fmt(room.passedLastMin);
    $('.room-oldest', card).textContent = waiting > 0 ? duration(room.oldestWaitSec) : '–';
    $('.room-rate', card).textContent = fmt(rateOf(room));
    const eta = $('.room-eta', card);
    if (room.estWaitSec === null || room.estWaitSec === undefined) {
      eta.textContent = waiting > 0 ? 'unbounded' : '–';
      eta.title = 'Nobody is being let in, so no honest estimate exists.';
    } else {
      eta.textContent = (room.estWaitFloor ? '≥ ' : '') + duration(room.estWaitSec);
      eta.title = 'The wait of a visitor joining now.';
    }
    const active = $('.room-active', card);
    active.textContent = fmt(room.activePasses) + (typeof room.maxConcurrent === 'number' ? ' / ' + fmt(room.maxConcurrent) : '');

    const schedule = $('.room-schedule', card);
    if (typeof room.opensAt === 'number') {
      const left = room.opensAt - (Date.now() + state.clockOffset);
      const when = left > 0 ? 'in ' + duration(left / 1000) : duration(-left / 1000) + ' ago';
      schedule.textContent = 'Doors open ' + localTime(room.opensAt) + ' (' + when + ') · '
        + fmt(room.preQueue || 0) + ' in the pre-queue · '
        + (typeof room.preQueueMaxPerIp === 'number' ? 'up to ' + fmt(room.preQueueMaxPerIp) + ' per address' : 'no per-address cap');
      schedule.hidden = false;
    } else {
      schedule.hidden = true;
    }

    const points = state.history.get(room.id) || [];
    drawSparkline($('svg.sparkline', card), points, 'Waiting in ' + (room.name || room.id));

    const stateSelect = $('select[name=state]', card);
    if (document.activeElement !== stateSelect && !stateSelect.dataset.busy) stateSelect.value = room.state;
    const rate = $('input[name=ratePerMinute]', card);
    if (document.activeElement !== rate && !rate.dataset.dirty) rate.value = String(rateOf(room));
    const selected = state.selected === room.id;
    card.setAttribute('aria-current', selected ? 'true' : 'false');
    $('.room-select', card).setAttribute('aria-pressed', selected ? 'true' : 'false');
  }

  function applyFilter() {
    const needle = state.filter.trim().toLowerCase();
    let shown = 0;
    for (const card of $$('#rooms > li')) {
      const room = roomById(card.dataset.roomId);
      const haystack = room ? (room.id + ' ' + (room.name || '')).toLowerCase() : '';
      const match = !needle || haystack.includes(needle);
      card.hidden = !match;
      if (match) shown += 1;
    }
    $('#rooms-empty').hidden = state.rooms.length !== 0;
    $('#rooms-none-match').hidden = !(state.rooms.length && shown === 0);
  }

  function select(id, focus) {
    const changed = state.selected !== id;
    state.selected = id;
    for (const card of $$('#rooms > li')) {
      const selected = card.dataset.roomId === id;
      card.setAttribute('aria-current', selected ? 'true' : 'false');
      $('.room-select', card).setAttribute('aria-pressed', selected ? 'true' : 'false');
    }
    const card = cardOf(id);
    if (focus && card) {
      $('.room-select', card).focus();
      card.scrollIntoView({ block: 'nearest' });
    }
    if (changed) refreshChart();
  }

  function moveSelection(step) {
    const cards = $$('#rooms > li').filter((card) => !card.hidden);
    if (!cards.length) return;
    const index = cards.findIndex((card) => card.dataset.roomId === state.selected);
    const next = index < 0 ? 0 : Math.min(cards.length - 1, Math.max(0, index + step));
    select(cards[next].dataset.roomId, true);
  }

  /** Puts a room from a control's reply on screen at once, before the next frame confirms it. */
  function acceptRoom(room) {
    if (!room || !room.id) return;
    const index = state.rooms.findIndex((held) => held.id === room.id);
    if (index >= 0) state.rooms[index] = Object.assign({}, state.rooms[index], room);
    else state.rooms.push(room);
    renderRooms();
  }

  // ---------------------------------------------------------------------------------------
  // Drawing

  function svg(name, attributes, parent) {
    const element = document.createElementNS(SVG_NS, name);
    for (const [key, value] of Object.entries(attributes || {})) element.setAttribute(key, String(value));
    if (parent) parent.appendChild(element);
    return element;
  }

  function drawSparkline(target, points, what) {
    target.textContent = '';
    const view = target.viewBox.baseVal;
    const width = view && view.width ? view.width : 120;
    const height = view && view.height ? view.height : 32;
    svg('line', { class: 'baseline', x1: 0, x2: width, y1: height - 0.5, y2: height - 0.5 }, target);
    if (!points.length) {
      target.setAttribute('aria-label', what + ': no measurements yet');
      return;
    }
    const last = points[points.length - 1].t;
    const start = last - SPARK_WINDOW_MS;
    const max = Math.max(1, ...points.map((point) => point.w));
    const x = (t) => ((t - start) / SPARK_WINDOW_MS) * width;
    const y = (w) => height - 1 - (w / max) * (height - 2);
    // A gap in the stream (a reconnect) is a gap in the line, never a bridge between two
    // measurements with none in between.
    for (const run of runs(points, SPARK_GAP_MS)) {
      const coordinates = run.map((point) => x(point.t).toFixed(1) + ',' + y(point.w).toFixed(1));
      if (run.length === 1) coordinates.unshift((x(run[0].t) - 2).toFixed(1) + ',' + y(run[0].w).toFixed(1));
      const first = coordinates[0].split(',')[0];
      const end = coordinates[coordinates.length - 1].split(',')[0];
      svg('polygon', { class: 'area', points: first + ',' + height + ' ' + coordinates.join(' ') + ' ' + end + ',' + height }, target);
      svg('polyline', { points: coordinates.join(' ') }, target);
    }
    const span = Math.round((last - points[0].t) / 1000);
    target.setAttribute('aria-label', what + ' over the last ' + span + ' s: from ' + fmt(points[0].w) + ' to '
      + fmt(points[points.length - 1].w) + ', highest ' + fmt(max) + '.');
  }

  /** Splits time-ordered points wherever two neighbours are more than `gap` ms apart. */
  function runs(points, gap) {
    const out = [];
    let current = [];
    for (const point of points) {
      if (current.length && point.t - current[current.length - 1].t > gap) {
        out.push(current);
        current = [];
      }
      current.push(point);
    }
    if (current.length) out.push(current);
    return out;
  }

  /** An axis of four equal whole-number steps of 1, 2 or 5 times a power of ten covering `value`. */
  function axisStep(value) {
    const raw = Math.max(1, value / 4);
    const power = 10 ** Math.floor(Math.log10(raw));
    for (const step of [1, 2, 5, 10]) {
      if (step * power >= raw) return step * power;
    }
    return 10 * power;
  }

  function clockLabel(ms, withSeconds) {
    const options = withSeconds
      ? { hour: '2-digit', minute: '2-digit', second: '2-digit' }
      : { hour: '2-digit', minute: '2-digit' };
    return new Date(ms).toLocaleTimeString(undefined, options);
  }

  function drawChart(metrics) {
    state.lastMetrics = metrics;
    const chart = $('#chart');
    for (const child of Array.from(chart.childNodes)) {
      if (child.nodeName !== 'title' && child.nodeName !== 'desc') child.remove();
    }
    const desc = $('#chart-desc');
    const summary = $('#chart-summary');
    const heading = $('#chart-heading');
    chart.dataset.updated = String(Date.now());
    if (!metrics) {
      chart.dataset.points = '0';
      chart.removeAttribute('data-room-id');
      heading.textContent = state.rooms.length ? 'Select a room' : 'No room to chart yet';
      desc.textContent = 'No room selected.';
      svg('text', { x: 320, y: 140, 'text-anchor': 'middle', class: 'empty-note' }, chart).textContent = 'Select a room to see its line and flow.';
      return;
    }
    const room = roomById(metrics.roomId);
    heading.textContent = (room ? room.name || room.id : metrics.roomId) + ' · depth and flow';
    const points = metrics.points || [];
    chart.dataset.points = String(points.length);
    chart.dataset.roomId = metrics.roomId;

    // The drawing is as wide as the panel, so labels keep their size on a phone.
    const width = Math.max(300, Math.round(chart.clientWidth || 640));
    const height = width < 480 ? 190 : 260;
    chart.setAttribute('viewBox', '0 0 ' + width + ' ' + height);
    const left = 46;
    const right = 46;
    const top = 12;
    const bottom = 28;
    const plotWidth = width - left - right;
    const plotHeight = height - top - bottom;
    const rangeMs = RANGES[metrics.range] || RANGES['5m'];
    const end = typeof metrics.now === 'number' ? metrics.now : Date.now();
    // A room younger than the range is drawn over the time it has existed (at least 30 s),
    // so its first minutes are not a sliver at the right edge; the labels say which times.
    const firstSample = points.length ? points[0].t : end;
    const start = Math.max(end - rangeMs, Math.min(firstSample, end - 30000));
    const span = end - start;
    const x = (t) => left + ((t - start) / span) * plotWidth;
    const maxWaiting = 4 * axisStep(Math.max(0, ...points.map((point) => Number(point.waiting) || 0)));
    // The last point is the room "now", often taken a moment after the last 10 s sample; a
    // rate over such a sliver is noise (0 or a spike). So each point's flow is the change of the
    // engine's own counters (joinedTotal, passedTotal) since the latest point at least half a
    // step before it: the server's per-sample rate whenever samples are a step apart, and for
    // "now" the rate over the last real interval. The depth line keeps every point.
    const minInterval = ((metrics.stepSec || 10) * 1000) / 2;
    const perMinute = (later, earlier, elapsed) => Math.round((Math.max(0, later - earlier) * 600000) / elapsed) / 10;
    const flow = points.map((point, index) => {
      let before = index - 1;
      while (before >= 0 && point.t - points[before].t < minInterval) before -= 1;
      if (before < 0) return null;
      const earlier = points[before];
      const elapsed = point.t - earlier.t;
      if (typeof point.joinedTotal !== 'number' || typeof earlier.joinedTotal !== 'number') return null;
      return {
        t: point.t,
        from: earlier.t,
        joinsPerMin: perMinute(point.joinedTotal, earlier.joinedTotal, elapsed),
        passesPerMin: perMinute(point.passedTotal, earlier.passedTotal, elapsed),
      };
    });
    const rates = flow.filter(Boolean).flatMap((rate) => [rate.joinsPerMin, rate.passesPerMin]);
    const maxRate = 4 * axisStep(Math.max(0, ...rates));
    const yDepth = (value) => top + plotHeight - (value / maxWaiting) * plotHeight;
    const yRate = (value) => top + plotHeight - (value / maxRate) * plotHeight;

    // Grid and the two value axes.
    for (let step = 0; step <= 4; step += 1) {
      const y = top + plotHeight - (step / 4) * plotHeight;
      svg('line', { x1: left, x2: width - right, y1: y, y2: y, class: 'grid-line' }, chart);
      svg('text', { x: left - 6, y: y + 4, 'text-anchor': 'end' }, chart).textContent = fmt((maxWaiting * step) / 4);
      svg('text', { x: width - right + 6, y: y + 4, 'text-anchor': 'start' }, chart).textContent = fmt((maxRate * step) / 4);
    }
    const withSeconds = span <= RANGES['5m'];
    // As many time labels as fit without touching: one per ~120 px, at least both ends.
    const labels = Math.max(2, Math.min(4, Math.floor(plotWidth / 120)));
    for (let step = 0; step <= labels; step += 1) {
      const t = start + (step / labels) * span;
      const anchor = step === 0 ? 'start' : step === labels ? 'end' : 'middle';
      svg('text', { x: x(t), y: height - 8, 'text-anchor': anchor }, chart).textContent = clockLabel(t, withSeconds);
    }
    svg('line', { x1: left, x2: left, y1: top, y2: top + plotHeight, class: 'axis' }, chart);
    svg('line', { x1: width - right, x2: width - right, y1: top, y2: top + plotHeight, class: 'axis' }, chart);
    svg('line', { x1: left, x2: width - right, y1: top + plotHeight, y2: top + plotHeight, class: 'axis' }, chart);

    if (!points.length) {
      svg('text', { x: left + plotWidth / 2, y: top + plotHeight / 2, 'text-anchor': 'middle', class: 'empty-note' }, chart)
        .textContent = 'No samples yet: the engine takes one every 10 s.';
      desc.textContent = 'No samples for ' + metrics.roomId + ' in the last ' + metrics.range + ' yet.';
      summary.textContent = 'No samples yet for this range. The engine samples each room every 10 s.';
      return;
    }

    // Samples missing for more than two steps (an engine restart) leave a gap in the line.
    const base = (top + plotHeight).toFixed(1);
    const gapMs = (metrics.stepSec || 10) * 1000 * 2.5;
    for (const run of runs(points, gapMs)) {
      const depth = run.map((point) => x(point.t).toFixed(1) + ',' + yDepth(Number(point.waiting) || 0).toFixed(1));
      const firstX = x(run[0].t).toFixed(1);
      const lastX = x(run[run.length - 1].t).toFixed(1);
      svg('polygon', { class: 'depth-area', points: firstX + ',' + base + ' ' + depth.join(' ') + ' ' + lastX + ',' + base }, chart);
      if (run.length === 1) svg('circle', { class: 'depth', cx: firstX, cy: depth[0].split(',')[1], r: 2.5 }, chart);
      else svg('polyline', { class: 'depth', points: depth.join(' ') }, chart);
    }
    for (const [key, className] of [['joinsPerMin', 'joins'], ['passesPerMin', 'passes']]) {
      // A point with no flow (the first sample) is left out rather than drawn as 0.
      let segment = [];
      const flush = () => {
        if (segment.length > 1) svg('polyline', { class: className, points: segment.join(' ') }, chart);
        else if (segment.length === 1) {
          const [px, py] = segment[0].split(',');
          svg('circle', { cx: px, cy: py, r: 2, class: className }, chart);
        }
        segment = [];
      };
      let previousT = null;
      for (const rate of flow) {
        if (!rate) continue;
        // A rate measured across a gap in the samples starts a new line.
        if (previousT !== null && rate.t - previousT > gapMs) flush();
        previousT = rate.t;
        segment.push(x(rate.t).toFixed(1) + ',' + yRate(rate[key]).toFixed(1));
      }
      flush();
    }
    const last = points[points.length - 1];
    const lastRated = flow.filter(Boolean).pop() || {};
    const peak = Math.max(...points.map((point) => Number(point.waiting) || 0));
    const rate = (value) => (typeof value === 'number' ? fmt(value) + ' / min' : 'not measured yet');
    const over = lastRated.t ? ' over the last ' + Math.round((lastRated.t - lastRated.from) / 1000) + ' s' : '';
    const text = 'At ' + clockLabel(last.t, true) + ': ' + fmt(last.waiting) + ' waiting; joins ' + rate(lastRated.joinsPerMin)
      + ', passes ' + rate(lastRated.passesPerMin) + over + '. Most waiting '
      + (span < rangeMs ? 'since ' + clockLabel(points[0].t, true) : 'in the last ' + metrics.range) + ': ' + fmt(peak)
      + ' (' + points.length + ' samples, one every ' + (metrics.stepSec || 10) + ' s).';
    desc.textContent = (room ? room.name || room.id : metrics.roomId) + ', last ' + metrics.range + '. ' + text;
    summary.textContent = text;
  }

  async function refreshChart() {
    if (!state.signedIn) return;
    if (!state.selected) {
      drawChart(null);
      return;
    }
    if (state.chartBusy) {
      state.chartAgain = true;
      return;
    }
    state.chartBusy = true;
    const id = state.selected;
    const range = state.range;
    try {
      const metrics = await api('GET', '/metrics?roomId=' + encodeURIComponent(id) + '&range=' + encodeURIComponent(range));
      if (state.selected === id && state.range === range) drawChart(metrics);
    } catch (failure) {
      if (failure.status !== 401 && state.selected === id) {
        $('#chart-summary').textContent = 'The chart could not be read: ' + describe(failure);
      }
    } finally {
      state.chartBusy = false;
      if (state.chartAgain) {
        state.chartAgain = false;
        refreshChart();
      }
    }
  }

  function setRange(range) {
    if (!RANGES[range]) return;
    state.range = range;
    for (const button of $$('.ranges button')) {
      button.setAttribute('aria-pressed', button.dataset.range === range ? 'true' : 'false');
    }
    refreshChart();
  }

  // ---------------------------------------------------------------------------------------
  // Per-room controls

  async function withBusy(control, work) {
    const buttons = control ? [control] : [];
    for (const button of buttons) button.disabled = true;
    try {
      await work();
    } finally {
      for (const button of buttons) button.disabled = false;
    }
  }

  function wholeNumber(input) {
    if (input.validity && input.validity.badInput) return input.value;
    if (input.value.trim() === '') return null;
    const number = Number(input.value);
    return Number.isFinite(number) ? number : input.value;
  }

  async function changeState(card, select) {
    const id = card.dataset.roomId;
    select.dataset.busy = '1';
    try {
      const reply = await api('POST', '/rooms/' + encodeURIComponent(id) + '/state', { state: select.value });
      acceptRoom(reply.room);
      setStatus('Room ' + id + ' is now ' + reply.room.state + '.', 'ok');
    } catch (failure) {
      const room = roomById(id);
      if (room) select.value = room.state;
      setStatus('The state of ' + id + ' did not change: ' + describe(failure), 'error');
    } finally {
      delete select.dataset.busy;
    }
  }

  async function setRate(card, button) {
    const id = card.dataset.roomId;
    const input = $('input[name=ratePerMinute]', card);
    await withBusy(button, async () => {
      try {
        const reply = await api('POST', '/rooms/' + encodeURIComponent(id) + '/rate', { ratePerMinute: wholeNumber(input) });
        delete input.dataset.dirty;
        input.removeAttribute('aria-invalid');
        acceptRoom(reply.room);
        input.value = String(rateOf(reply.room));
        setStatus('Room ' + id + ' now lets in ' + people(rateOf(reply.room)) + ' a minute.', 'ok');
      } catch (failure) {
        input.setAttribute('aria-invalid', 'true');
        setStatus('The rate of ' + id + ' did not change: ' + describe(failure), 'error');
        input.focus();
      }
    });
  }

  async function flush(card, button) {
    const id = card.dataset.roomId;
    const input = $('input[name=count]', card);
    await withBusy(button, async () => {
      try {
        const reply = await api('POST', '/rooms/' + encodeURIComponent(id) + '/flush', { count: wholeNumber(input) });
        input.removeAttribute('aria-invalid');
        acceptRoom(reply.room);
        setStatus('Let ' + people(reply.promoted) + ' into ' + id + ' now.', 'ok');
      } catch (failure) {
        input.setAttribute('aria-invalid', 'true');
        setStatus('Nobody was let into ' + id + ': ' + describe(failure), 'error');
        input.focus();
      }
    });
  }

  async function eject(card, button) {
    const id = card.dataset.roomId;
    const input = $('input[name=ticket]', card);
    await withBusy(button, async () => {
      try {
        const reply = await api('POST', '/rooms/' + encodeURIComponent(id) + '/eject', { ticket: wholeNumber(input) });
        input.removeAttribute('aria-invalid');
        input.value = '';
        acceptRoom(reply.room);
        const what = reply.was === 'passed'
          ? 'its pass is revoked and its session dropped'
          : 'it was ' + reply.was;
        setStatus('Ticket ' + reply.ticket + ' in ' + id + ' is ejected (' + what + '); it goes to the back of the line.', 'ok');
      } catch (failure) {
        input.setAttribute('aria-invalid', 'true');
        setStatus('Nothing was ejected from ' + id + ': ' + describe(failure), 'error');
        input.focus();
      }
    });
  }

  function confirmAction(title, text, okLabel) {
    const dialog = $('#confirm');
    $('#confirm-title').textContent = title;
    $('#confirm-text').textContent = text;
    $('#confirm-ok').textContent = okLabel;
    dialog.returnValue = '';
    return new Promise((resolve) => {
      dialog.addEventListener('close', () => resolve(dialog.returnValue === 'confirm'), { once: true });
      openDialog(dialog);
      // The safe answer has the focus: Enter alone never destroys anything.
      $('button[value=cancel]', dialog).focus();
    });
  }

  async function purge(card, button) {
    const id = card.dataset.roomId;
    const room = roomById(id);
    const waiting = room ? people(Number(room.waiting) || 0) : 'all the people';
    const ok = await confirmAction('Purge the line of ' + id + '?',
      'The ' + waiting + ' waiting in ' + id + ' (and its pre-queue) are discarded without being let in. '
      + 'Their tickets read as expired. The room, its settings and its history stay.', 'Purge the line');
    if (!ok) {
      setStatus('Purge of ' + id + ' cancelled; nothing changed.', 'info');
      return;
    }
    await withBusy(button, async () => {
      try {
        const reply = await api('POST', '/rooms/' + encodeURIComponent(id) + '/purge', {});
        acceptRoom(reply.stats);
        setStatus('Purged ' + fmt(reply.purged) + (reply.purged === 1 ? ' ticket' : ' tickets') + ' from ' + id + ' (' + fmt(reply.preQueue) + ' of them from the pre-queue).', 'ok');
      } catch (failure) {
        setStatus('The line of ' + id + ' was not purged: ' + describe(failure), 'error');
      }
    });
  }

  async function deleteRoom(card, button) {
    const id = card.dataset.roomId;
    const ok = await confirmAction('Delete room ' + id + '?',
      'The room, its line, its settings and its history are removed. Visitors holding a place lose it. This cannot be undone.',
      'Delete the room');
    if (!ok) {
      setStatus('Room ' + id + ' kept; nothing changed.', 'info');
      return;
    }
    await withBusy(button, async () => {
      try {
        await api('DELETE', '/rooms/' + encodeURIComponent(id));
        state.rooms = state.rooms.filter((room) => room.id !== id);
        state.history.delete(id);
        renderRooms();
        setStatus('Room ' + id + ' deleted.', 'ok');
        const next = state.selected ? cardOf(state.selected) : null;
        if (next) $('.room-select', next).focus();
        else $('#new-room').focus();
      } catch (failure) {
        setStatus('Room ' + id + ' was not deleted: ' + describe(failure), 'error');
      }
    });
  }

  // ---------------------------------------------------------------------------------------
  // Dialogs

  const openers = new WeakMap();

  function openDialog(dialog) {
    openers.set(dialog, document.activeElement);
    if (!dialog.open) dialog.showModal();
  }

  function restoreFocus(dialog) {
    const opener = openers.get(dialog);
    if (opener && document.contains(opener) && typeof opener.focus === 'function') opener.focus();
  }

  function pad(number) {
    return String(number).padStart(2, '0');
  }

  /** Epoch ms as a datetime-local value in this device's time zone. */
  function toLocalInput(ms) {
    const date = new Date(ms);
    return date.getFullYear() + '-' + pad(date.getMonth() + 1) + '-' + pad(date.getDate()) + 'T'
      + pad(date.getHours()) + ':' + pad(date.getMinutes()) + ':' + pad(date.getSeconds());
  }

  /**
   * A datetime-local value (read as this device's local time) as the API's instant: an ISO
   * string, or the untouched original when the operator did not change the field, so a round
   * trip keeps milliseconds the input cannot show.
   */
  function fromLocalInput(input) {
    const value = input.value.trim();
    if (value === '') return null;
    const date = new Date(value);
    // Compared as instants: the browser may drop ":00" seconds from the value it hands back.
    const original = Number(input.dataset.original);
    if (input.dataset.original && date.getTime() === Math.floor(original / 1000) * 1000) return original;
    return Number.isNaN(date.getTime()) ? value : date.toISOString();
  }

  function zoneSentence() {
    let zone = '';
    try {
      zone = Intl.DateTimeFormat().resolvedOptions().timeZone || '';
    } catch (_) {
      zone = '';
    }
    return 'Times are in this device\'s time zone' + (zone ? ' (' + zone + ')' : '') + '.';
  }

  function openSchedule(card) {
    const id = card.dataset.roomId;
    const room = roomById(id);
    state.scheduling = id;
    const form = $('#schedule-form');
    clearErrors(form);
    $('#schedule-title').textContent = 'Schedule the drop of ' + id;
    $('#schedule-zone').textContent = zoneSentence();
    const opensAt = $('#schedule-opens-at');
    if (room && typeof room.opensAt === 'number') {
      opensAt.value = toLocalInput(room.opensAt);
      opensAt.dataset.original = String(room.opensAt);
    } else {
      opensAt.value = '';
      delete opensAt.dataset.original;
    }
    const cap = $('#schedule-cap');
    cap.value = room && typeof room.preQueueMaxPerIp === 'number' ? String(room.preQueueMaxPerIp) : '';
    $('#schedule-clear').disabled = !(room && typeof room.opensAt === 'number');
    openDialog($('#schedule-dialog'));
    opensAt.focus();
  }

  async function saveSchedule(body, button) {
    const id = state.scheduling;
    const form = $('#schedule-form');
    clearErrors(form);
    await withBusy(button, async () => {
      try {
        const reply = await api('POST', '/rooms/' + encodeURIComponent(id) + '/schedule', body);
        acceptRoom(reply.room);
        $('#schedule-dialog').close();
        const room = reply.room;
        setStatus(typeof room.opensAt === 'number'
          ? 'The doors of ' + id + ' open ' + localTime(room.opensAt, true) + '.'
          : 'Room ' + id + ' has no scheduled drop; it admits while active.', 'ok');
      } catch (failure) {
        const field = fieldOfError(failure) || 'opensAt';
        showFieldError(form, 'schedule.' + (field === 'preQueueMaxPerIp' ? 'preQueueMaxPerIp' : 'opensAt'), failure.message,
          field === 'preQueueMaxPerIp' ? $('#schedule-cap') : $('#schedule-opens-at'));
        setStatus('The schedule of ' + id + ' did not change: ' + describe(failure), 'error');
      }
    });
  }

  // ---------------------------------------------------------------------------------------
  // Create / edit form

  /** Which control an error is about: the message names the field ("ratePerMinute: …"). */
  const CODE_FIELDS = {
    invalid_room_id: 'id', invalid_name: 'name', invalid_target_url: 'targetUrl',
    invalid_proxy_origin: 'proxyOrigin', invalid_rate: 'ratePerMinute', conflicting_field: 'ratePerMinute',
    invalid_max_concurrent: 'maxConcurrent', invalid_passed_ttl_sec: 'passedTtlSec',
    invalid_session_ttl_sec: 'sessionTtlSec', invalid_session_max_sec: 'sessionMaxSec',
    invalid_branding: 'branding.title', invalid_return_origins: 'returnOrigins',
    invalid_tag_origins: 'tagOrigins', invalid_autotune: 'autotune.enabled',
    invalid_protection: 'protection.mode', invalid_auto_activate: 'autoActivate.enabled',
    invalid_url_pattern: 'urlPatterns', invalid_opens_at: 'opensAt',
    invalid_pre_queue_max_per_ip: 'preQueueMaxPerIp', invalid_queue_max_per_ip: 'queueMaxPerIp',
    invalid_presence_sec: 'presenceSec', invalid_state: 'state', invalid_on_backend_down: 'onBackendDown',
  };
  const GROUP_FIELDS = {
    branding: 'branding.title', autotune: 'autotune.enabled', protection: 'protection.mode',
    autoActivate: 'autoActivate.enabled', rate: 'ratePerMinute',
  };

  function fieldOfError(failure) {
    if (!(failure instanceof ApiFailure)) return null;
    const named = /^([A-Za-z]+(?:\.[A-Za-z]+)?)(?:\[\d+\])?: /.exec(failure.message)
      || /^([A-Za-z]+) is required/.exec(failure.message);
    if (named) return GROUP_FIELDS[named[1]] || named[1];
    return CODE_FIELDS[failure.code] || null;
  }

  function clearErrors(form) {
    for (const element of $$('[data-error-for]', form)) element.textContent = '';
    for (const control of $$('[aria-invalid]', form)) control.removeAttribute('aria-invalid');
  }

  function showFieldError(form, field, message, control) {
    const slot = $$('[data-error-for]', form).find((element) => element.dataset.errorFor === field);
    if (slot) slot.textContent = message;
    if (control) {
      control.setAttribute('aria-invalid', 'true');
      if (slot) {
        if (!slot.id) slot.id = 'error-' + field.replace(/[^A-Za-z0-9]/g, '-');
        const described = (control.getAttribute('aria-describedby') || '').split(' ').filter(Boolean);
        if (!described.includes(slot.id)) control.setAttribute('aria-describedby', described.concat(slot.id).join(' '));
      }
      const details = control.closest('details');
      if (details) details.open = true;
      control.focus();
    }
  }

  function control(form, name) {
    return form.elements.namedItem(name);
  }

  function setValue(form, name, value) {
    const element = control(form, name);
    if (!element) return;
    element.value = value === null || value === undefined ? '' : String(value);
  }

  function fillForm(form, room) {
    form.reset();
    for (const element of $$('input, select, textarea', form)) delete element.dataset.original;
    const r = room || {};
    setValue(form, 'id', r.id);
    setValue(form, 'name', r.name);
    setValue(form, 'targetUrl', r.targetUrl);
    setValue(form, 'ratePerMinute', room ? rateOf(room) : '');
    setValue(form, 'state', r.state || 'active');
    setValue(form, 'maxConcurrent', r.maxConcurrent);
    const opensAt = control(form, 'opensAt');
    if (typeof r.opensAt === 'number') {
      opensAt.value = toLocalInput(r.opensAt);
      opensAt.dataset.original = String(r.opensAt);
    }
    const fresh = !room;
    setValue(form, 'passedTtlSec', fresh ? defaults.passedTtlSec : r.passedTtlSec);
    setValue(form, 'sessionTtlSec', r.sessionTtlSec);
    setValue(form, 'sessionMaxSec', r.sessionMaxSec);
    setValue(form, 'presenceSec', fresh ? defaults.presenceSec : r.presenceSec);
    setValue(form, 'queueMaxPerIp', fresh ? defaults.queueMaxPerIp : r.queueMaxPerIp);
    setValue(form, 'preQueueMaxPerIp', fresh ? defaults.preQueueMaxPerIp : r.preQueueMaxPerIp);
    setValue(form, 'urlPatterns', (r.urlPatterns || []).join('\n'));
    setValue(form, 'returnOrigins', (r.returnOrigins || []).join('\n'));
    setValue(form, 'tagOrigins', (r.tagOrigins || []).join('\n'));
    setValue(form, 'proxyOrigin', r.proxyOrigin);
    setValue(form, 'onBackendDown', r.onBackendDown || 'closed');
    const branding = r.branding || {};
    for (const key of BRANDING_KEYS) setValue(form, 'branding.' + key, branding[key]);
    const autotune = r.autotune;
    setValue(form, 'autotune.enabled', autotune ? String(autotune.enabled) : '');
    setValue(form, 'autotune.minRate', autotune && autotune.minRate);
    setValue(form, 'autotune.maxRate', autotune && autotune.maxRate);
    setValue(form, 'autotune.targetP95Ms', autotune && autotune.targetP95Ms);
    setValue(form, 'protection.mode', r.protection ? r.protection.mode : '');
    const autoActivate = r.autoActivate;
    setValue(form, 'autoActivate.enabled', autoActivate ? String(autoActivate.enabled) : '');
    setValue(form, 'autoActivate.threshold', autoActivate && autoActivate.threshold);
  }

  const BRANDING_KEYS = ['title', 'logoUrl', 'primaryColor', 'accentColor', 'backgroundColor', 'textColor', 'message', 'supportText'];

  function lines(text) {
    return text.split('\n').map((line) => line.trim()).filter(Boolean);
  }

  /** The body the form stands for: the whole writable set (blank optional fields are null). */
  function formBody(form, original) {
    const text = (name) => control(form, name).value;
    const number = (name) => wholeNumber(control(form, name));
    const body = {};
    const id = text('id').trim();
    if (id !== '') body.id = id;
    const name = text('name').trim();
    if (name !== '' || original) body.name = name;
    const targetUrl = text('targetUrl').trim();
    if (targetUrl !== '' || original) body.targetUrl = targetUrl;
    const rate = number('ratePerMinute');
    if (rate !== null || original) body.ratePerMinute = rate;
    body.state = text('state');
    body.maxConcurrent = number('maxConcurrent');
    body.opensAt = fromLocalInput(control(form, 'opensAt'));
    const passedTtl = number('passedTtlSec');
    if (passedTtl !== null || original) body.passedTtlSec = passedTtl;
    for (const key of ['sessionTtlSec', 'sessionMaxSec', 'presenceSec', 'queueMaxPerIp', 'preQueueMaxPerIp']) {
      body[key] = number(key);
    }
    body.urlPatterns = lines(text('urlPatterns'));
    for (const key of ['returnOrigins', 'tagOrigins']) {
      const list = lines(text(key));
      // An empty box keeps whichever "nothing" the room had: null and [] differ for tagOrigins.
      body[key] = list.length ? list : (original && Array.isArray(original[key]) ? [] : null);
    }
    const proxy = text('proxyOrigin').trim();
    body.proxyOrigin = proxy === '' ? null : proxy;
    body.onBackendDown = text('onBackendDown');
    const branding = {};
    for (const key of BRANDING_KEYS) {
      const value = text('branding.' + key);
      if (value.trim() !== '') branding[key] = value;
    }
    body.branding = Object.keys(branding).length ? branding : (original && original.branding ? {} : null);
    const autotuneEnabled = text('autotune.enabled');
    if (autotuneEnabled === '') {
      body.autotune = null;
    } else {
      const autotune = { enabled: autotuneEnabled === 'true' };
      for (const key of ['minRate', 'maxRate', 'targetP95Ms']) {
        const value = number('autotune.' + key);
        if (value !== null) autotune[key] = value;
      }
      body.autotune = autotune;
    }
    const mode = text('protection.mode');
    body.protection = mode === '' ? null : { mode };
    const activateEnabled = text('autoActivate.enabled');
    body.autoActivate = activateEnabled === ''
      ? null
      : { enabled: activateEnabled === 'true', threshold: number('autoActivate.threshold') };
    return body;
  }

  function openCreate() {
    const form = $('#room-form');
    state.editing = null;
    clearErrors(form);
    fillForm(form, null);
    control(form, 'id').readOnly = false;
    for (const details of $$('details', form)) details.open = false;
    $('#room-form-title').textContent = 'New room';
    $('#room-form-submit').textContent = 'Create room';
    openDialog($('#room-dialog'));
    control(form, 'id').focus();
  }

  async function openEdit(id, button) {
    await withBusy(button, async () => {
      try {
        const reply = await api('GET', '/rooms/' + encodeURIComponent(id));
        const form = $('#room-form');
        state.editing = reply.room;
        clearErrors(form);
        fillForm(form, reply.room);
        control(form, 'id').readOnly = true;
        for (const details of $$('details', form)) details.open = false;
        $('#room-form-title').textContent = 'Edit ' + (reply.room.name || id);
        $('#room-form-submit').textContent = 'Save changes';
        openDialog($('#room-dialog'));
        control(form, 'name').focus();
      } catch (failure) {
        setStatus('Room ' + id + ' could not be read for editing: ' + describe(failure), 'error');
      }
    });
  }

  async function submitRoom(event) {
    event.preventDefault();
    const form = $('#room-form');
    const button = $('#room-form-submit');
    clearErrors(form);
    const original = state.editing;
    const bad = $$('input', form).find((input) => input.validity && input.validity.badInput);
    if (bad) {
      showFieldError(form, bad.name, bad.name + ': is not a number', bad);
      return;
    }
    const body = formBody(form, original);
    await withBusy(button, async () => {
      try {
        const reply = await api('POST', '/rooms', body);
        $('#room-dialog').close();
        acceptRoom(reply.room);
        select(reply.room.id, true);
        setStatus(reply.created ? 'Room ' + reply.room.id + ' created.' : 'Room ' + reply.room.id + ' saved.', 'ok');
      } catch (failure) {
        const field = fieldOfError(failure);
        const target = field ? control(form, field) : null;
        if (target) {
          showFieldError(form, field, failure.message, target);
        } else {
          showFieldError(form, '_form', failure.message + ' (' + failure.code + ')', null);
        }
        setStatus('The room was not saved: ' + describe(failure), 'error');
      }
    });
  }

  // ---------------------------------------------------------------------------------------
  // Wiring

  function typing(target) {
    if (!target || !target.closest) return false;
    return Boolean(target.closest('input, select, textarea, [contenteditable="true"]'));
  }

  function anyDialogOpen() {
    return $$('dialog').some((dialog) => dialog.open);
  }

  function onKey(event) {
    if (event.defaultPrevented || event.ctrlKey || event.metaKey || event.altKey) return;
    if (!state.signedIn || anyDialogOpen()) return;
    if (typing(event.target)) {
      if (event.key === 'Escape' && event.target.matches('#rooms input[name=ratePerMinute]')) {
        // Esc in a rate box abandons the edit: the box shows the room's rate again.
        const room = roomById(event.target.closest('li.room').dataset.roomId);
        delete event.target.dataset.dirty;
        event.target.removeAttribute('aria-invalid');
        if (room) event.target.value = String(rateOf(room));
        return;
      }
      if (event.key === 'Escape' && event.target.id === 'room-filter') {
        event.target.value = '';
        state.filter = '';
        applyFilter();
        event.target.blur();
      }
      return;
    }
    const selectedCard = state.selected ? cardOf(state.selected) : null;
    switch (event.key) {
      case '?':
        openDialog($('#shortcuts'));
        break;
      case '/':
        $('#room-filter').focus();
        break;
      case 'n':
        openCreate();
        break;
      case 'j':
        moveSelection(1);
        break;
      case 'k':
        moveSelection(-1);
        break;
      case 'e':
        if (!selectedCard) return;
        openEdit(state.selected, null);
        break;
      case 'r':
        if (!selectedCard) return;
        $('input[name=ratePerMinute]', selectedCard).focus();
        $('input[name=ratePerMinute]', selectedCard).select();
        break;
      case 's':
        if (!selectedCard) return;
        $('select[name=state]', selectedCard).focus();
        break;
      case '1': case '2': case '3': case '4':
        setRange(Object.keys(RANGES)[Number(event.key) - 1]);
        break;
      default:
        return;
    }
    event.preventDefault();
  }

  function wire() {
    $('#signin').addEventListener('submit', signIn);
    $('#signout').addEventListener('click', signOut);
    $('#new-room').addEventListener('click', openCreate);
    $('#open-shortcuts').addEventListener('click', () => openDialog($('#shortcuts')));
    $('#room-filter').addEventListener('input', (event) => {
      state.filter = event.target.value;
      applyFilter();
    });
    for (const button of $$('.ranges button')) {
      button.addEventListener('click', () => setRange(button.dataset.range));
    }
    const rooms = $('#rooms');
    rooms.addEventListener('click', (event) => {
      const card = event.target.closest('li.room');
      if (!card) return;
      const button = event.target.closest('button');
      if (button && button.classList.contains('room-select')) {
        select(card.dataset.roomId, false);
        return;
      }
      const action = button ? button.dataset.action : null;
      if (action === 'schedule') openSchedule(card);
      else if (action === 'edit') openEdit(card.dataset.roomId, button);
      else if (action === 'purge') purge(card, button);
      else if (action === 'delete') deleteRoom(card, button);
      else if (!button && !event.target.closest('input, select, label')) select(card.dataset.roomId, false);
    });
    rooms.addEventListener('submit', (event) => {
      event.preventDefault();
      const form = event.target;
      const card = form.closest('li.room');
      if (!card) return;
      const button = $('button[type=submit]', form);
      if (form.dataset.form === 'rate') setRate(card, button);
      else if (form.dataset.form === 'flush') flush(card, button);
      else if (form.dataset.form === 'eject') eject(card, button);
    });
    rooms.addEventListener('change', (event) => {
      const card = event.target.closest('li.room');
      if (card && event.target.matches('select[name=state]')) changeState(card, event.target);
    });
    rooms.addEventListener('input', (event) => {
      if (event.target.matches('input[name=ratePerMinute]')) event.target.dataset.dirty = '1';
    });
    rooms.addEventListener('focusin', (event) => {
      const card = event.target.closest('li.room');
      if (card && card.dataset.roomId !== state.selected) select(card.dataset.roomId, false);
    });

    $('#room-form').addEventListener('submit', submitRoom);
    $('#schedule-form').addEventListener('submit', (event) => {
      event.preventDefault();
      const cap = $('#schedule-cap');
      if (cap.validity.badInput) {
        showFieldError($('#schedule-form'), 'schedule.preQueueMaxPerIp', 'preQueueMaxPerIp: is not a number', cap);
        return;
      }
      saveSchedule({
        opensAt: fromLocalInput($('#schedule-opens-at')),
        preQueueMaxPerIp: wholeNumber(cap),
      }, event.submitter || null);
    });
    $('#schedule-clear').addEventListener('click', (event) => saveSchedule({ opensAt: null }, event.currentTarget));
    for (const dialog of $$('dialog')) {
      dialog.addEventListener('close', () => restoreFocus(dialog));
      for (const button of $$('[data-close]', dialog)) {
        button.addEventListener('click', () => dialog.close('cancel'));
      }
    }
    document.addEventListener('keydown', onKey);
    let resizeTimer = 0;
    window.addEventListener('resize', () => {
      clearTimeout(resizeTimer);
      resizeTimer = setTimeout(() => {
        if (state.signedIn) drawChart(state.lastMetrics || null);
      }, 150);
    });
    // A tab coming back from the background catches up at once rather than at the next tick.
    document.addEventListener('visibilitychange', () => {
      if (document.visibilityState === 'visible' && state.signedIn) {
        if (!state.source) connect();
        refreshChart();
      }
    });
  }

  wire();
  boot();
})();
