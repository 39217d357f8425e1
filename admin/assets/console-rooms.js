// The console's rooms list and the selected room's chart: one card per room with its measured
// figures, its sparkline and the badges it earns, the filter box, the selection (j/k, a click,
// the focus entering a card), and the depth and flow chart of the selected room from
// GET /api/admin/metrics.
//
// Every figure on screen is one the server measured: the sparklines are the waiting counts this
// page received from the stream (one per 2 s tick), the chart is the engine's own 10 s samples.
// Nothing is interpolated or invented; a gap in the stream is a gap in the line.
'use strict';

window.QMConsoleRooms = (() => {
  const SURGE_WINDOW_MS = 60000;
  const SURGE_MIN_GROWTH = 10;
  const SURGE_MIN_RATIO = 0.2;
  const LONG_WAIT_SEC = 600;

  const Draw = window.QMConsoleDraw;
  const Visitors = window.QMConsoleVisitors;
  const Security = window.QMConsoleSecurity;
  const Signals = window.QMConsoleSignals;
  const { $, $$, fmt, state, api, describe, roomById, cardOf, rateOf, duration, localTime } = window.QMConsoleCore;
  const Access = window.QMConsoleAccess;
  const { RANGES } = Draw;

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
    Access.gate(card);
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

    // A room read through a shared monitor link comes back with these blanked (`redacted`):
    // the card says so rather than showing empty values as if they were the settings.
    $('.room-redacted', card).hidden = room.redacted !== true;

    const points = state.history.get(room.id) || [];
    Draw.sparkline($('svg.sparkline', card), points, 'Waiting in ' + (room.name || room.id));

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
      Security.reset();
      Signals.reset();
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

  /** Forgets every room (signed out): nothing of one session is left for the next. */
  function resetRooms() {
    state.rooms = [];
    state.history.clear();
    state.selected = null;
    $('#rooms').textContent = '';
    drawChart(null);
  }

  // ---------------------------------------------------------------------------------------
  // The selected room's chart (drawn by console-draw.js)

  function drawChart(metrics) {
    state.lastMetrics = metrics;
    const room = metrics ? roomById(metrics.roomId) : null;
    Draw.chart(
      { chart: $('#chart'), desc: $('#chart-desc'), summary: $('#chart-summary'), heading: $('#chart-heading') },
      metrics,
      { name: room ? room.name || room.id : metrics ? metrics.roomId : '', haveRooms: state.rooms.length > 0 },
    );
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

  return { renderRooms, applyFilter, select, moveSelection, acceptRoom, resetRooms, drawChart, refreshChart, setRange };
})();
