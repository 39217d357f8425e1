// The console's controls of a room: its state, rate, flush and eject boxes on the card, the
// confirmed purge and delete, the schedule dialog, and the create/edit dialog around the form
// of console-form.js. Each sends one admin call, shows the room of the reply at once and puts
// the result, or the server's text and code, in the status line.
'use strict';

window.QMConsoleControls = (() => {
  const Form = window.QMConsoleForm;
  const { wholeNumber, toLocalInput, fromLocalInput, fieldOfError, clearErrors, showFieldError, control, formBody } = Form;
  const {
    $, $$, fmt, people, defaults, state, api, describe, setStatus, withBusy,
    roomById, cardOf, rateOf, localTime, openDialog,
  } = window.QMConsoleCore;
  const { renderRooms, select, acceptRoom } = window.QMConsoleRooms;

  function roomPath(id, action) {
    return '/rooms/' + encodeURIComponent(id) + (action ? '/' + action : '');
  }

  async function changeState(card, stateSelect) {
    const id = card.dataset.roomId;
    stateSelect.dataset.busy = '1';
    try {
      const reply = await api('POST', roomPath(id, 'state'), { state: stateSelect.value });
      acceptRoom(reply.room);
      setStatus('Room ' + id + ' is now ' + reply.room.state + '.', 'ok');
    } catch (failure) {
      const room = roomById(id);
      if (room) stateSelect.value = room.state;
      setStatus('The state of ' + id + ' did not change: ' + describe(failure), 'error');
    } finally {
      delete stateSelect.dataset.busy;
    }
  }

  /**
   * A number box of a room card (rate, flush, eject): its whole number goes to
   * POST /rooms/:id/<action> under the box's own name. `applied(reply, input, id)` shows the
   * reply and words it; a refusal marks the box, keeps the focus in it and says `refused(id)`
   * with the server's reason.
   */
  async function sendNumber(card, button, { name, action, applied, refused }) {
    const id = card.dataset.roomId;
    const input = $('input[name=' + name + ']', card);
    await withBusy(button, async () => {
      try {
        const reply = await api('POST', roomPath(id, action), { [name]: wholeNumber(input) });
        input.removeAttribute('aria-invalid');
        setStatus(applied(reply, input, id), 'ok');
      } catch (failure) {
        input.setAttribute('aria-invalid', 'true');
        setStatus(refused(id) + describe(failure), 'error');
        input.focus();
      }
    });
  }

  const setRate = (card, button) => sendNumber(card, button, {
    name: 'ratePerMinute',
    action: 'rate',
    applied: (reply, input, id) => {
      delete input.dataset.dirty;
      acceptRoom(reply.room);
      input.value = String(rateOf(reply.room));
      return 'Room ' + id + ' now lets in ' + people(rateOf(reply.room)) + ' a minute.';
    },
    refused: (id) => 'The rate of ' + id + ' did not change: ',
  });

  const flush = (card, button) => sendNumber(card, button, {
    name: 'count',
    action: 'flush',
    applied: (reply, input, id) => {
      acceptRoom(reply.room);
      return 'Let ' + people(reply.promoted) + ' into ' + id + ' now.';
    },
    refused: (id) => 'Nobody was let into ' + id + ': ',
  });

  const eject = (card, button) => sendNumber(card, button, {
    name: 'ticket',
    action: 'eject',
    applied: (reply, input, id) => {
      input.value = '';
      acceptRoom(reply.room);
      const what = reply.was === 'passed'
        ? 'its pass is revoked and its session dropped'
        : 'it was ' + reply.was;
      return 'Ticket ' + reply.ticket + ' in ' + id + ' is ejected (' + what + '); it goes to the back of the line.';
    },
    refused: (id) => 'Nothing was ejected from ' + id + ': ',
  });

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
        const reply = await api('POST', roomPath(id, 'purge'), {});
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
        await api('DELETE', roomPath(id));
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
  // The schedule dialog

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
        const reply = await api('POST', roomPath(id, 'schedule'), body);
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

  /** The schedule form's submit: the opening instant and the per-address cap. */
  function submitSchedule(event) {
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
  }

  /** "No scheduled drop": an explicit null, which the API reads as cancelling the drop. */
  function clearSchedule(event) {
    saveSchedule({ opensAt: null }, event.currentTarget);
  }

  // ---------------------------------------------------------------------------------------
  // The create/edit dialog

  /** Opens the room form on `room` (a read to edit) or, for null, on a new room's defaults. */
  function showRoomForm(room, title, submitLabel) {
    const form = $('#room-form');
    state.editing = room;
    clearErrors(form);
    Form.fillForm(form, room, defaults);
    control(form, 'id').readOnly = room !== null;
    for (const details of $$('details', form)) details.open = false;
    $('#room-form-title').textContent = title;
    $('#room-form-submit').textContent = submitLabel;
    openDialog($('#room-dialog'));
    control(form, room ? 'name' : 'id').focus();
  }

  function openCreate() {
    showRoomForm(null, 'New room', 'Create room');
  }

  async function openEdit(id, button) {
    await withBusy(button, async () => {
      try {
        const reply = await api('GET', roomPath(id));
        showRoomForm(reply.room, 'Edit ' + (reply.room.name || id), 'Save changes');
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

  return {
    changeState, setRate, flush, eject, purge, deleteRoom, confirmAction,
    openSchedule, submitSchedule, clearSchedule, openCreate, openEdit, submitRoom,
  };
})();
