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
  const SURGE_WINDOW_MS = 60000;
  const SURGE_MIN_GROWTH = 10;
  const SURGE_MIN_RATIO = 0.2;
  const LONG_WAIT_SEC = 600;
  const CHART_REFRESH_MS = 5000;
  const POLL_MS = 5000;
  const SESSION_CHECK_MS = 30000;

  // Loaded before this file (console-draw.js, console-form.js, console-visitors.js).
  const Draw = window.QMConsoleDraw;
  const Form = window.QMConsoleForm;
  const Visitors = window.QMConsoleVisitors;
  const { wholeNumber, toLocalInput, fromLocalInput, fieldOfError, clearErrors, showFieldError, control, formBody } = Form;
  const { RANGES, SPARK_WINDOW_MS } = Draw;

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
    if (changed) {
      refreshChart();
      Visitors.reset();
    }
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
  // Drawing (console-draw.js) and the room form (console-form.js)

  function drawSparkline(target, points, what) {
    Draw.sparkline(target, points, what);
  }

  function drawChart(metrics) {
    state.lastMetrics = metrics;
    const room = metrics ? roomById(metrics.roomId) : null;
    Draw.chart(
      { chart: $('#chart'), desc: $('#chart-desc'), summary: $('#chart-summary'), heading: $('#chart-heading') },
      metrics,
      { name: room ? room.name || room.id : metrics ? metrics.roomId : '', haveRooms: state.rooms.length > 0 },
    );
  }

  function fillForm(form, room) {
    Form.fillForm(form, room, defaults);
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

    Visitors.wire({ room: () => state.selected, api, describe });
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
