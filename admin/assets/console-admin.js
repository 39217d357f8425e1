// The console's pages beside the rooms: the audit trail (GET /api/admin/audit, newest first,
// filtered by room, operator, action and time, paged with "Older entries"), the operators
// (owner: list, create with the key shown once, revoke after a confirm), the monitor share
// links (create with the link shown once, list, revoke one or all) and the shutdown. What the
// role may not do is marked by console-access.js; the server refuses it regardless.
'use strict';

window.QMConsoleAdmin = (() => {
  const { $, $$, api, describe, setStatus, withBusy, localTime } = window.QMConsoleCore;
  const Access = window.QMConsoleAccess;
  const { confirmAction } = window.QMConsoleControls;

  const AUDIT_PAGE = 50;

  // ---------------------------------------------------------------------------------------
  // Pages

  let page = 'rooms';

  function showPage(name, focus) {
    // A key or link shown once does not wait on a page nobody is looking at.
    if (page === 'access' && name !== 'access') forgetShownSecrets();
    page = name;
    for (const button of $$('#console-nav button')) {
      if (button.dataset.page === name) button.setAttribute('aria-current', 'page');
      else button.removeAttribute('aria-current');
    }
    $('#page-rooms').hidden = name !== 'rooms';
    $('#page-audit').hidden = name !== 'audit';
    $('#page-access').hidden = name !== 'access';
    if (name === 'audit') loadAudit(false);
    if (name === 'access') loadAccess();
    if (focus) $('#' + name + '-heading').focus();
  }

  function forgetShownSecrets() {
    for (const [box, input] of [['#operator-key-box', '#operator-key'], ['#link-box', '#link-url']]) {
      $(input).value = '';
      $(box).hidden = true;
    }
  }

  function currentPage() {
    return page;
  }

  // ---------------------------------------------------------------------------------------
  // Table helpers

  function cell(row, text, className) {
    const td = document.createElement('td');
    td.textContent = text === undefined || text === null || text === '' ? '–' : String(text);
    if (className) td.className = className;
    row.append(td);
    return td;
  }

  function when(ms) {
    return typeof ms === 'number' && ms > 0 ? localTime(ms, true) : '–';
  }

  /** The first array of a reply, whatever the server names it (`operators`, `tokens`, …). */
  function listOf(reply, ...names) {
    for (const name of names) {
      if (Array.isArray(reply[name])) return reply[name];
    }
    return [];
  }

  function pick(object, ...names) {
    for (const name of names) {
      if (object[name] !== undefined && object[name] !== null) return object[name];
    }
    return undefined;
  }

  /** A button of a table row, gated like the page's own controls. */
  function rowButton(label, needs, onClick) {
    const button = document.createElement('button');
    button.type = 'button';
    button.className = 'danger';
    button.textContent = label;
    button.dataset.needs = needs;
    button.addEventListener('click', () => onClick(button));
    return button;
  }

  async function copy(event) {
    const input = $('#' + event.currentTarget.dataset.copy);
    input.select();
    try {
      await navigator.clipboard.writeText(input.value);
      setStatus('Copied to the clipboard.', 'ok');
    } catch (_) {
      // Clipboard access can be refused (no https, no permission): the text is selected.
      setStatus('The browser refused the clipboard: the text is selected, copy it with Ctrl+C.', 'info');
    }
  }

  // ---------------------------------------------------------------------------------------
  // Audit trail

  let auditNext = null;

  function auditQuery(before) {
    const form = $('#audit-filters');
    const params = new URLSearchParams();
    for (const name of ['room', 'operator', 'action']) {
      const value = form.elements[name].value.trim();
      if (value) params.set(name, value);
    }
    // The time boxes read in this device's time zone; the API takes epoch milliseconds.
    for (const name of ['since', 'until']) {
      const value = form.elements[name].value.trim();
      const ms = value ? new Date(value).getTime() : NaN;
      if (Number.isFinite(ms)) params.set(name, String(ms));
    }
    if (before) params.set('before', String(before));
    params.set('limit', String(AUDIT_PAGE));
    return '/audit?' + params.toString();
  }

  function who(entry) {
    const actor = entry.actor && typeof entry.actor === 'object' ? entry.actor : {};
    const kind = pick(entry, 'actorKind') || actor.kind || '';
    const name = pick(entry, 'actorName') || actor.name || '';
    const id = pick(entry, 'actorId') || actor.id || '';
    if (kind === 'anonymous' || (!name && !id)) return 'nobody signed in';
    if (kind === 'owner' && (!id || id === name)) return name || 'owner';
    return name + (id && id !== name ? ' (' + id + ')' : '') + (kind && kind !== 'operator' ? ' · ' + kind : '');
  }

  function auditRow(entry) {
    const row = document.createElement('tr');
    const at = pick(entry, 'atMs', 'at', 'time');
    cell(row, typeof at === 'number' ? when(at) : at);
    cell(row, who(entry));
    cell(row, entry.action);
    cell(row, pick(entry, 'roomId', 'room'));
    cell(row, entry.route, 'code');
    const summary = entry.summary;
    cell(row, typeof summary === 'string' ? summary : summary ? JSON.stringify(summary) : '', 'code wrap');
    cell(row, entry.client);
    cell(row, entry.status);
    return row;
  }

  async function loadAudit(older) {
    const rows = $('#audit-rows');
    const empty = $('#audit-empty');
    const button = $('#audit-older');
    if (Access.principal.monitor) return;
    try {
      const reply = await api('GET', auditQuery(older ? auditNext : null));
      const entries = listOf(reply, 'entries');
      if (!older) rows.replaceChildren();
      for (const entry of entries) rows.append(auditRow(entry));
      const next = pick(reply, 'next', 'nextBeforeId');
      auditNext = next ? next : null;
      button.hidden = !auditNext;
      const shown = rows.children.length;
      $('#audit-table').hidden = shown === 0;
      empty.hidden = shown !== 0;
      empty.textContent = shown === 0 ? 'No entry matches these filters.' : '';
    } catch (failure) {
      empty.hidden = false;
      empty.textContent = 'The audit trail could not be read: ' + describe(failure);
    }
  }

  // ---------------------------------------------------------------------------------------
  // Operators

  function renderOperators(operators) {
    const rows = $('#operators-rows');
    rows.replaceChildren();
    for (const operator of operators) {
      const row = document.createElement('tr');
      cell(row, operator.name);
      cell(row, operator.role);
      cell(row, operator.id, 'code');
      cell(row, when(pick(operator, 'createdAtMs', 'createdAt')));
      cell(row, operator.createdBy);
      const actions = document.createElement('td');
      actions.append(rowButton('Revoke…', 'owner', (button) => revokeOperator(operator, button)));
      row.append(actions);
      rows.append(row);
    }
    Access.gate(rows);
    $('#operators-table').hidden = operators.length === 0;
    $('#operators-empty').textContent = operators.length ? '' : 'No operators yet: only ADMIN_KEY signs in.';
  }

  async function loadOperators() {
    if (!Access.can('owner')) {
      renderOperators([]);
      $('#operators-empty').textContent = 'Only an owner sees and manages the operators.';
      return;
    }
    try {
      renderOperators(listOf(await api('GET', '/operators'), 'operators'));
    } catch (failure) {
      $('#operators-empty').textContent = 'The operators could not be read: ' + describe(failure);
    }
  }

  async function createOperator(event) {
    event.preventDefault();
    const form = $('#operator-form');
    const error = $('#operator-error');
    const name = form.elements.name;
    error.textContent = '';
    name.removeAttribute('aria-invalid');
    if (!name.value.trim()) {
      error.textContent = 'Give the operator a name: it is what the audit trail shows.';
      name.setAttribute('aria-invalid', 'true');
      name.focus();
      return;
    }
    await withBusy(event.submitter || null, async () => {
      try {
        const reply = await api('POST', '/operators', { name: name.value.trim(), role: form.elements.role.value });
        const operator = reply.operator || {};
        $('#operator-key-name').textContent = operator.name || name.value.trim();
        $('#operator-key').value = reply.key || '';
        $('#operator-key-box').hidden = false;
        name.value = '';
        setStatus('Operator ' + (operator.name || '') + ' created as ' + (operator.role || form.elements.role.value) + '. Copy the key now: it is shown once.', 'ok');
        $('#operator-key').focus();
        $('#operator-key').select();
        await loadOperators();
      } catch (failure) {
        error.textContent = 'The operator was not created: ' + describe(failure);
        name.setAttribute('aria-invalid', 'true');
        name.focus();
      }
    });
  }

  async function revokeOperator(operator, button) {
    const ok = await confirmAction('Revoke ' + operator.name + '?',
      'The key of ' + operator.name + ' (' + operator.role + ') stops working at its next request, on every admin instance, and any console signed in with it is signed out. This cannot be undone: to let them back in, create a new operator.',
      'Revoke the key');
    if (!ok) {
      setStatus(operator.name + ' kept; nothing changed.', 'info');
      return;
    }
    await withBusy(button, async () => {
      try {
        await api('DELETE', '/operators/' + encodeURIComponent(operator.id));
        setStatus('The key of ' + operator.name + ' is revoked.', 'ok');
        await loadOperators();
        $('#operators-heading').focus();
      } catch (failure) {
        setStatus(operator.name + ' was not revoked: ' + describe(failure), 'error');
      }
    });
  }

  // ---------------------------------------------------------------------------------------
  // Monitor share links

  function renderLinks(links) {
    const rows = $('#links-rows');
    rows.replaceChildren();
    for (const link of links) {
      const row = document.createElement('tr');
      cell(row, link.label);
      cell(row, link.id, 'code');
      cell(row, when(pick(link, 'createdAtMs', 'createdAt')));
      cell(row, link.createdBy);
      const expires = pick(link, 'expiresAtMs', 'expiresAt');
      cell(row, expires ? when(expires) : 'never');
      const actions = document.createElement('td');
      actions.append(rowButton('Revoke…', 'owner', (button) => revokeLink(link, button)));
      row.append(actions);
      rows.append(row);
    }
    Access.gate(rows);
    $('#links-table').hidden = links.length === 0;
    $('#links-revoke-all').hidden = links.length === 0;
    $('#links-empty').textContent = links.length ? '' : 'No live share links.';
  }

  async function loadLinks() {
    try {
      renderLinks(listOf(await api('GET', '/monitor-token'), 'tokens', 'links', 'monitorTokens'));
    } catch (failure) {
      renderLinks([]);
      $('#links-empty').textContent = 'The share links could not be read: ' + describe(failure);
    }
  }

  async function createLink(event) {
    event.preventDefault();
    const form = $('#link-form');
    const error = $('#link-error');
    error.textContent = '';
    await withBusy(event.submitter || null, async () => {
      try {
        const label = form.elements.label.value.trim();
        const reply = await api('POST', '/monitor-token', label ? { label } : {});
        const link = reply.link || (window.location.origin + '/#monitor=' + encodeURIComponent(reply.token || ''));
        $('#link-url').value = link;
        $('#link-box').hidden = false;
        form.elements.label.value = '';
        setStatus('Share link created. Copy it now: it is shown once.', 'ok');
        $('#link-url').focus();
        $('#link-url').select();
        await loadLinks();
      } catch (failure) {
        error.textContent = 'No link was created: ' + describe(failure);
      }
    });
  }

  async function revokeLink(link, button) {
    const name = link.label || link.id;
    const ok = await confirmAction('Revoke the share link ' + name + '?',
      'Screens showing this link stop updating at their next request and return to the sign-in form.', 'Revoke the link');
    if (!ok) {
      setStatus('Share link ' + name + ' kept; nothing changed.', 'info');
      return;
    }
    await withBusy(button, async () => {
      try {
        await api('DELETE', '/monitor-token?id=' + encodeURIComponent(link.id));
        setStatus('Share link ' + name + ' revoked.', 'ok');
        await loadLinks();
        $('#links-heading').focus();
      } catch (failure) {
        setStatus('Share link ' + name + ' was not revoked: ' + describe(failure), 'error');
      }
    });
  }

  async function revokeAllLinks(event) {
    const button = event.currentTarget;
    const ok = await confirmAction('Revoke every share link?',
      'Every screen and client holding a share link loses the view at its next request. New links can be created afterwards.',
      'Revoke every link');
    if (!ok) {
      setStatus('Share links kept; nothing changed.', 'info');
      return;
    }
    await withBusy(button, async () => {
      try {
        const reply = await api('DELETE', '/monitor-token?all=1');
        const count = typeof reply.revoked === 'number' ? reply.revoked : null;
        setStatus(count === null ? 'Every share link is revoked.' : 'Revoked ' + count + (count === 1 ? ' share link.' : ' share links.'), 'ok');
        await loadLinks();
        $('#links-heading').focus();
      } catch (failure) {
        setStatus('The share links were not revoked: ' + describe(failure), 'error');
      }
    });
  }

  function loadAccess() {
    loadOperators();
    loadLinks();
  }

  // ---------------------------------------------------------------------------------------
  // Shutdown

  async function shutdown(event) {
    const button = event.currentTarget;
    const ok = await confirmAction('Shut the admin process down?',
      'It finishes the requests in flight and stops. This console loses its connection until whatever supervises the process starts it again.',
      'Shut down');
    if (!ok) {
      setStatus('Shutdown cancelled; the server keeps running.', 'info');
      return;
    }
    await withBusy(button, async () => {
      try {
        const reply = await api('POST', '/shutdown', {});
        setStatus('The server is stopping after ' + Math.round(Number(reply.uptimeSec) || 0) + ' s up.', 'ok');
      } catch (failure) {
        setStatus('The server did not stop: ' + describe(failure), 'error');
      }
    });
  }

  function wire() {
    for (const button of $$('#console-nav button')) {
      button.addEventListener('click', () => showPage(button.dataset.page, true));
    }
    $('#audit-filters').addEventListener('submit', (event) => {
      event.preventDefault();
      loadAudit(false);
    });
    $('#audit-reset').addEventListener('click', () => {
      $('#audit-filters').reset();
      loadAudit(false);
    });
    $('#audit-older').addEventListener('click', () => loadAudit(true));
    $('#operator-form').addEventListener('submit', createOperator);
    $('#link-form').addEventListener('submit', createLink);
    $('#links-revoke-all').addEventListener('click', revokeAllLinks);
    $('#shutdown').addEventListener('click', shutdown);
    for (const button of $$('button[data-copy]')) button.addEventListener('click', copy);
  }

  return { wire, showPage, currentPage };
})();
