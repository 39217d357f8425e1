// The room detail's "Bot protection" panel: GET /api/admin/security?roomId= for the selected
// room, put in words — the mode, how the joins this engine ran scored, what enforce refused or
// what monitor let in that enforce would have refused, the most frequent reasons and the
// latest examples (the client address only as its digest). Read again on each selection, on
// Refresh, and every 15 s while a room is selected. Every read credential may see it.
'use strict';

window.QMConsoleSecurity = (() => {
  const $ = (selector, scope) => (scope || document).querySelector(selector);
  const numberFormat = new Intl.NumberFormat();
  const fmt = (value) => (typeof value === 'number' && Number.isFinite(value) ? numberFormat.format(value) : '–');
  const EVERY_MS = 15000;
  const REASONS = {
    no_user_agent: 'no User-Agent',
    automation_user_agent: 'an HTTP library, headless browser or crawler',
    unusual_user_agent: 'not a browser\'s User-Agent',
    no_accept_language: 'no Accept-Language',
    no_accept: 'no Accept',
  };
  const MODES = {
    off: 'Protection is off: joins are scored, nobody is refused.',
    monitor: 'Monitor: every join is admitted; those enforce would refuse are counted.',
    enforce: 'Enforce: joins scoring at or over the line get no new place (403 blocked_by_protection).',
  };
  let hooks = null;
  let asked = 0;
  let timer = null;

  const reasonText = (name) => REASONS[name] || name;

  function cell(row, text) {
    const td = document.createElement('td');
    td.textContent = text;
    row.append(td);
  }

  function render(report, hint) {
    $('#security-empty').textContent = hint;
    const body = $('#security-body');
    body.hidden = !report;
    if (!report) return;
    $('#security-mode').textContent = MODES[report.mode] || report.mode;
    const scores = report.scores || {};
    $('#security-scored').textContent = fmt(report.scored) + (report.scored === 1 ? ' join' : ' joins') +
      ' scored: ' + fmt(scores.browserLike) +
      ' browser-like, ' + fmt(scores.suspect) + ' suspect, ' + fmt(scores.scriptLike) + ' script-like (' +
      fmt(report.blockAt) + ' or more).';
    const refusals = report.mode === 'enforce'
      ? fmt(report.refused) + ' refused.'
      : fmt(report.wouldRefuse) + ' would have been refused under enforce' +
        (report.refused ? ' (' + fmt(report.refused) + ' refused while it enforced).' : '.');
    $('#security-refusals').textContent = refusals;
    const reasons = $('#security-reasons');
    reasons.replaceChildren();
    for (const entry of report.topReasons || []) {
      const item = document.createElement('li');
      item.textContent = reasonText(entry.reason) + ': ' + fmt(entry.count);
      reasons.append(item);
    }
    $('#security-reasons-none').hidden = (report.topReasons || []).length > 0;
    const rows = $('#security-rows');
    rows.replaceChildren();
    for (const example of report.recent || []) {
      const row = document.createElement('tr');
      cell(row, typeof example.at === 'number' ? new Date(example.at).toLocaleTimeString() : '–');
      cell(row, fmt(example.score));
      cell(row, (example.reasons || []).map(reasonText).join(', '));
      cell(row, example.client || '–');
      cell(row, example.outcome === 'refused' ? 'refused' : 'would be refused');
      rows.append(row);
    }
    $('#security-table').hidden = (report.recent || []).length === 0;
  }

  async function load() {
    const room = hooks && hooks.room();
    const mine = ++asked;
    if (!room) return render(null, 'Select a room to see how its joins scored.');
    try {
      const answer = await hooks.api('GET', '/security?roomId=' + encodeURIComponent(room));
      if (mine !== asked) return;
      const report = (answer.rooms || [])[0];
      render(report || null, report
        ? 'Counted by the engine since it started (' + new Date(answer.since).toLocaleString() + ').'
        : 'No account for ' + room + '.');
    } catch (failure) {
      if (mine === asked) render(null, 'The account could not be read: ' + hooks.describe(failure));
    }
  }

  /** Called once by the console with its room selection and API call. */
  function wire(consoleHooks) {
    hooks = consoleHooks;
    $('#security-refresh').addEventListener('click', load);
  }

  /** A different room is selected (or none): read its account, and keep it fresh. */
  function reset() {
    clearInterval(timer);
    load();
    timer = setInterval(() => {
      if (!document.hidden) load();
    }, EVERY_MS);
  }

  return { wire, reset };
})();
