// Two panels of what the product decided or noticed on its own:
// - "Alerts" (every room): GET /api/admin/alerts — what fires now and since when, the last
//   pages and whether the webhook took them, the rules with this process's thresholds, and a
//   test page (POST, operator or owner). Read every 10 s, and at once after a test page.
// - "Automatic decisions" (the selected room): the controllers' entries in the audit trail —
//   autotune's rate changes (room.autotune) and threshold activation's state changes
//   (room.auto_state) — each with the reason the controller gave, newest first. The audit
//   trail needs a viewer or above, so a shared (monitor) view says so instead.
'use strict';

window.QMConsoleSignals = (() => {
  const $ = (selector, scope) => (scope || document).querySelector(selector);
  const EVERY_MS = 10000;
  const DECISIONS_SHOWN = 10;
  let hooks = null;
  let alertsTimer = null;
  let decisionsTimer = null;
  let asked = 0;

  const when = (ms) => (typeof ms === 'number' ? new Date(ms).toLocaleString() : '–');

  function item(list, text, className) {
    const li = document.createElement('li');
    li.textContent = text;
    if (className) li.className = className;
    list.append(li);
  }

  function renderAlerts(view) {
    const firing = $('#alerts-firing');
    firing.replaceChildren();
    for (const alert of view.firing || []) {
      item(firing, alert.summary + ' — firing since ' + when(alert.since) +
        (typeof alert.clearSince === 'number' ? ' (clear since ' + when(alert.clearSince) + ', resolving)' : ''),
      'alert-' + alert.severity);
    }
    $('#alerts-quiet').hidden = (view.firing || []).length > 0;
    const delivery = view.delivery || {};
    $('#alerts-delivery').textContent = view.enabled
      ? 'Pages go to the webhook: ' + (delivery.sent || 0) + ' delivered, ' + (delivery.failed || 0) +
        ' refused, ' + (delivery.pending || 0) + ' waiting to be sent again.'
      : 'No ALERT_WEBHOOK_URL: the rules run and show here, nothing is sent.';
    const recent = $('#alerts-recent');
    recent.replaceChildren();
    for (const change of (view.recent || []).slice(0, 5)) {
      item(recent, when(change.at) + ' · ' + change.status + ' · ' + change.summary);
    }
    $('#alerts-recent-none').hidden = (view.recent || []).length > 0;
    const rules = $('#alerts-rules');
    rules.replaceChildren();
    for (const rule of view.rules || []) {
      item(rules, rule.alertname + ' (' + rule.severity + '): ' + rule.fires);
    }
    $('#alerts-test').hidden = !view.enabled || hooks.monitor();
    $('#alerts-evaluated').textContent = 'Checked ' + when(view.evaluatedAt) + ', every ' +
      Math.round((view.evalMs || 0) / 1000) + ' s; an alert resolves after ' + view.resolveSec + ' s clear.';
  }

  async function loadAlerts() {
    if (!hooks.signedIn()) return;
    try {
      renderAlerts(await hooks.api('GET', '/alerts'));
    } catch (failure) {
      $('#alerts-evaluated').textContent = 'The alerts could not be read: ' + hooks.describe(failure);
    }
  }

  async function testPage() {
    const status = $('#alerts-test-status');
    status.textContent = 'Sending a test page…';
    try {
      const answer = await hooks.api('POST', '/alerts', {});
      status.textContent = 'The webhook took the test page (HTTP ' + answer.status + ').';
    } catch (failure) {
      status.textContent = 'The test page was not delivered: ' + hooks.describe(failure);
    }
    loadAlerts();
  }

  /** A decision in words: "14:02 · autotune · rate 100 → 90/min: origin p95 …". */
  function decisionText(entry) {
    const summary = entry.summary || {};
    const at = when(entry.at);
    if (entry.action === 'room.autotune') {
      const change = typeof summary.previous === 'number'
        ? 'rate ' + summary.previous + ' → ' + summary.rate + '/min'
        : 'rate ' + summary.rate + '/min';
      return at + ' · autotune · ' + change + ': ' + (summary.reason || 'no reason recorded');
    }
    return at + ' · auto-activation · ' + (summary.state || '?') + ': ' + (summary.reason || 'no reason recorded');
  }

  async function loadDecisions() {
    const room = hooks.room();
    const mine = ++asked;
    const list = $('#decisions-list');
    const hint = $('#decisions-empty');
    if (!room) {
      list.replaceChildren();
      hint.textContent = 'Select a room to see what its controllers decided.';
      return;
    }
    if (hooks.monitor()) {
      list.replaceChildren();
      hint.textContent = 'Not shown in a shared view: the decisions are read from the audit trail, which needs a viewer or above.';
      return;
    }
    try {
      const query = '?room=' + encodeURIComponent(room) + '&limit=' + DECISIONS_SHOWN + '&action=';
      const [tuned, activated] = await Promise.all([
        hooks.api('GET', '/audit' + query + 'room.autotune'),
        hooks.api('GET', '/audit' + query + 'room.auto_state'),
      ]);
      if (mine !== asked) return;
      const entries = (tuned.entries || []).concat(activated.entries || [])
        .sort((a, b) => b.at - a.at)
        .slice(0, DECISIONS_SHOWN);
      list.replaceChildren();
      for (const entry of entries) item(list, decisionText(entry));
      hint.textContent = entries.length
        ? 'Newest first, as the audit trail recorded them.'
        : 'No automatic change yet: autotune and threshold activation record each change here with its reason.';
    } catch (failure) {
      if (mine === asked) hint.textContent = 'The decisions could not be read: ' + hooks.describe(failure);
    }
  }

  function every(timer, load) {
    clearInterval(timer);
    load();
    return setInterval(() => {
      if (!document.hidden) load();
    }, EVERY_MS);
  }

  /** Called once by the console with its room selection, API call and who is signed in. */
  function wire(consoleHooks) {
    hooks = consoleHooks;
    $('#alerts-refresh').addEventListener('click', loadAlerts);
    $('#alerts-test').addEventListener('click', testPage);
    $('#decisions-refresh').addEventListener('click', loadDecisions);
  }

  /** Signed in: keep the alerts fresh. */
  function start() {
    alertsTimer = every(alertsTimer, loadAlerts);
  }

  /** A different room is selected (or none): read its decisions, and keep them fresh. */
  function reset() {
    decisionsTimer = every(decisionsTimer, loadDecisions);
  }

  return { wire, start, reset };
})();
