// The console's live stream, GET /api/admin/events: a ticket from POST /api/admin/sse-ticket,
// then full frames and delta frames applied as the contract says (a delta with no full frame
// under it reconnects), a reconnect with back-off and a visible "Reconnecting…", and plain
// reads of GET /api/admin/rooms meanwhile. Each frame's waiting counts are the sparklines'
// measurements; nothing else feeds them.
'use strict';

window.QMConsoleStream = (() => {
  const POLL_MS = 5000;

  const Draw = window.QMConsoleDraw;
  const { API, root, $, fmt, state, api, describe, setStatus } = window.QMConsoleCore;
  const { renderRooms, refreshChart } = window.QMConsoleRooms;
  const { SPARK_WINDOW_MS } = Draw;

  function setConnection(kind, text) {
    const pill = $('#connection');
    pill.dataset.state = kind;
    pill.textContent = text;
    root.dataset.qmConnection = kind;
  }

  /** Closes the stream and stops every timer of a signed-in page. */
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
      Draw.sparkline($('#total-sparkline'), points, 'All rooms waiting');
    }
    renderRooms();
    const touched = frame.delta !== true || (frame.rooms || []).some((room) => room.id === state.selected);
    if (touched) refreshChart();
  }

  return { startStream, stopStream, connect, pollRooms };
})();
