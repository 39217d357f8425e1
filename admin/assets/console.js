// The operator console's keyboard shortcuts and wiring: which element calls what, then the
// first question to the server. The work is done by the scripts loaded before this one, each
// its own hashed file in this order: console-draw.js (the SVG drawings), console-form.js (the
// room form's fields), console-visitors.js (the find-a-visitor box and the connectors that checked in), console-core.js (state,
// the admin API, the status line), console-rooms.js (the rooms list and the chart),
// console-access.js (who is signed in, and what their role may use), console-stream.js (the
// live stream), console-session.js (sign-in and sign-out), console-controls.js (every control
// of a room and the dialogs) and console-admin.js (the audit trail, operators, share links and
// the shutdown).
//
// The page runs under `default-src 'self'` with no inline script or style: markup lives in
// console.html, colours in console.css, and the scripts only set text, attributes and classes.
'use strict';

(() => {
  const Visitors = window.QMConsoleVisitors;
  const Security = window.QMConsoleSecurity;
  const Signals = window.QMConsoleSignals;
  const Access = window.QMConsoleAccess;
  const Admin = window.QMConsoleAdmin;
  const { RANGES } = window.QMConsoleDraw;
  const { $, $$, state, api, describe, roomById, cardOf, rateOf, openDialog, restoreFocus } = window.QMConsoleCore;
  const { applyFilter, select, moveSelection, drawChart, refreshChart, setRange } = window.QMConsoleRooms;
  const { connect } = window.QMConsoleStream;
  const { signIn, signOut, boot } = window.QMConsoleSession;
  const {
    changeState, setRate, flush, eject, purge, deleteRoom,
    openSchedule, submitSchedule, clearSchedule, openCreate, openEdit, submitRoom,
  } = window.QMConsoleControls;

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
        if (!Access.refuse('operator')) openCreate();
        break;
      case 'j':
        moveSelection(1);
        break;
      case 'k':
        moveSelection(-1);
        break;
      case 'e':
        if (!selectedCard) return;
        if (!Access.refuse('operator')) openEdit(state.selected, null);
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

    // A shared view reads no visitor and no connector: those are not for a monitor token.
    Visitors.wire({ room: () => (Access.principal.monitor ? null : state.selected), api, describe });
    // Bot protection's account is for every read credential, the monitor token included.
    Security.wire({ room: () => state.selected, api, describe });
    // Alerts for every read credential; the decisions come from the audit trail (viewer and up).
    Signals.wire({
      room: () => (state.signedIn ? state.selected : null),
      monitor: () => Boolean(Access.principal.monitor),
      signedIn: () => state.signedIn,
      api,
      describe,
    });
    Admin.wire();
    Access.onPrincipal(() => Admin.showPage('rooms', false));
    Access.onPrincipal(() => Signals.start());
    $('#room-form').addEventListener('submit', submitRoom);
    $('#schedule-form').addEventListener('submit', submitSchedule);
    $('#schedule-clear').addEventListener('click', clearSchedule);
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
