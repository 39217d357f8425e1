// The console's "Find a visitor" box: a ticket number or the reference code a visitor reads
// off their waiting page goes to GET /api/admin/rooms/:id/visitors for the selected room, and
// the answer is put in words (state, position, the pass's expiry, whether a browser holds the
// place). An ambiguous code lists its candidate tickets, each one click from its own lookup.
// Below it, the room's "Connectors that checked in" (GET /api/admin/rooms/:id/connectors): which
// connector, version and origin ran an install check, and when last, read again on each selection
// and on Refresh.
'use strict';

window.QMConsoleVisitors = (() => {
  const $ = (selector, scope) => (scope || document).querySelector(selector);
  const numberFormat = new Intl.NumberFormat();
  const fmt = (value) => (typeof value === 'number' && Number.isFinite(value) ? numberFormat.format(value) : '–');
  let hooks = null;
  let asked = 0;
  let checkInsAsked = 0;

  function minutes(seconds) {
    if (typeof seconds !== 'number') return 'unknown';
    if (seconds < 60) return fmt(seconds) + ' s';
    return fmt(Math.floor(seconds / 60)) + ' min ' + fmt(seconds % 60) + ' s';
  }

  function when(ms) {
    return typeof ms === 'number' ? new Date(ms).toLocaleTimeString() : 'unknown';
  }

  const REASONS = {
    ejected: 'an operator ejected it',
    purged: 'the line was purged',
    expired: 'the pass ran out before they used it',
    room_reset: 'the room was reset since',
  };

  /** The sentence and the facts of one visitor. */
  function describeVisitor(visitor) {
    const who = visitor.ticket === null ? 'A pre-queue place' : 'Ticket ' + fmt(visitor.ticket);
    let sentence;
    if (visitor.state === 'waiting') sentence = who + ' is waiting at position ' + fmt(visitor.position) + ' (' + fmt(visitor.ahead) + ' ahead).';
    else if (visitor.state === 'passed') sentence = who + ' is through; the pass admits for ' + minutes(visitor.passTtlRemainingSec) + ' more (until ' + when(visitor.passExpiresAt) + ').';
    else if (visitor.state === 'pre_queued') sentence = who + ' is in the pre-queue; the draw happens when the doors open at ' + when(visitor.opensAt) + '.';
    else sentence = who + ' is no longer a place: ' + (REASONS[visitor.reason] || visitor.reason) + '.';
    const facts = [
      ['Reference', visitor.ref || '–'],
      ['Held by a browser', visitor.bound ? 'yes (session ' + visitor.session + ')' : 'no'],
    ];
    if (typeof visitor.lastSeenAt === 'number') facts.push(['Last seen', when(visitor.lastSeenAt) + (visitor.present === false ? ' (away)' : '')]);
    if (typeof visitor.joinedAt === 'number') facts.push(['Joined', when(visitor.joinedAt)]);
    return { sentence, facts };
  }

  function show(kind, build) {
    const result = $('#visitor-result');
    result.replaceChildren();
    result.dataset.kind = kind;
    build(result);
  }

  function paragraph(parent, text) {
    const p = document.createElement('p');
    p.textContent = text;
    parent.append(p);
    return p;
  }

  function render(answer, room) {
    if (answer.ambiguous) {
      show('info', (result) => {
        paragraph(result, 'More than one place in ' + room + ' shows ' + answer.ref + '. Ask the visitor for their position, then pick:');
        const list = document.createElement('ul');
        for (const candidate of answer.candidates || []) {
          const item = document.createElement('li');
          if (candidate.ticket === null) {
            item.textContent = 'a pre-queue place (' + candidate.state + ')';
          } else {
            const button = document.createElement('button');
            button.type = 'button';
            button.textContent = 'Ticket ' + fmt(candidate.ticket) + ' (' + candidate.state + ')';
            button.addEventListener('click', () => {
              $('#visitor-query').value = String(candidate.ticket);
              lookUp();
            });
            item.append(button);
          }
          list.append(item);
        }
        result.append(list);
      });
      return;
    }
    const { sentence, facts } = describeVisitor(answer.visitor || {});
    show('ok', (result) => {
      paragraph(result, sentence);
      const dl = document.createElement('dl');
      for (const [term, value] of facts) {
        const dt = document.createElement('dt');
        dt.textContent = term;
        const dd = document.createElement('dd');
        dd.textContent = value;
        dl.append(dt, dd);
      }
      result.append(dl);
    });
  }

  async function lookUp() {
    const room = hooks.room();
    const typed = $('#visitor-query').value.trim();
    if (!room) return show('error', (result) => paragraph(result, 'Select a room first.'));
    if (!typed) return show('error', (result) => paragraph(result, 'Type a ticket number or the code the visitor reads out.'));
    const path = '/rooms/' + encodeURIComponent(room) + '/visitors?';
    const digits = /^\d+$/.test(typed);
    const mine = ++asked;
    try {
      let answer;
      if (digits && typed.length === 6) {
        // Six digits may be a code made only of digits: the code first, then the ticket.
        answer = await hooks.api('GET', path + 'ref=' + typed).catch((failure) => {
          if (failure.code !== 'visitor_not_found') throw failure;
          return hooks.api('GET', path + 'ticket=' + typed);
        });
      } else {
        answer = await hooks.api('GET', path + (digits ? 'ticket=' + typed : 'ref=' + encodeURIComponent(typed)));
      }
      if (mine === asked) render(answer, room);
    } catch (failure) {
      if (mine !== asked) return;
      const sentences = {
        visitor_not_found: 'No place in ' + room + ' shows the code ' + typed + '. Check it with the visitor, and that this is their room.',
        ticket_not_found: 'Ticket ' + typed + ' was never issued in ' + room + ' (since it was last created).',
        invalid_ref: typed + ' is not a reference code: codes are six letters and digits, like K7F-3QX.',
      };
      show('error', (result) => paragraph(result, sentences[failure.code] || 'The lookup failed: ' + hooks.describe(failure)));
    }
  }

  function cell(row, text) {
    const td = document.createElement('td');
    td.textContent = text;
    row.append(td);
  }

  /** The table of the connectors that checked in; the hint says why it is empty. */
  function renderCheckIns(connectors, hint) {
    const rows = $('#check-ins-rows');
    rows.replaceChildren();
    for (const entry of connectors) {
      const row = document.createElement('tr');
      cell(row, entry.connector);
      cell(row, entry.version || '–');
      cell(row, entry.origin || '–');
      cell(row, typeof entry.lastSeen === 'number' ? new Date(entry.lastSeen).toLocaleString() : '–');
      cell(row, fmt(entry.count));
      rows.append(row);
    }
    $('#check-ins-table').hidden = connectors.length === 0;
    $('#check-ins-empty').textContent = hint;
  }

  async function loadCheckIns() {
    const room = hooks && hooks.room();
    const mine = ++checkInsAsked;
    if (!room) return renderCheckIns([], 'Select a room to see its connectors.');
    try {
      const answer = await hooks.api('GET', '/rooms/' + encodeURIComponent(room) + '/connectors');
      if (mine !== checkInsAsked) return;
      const connectors = answer.connectors || [];
      renderCheckIns(connectors, connectors.length
        ? 'Kept in the engine\'s memory since it started, most recent first.'
        : 'No connector has run an install check (GET /api/verify with connector=) on ' + room + ' since the engine started.');
    } catch (failure) {
      if (mine === checkInsAsked) renderCheckIns([], 'The list could not be read: ' + hooks.describe(failure));
    }
  }
  /** Called once by the console with its room selection and API call. */
  function wire(consoleHooks) {
    hooks = consoleHooks;
    $('#visitor-lookup').addEventListener('submit', (event) => {
      event.preventDefault();
      lookUp();
    });
    $('#check-ins-refresh').addEventListener('click', loadCheckIns);
  }

  /** A different room is selected: the last answer was about the other one. */
  function reset() {
    asked += 1;
    $('#visitor-result').replaceChildren();
    loadCheckIns();
  }

  return { wire, reset, describeVisitor };
})();
