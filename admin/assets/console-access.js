// Who is signed in and what their role may do. Every control that changes something carries
// `data-needs="operator"` or `data-needs="owner"` in console.html; the roles rank viewer <
// operator < owner, the same order the server's grants table uses (the server refuses whatever
// this page lets through, with 403 insufficient_role). A control the role may not use stays
// visible and focusable but is marked aria-disabled, says why in its description (read by a
// screen reader) and in a tooltip shown on hover and on keyboard focus, and refuses a click, a
// submit or a change with the reason in the status line. A monitor token (a shared link) gets
// no controls at all: the page hides them (`data-view="monitor"`).
'use strict';

window.QMConsoleAccess = (() => {
  const { root, $, $$, setStatus } = window.QMConsoleCore;

  const RANK = { viewer: 1, operator: 2, owner: 3 };
  const ROLE_WORDS = {
    viewer: 'a viewer (reads only)',
    operator: 'an operator',
    owner: 'an owner',
    monitor: 'a shared monitor view (reads only)',
  };

  /** The signed-in principal as the server described it: {name, role, monitor}. */
  const principal = { name: '', role: '', monitor: false };

  function rankOf(role) {
    return RANK[role] || 0;
  }

  /** Whether the signed-in principal holds `needed` (viewer | operator | owner) or more. */
  function can(needed) {
    if (principal.monitor) return false;
    return rankOf(principal.role) >= rankOf(needed);
  }

  /** Why `needed` is out of reach, in one sentence naming the role and who is signed in. */
  function reason(needed) {
    const who = principal.name ? principal.name + ', ' : '';
    return 'Needs the ' + needed + ' role' + (needed === 'owner' ? '' : ' or higher')
      + ': you are signed in as ' + who + (ROLE_WORDS[principal.monitor ? 'monitor' : principal.role] || 'an unknown role') + '.';
  }

  /** Records who the server says is signed in, and marks every control of the page for it. */
  function setPrincipal(reply, monitorHint) {
    const role = String((reply && reply.role) || '');
    const kind = String((reply && reply.kind) || '');
    principal.name = String((reply && reply.name) || '');
    principal.monitor = role === 'monitor' || kind === 'monitor' || Boolean(monitorHint);
    principal.role = principal.monitor ? 'viewer' : role;
    root.dataset.role = principal.monitor ? 'monitor' : principal.role;
    root.dataset.view = principal.monitor ? 'monitor' : 'console';
    $('#who-name').textContent = principal.name || '–';
    $('#who-role').textContent = principal.monitor ? 'shared view, read only' : principal.role;
    for (const needed of Object.keys(RANK)) $('#why-' + needed).textContent = reason(needed);
    $('#monitor-banner').hidden = !principal.monitor;
    gate(document);
    for (const callback of listeners) callback(principal);
  }

  /** Callbacks run after each sign-in, with the new principal (console.js: back to the rooms). */
  const listeners = [];

  function onPrincipal(callback) {
    listeners.push(callback);
  }

  function clearPrincipal() {
    principal.name = '';
    principal.role = '';
    principal.monitor = false;
    delete root.dataset.role;
    delete root.dataset.view;
    hideTip();
  }

  function describedBy(element, id, on) {
    const ids = (element.getAttribute('aria-describedby') || '').split(/\s+/).filter((value) => value && value !== id);
    if (on) ids.push(id);
    if (ids.length) element.setAttribute('aria-describedby', ids.join(' '));
    else element.removeAttribute('aria-describedby');
  }

  /** Marks every `[data-needs]` control under `scope` usable or not for the principal. */
  function gate(scope) {
    for (const element of $$('[data-needs]', scope)) {
      const needed = element.dataset.needs;
      const allowed = can(needed);
      for (const role of Object.keys(RANK)) describedBy(element, 'why-' + role, !allowed && role === needed);
      if (allowed) {
        element.removeAttribute('aria-disabled');
        if (element.dataset.gatedReadOnly) {
          element.readOnly = false;
          delete element.dataset.gatedReadOnly;
        }
      } else {
        element.setAttribute('aria-disabled', 'true');
        // A text or number box cannot be aria-disabled alone: it would still take typing.
        if (element.tagName === 'INPUT' && !element.readOnly) {
          element.readOnly = true;
          element.dataset.gatedReadOnly = '1';
        }
      }
    }
  }

  function gatedControl(target) {
    if (!target || !target.closest) return null;
    const control = target.closest('[data-needs][aria-disabled="true"]');
    return control || null;
  }

  /** Says why in the status line when the role lacks `needed`; true when it refused. */
  function refuse(needed) {
    if (can(needed)) return false;
    setStatus(reason(needed), 'error');
    return true;
  }

  // ---------------------------------------------------------------------------------------
  // The tooltip: one element, placed under whichever refused control has the pointer or focus

  let tipOwner = null;

  function showTip(control) {
    const tip = $('#access-tip');
    tipOwner = control;
    tip.textContent = reason(control.dataset.needs);
    tip.hidden = false;
    const box = control.getBoundingClientRect();
    const width = Math.min(320, window.innerWidth - 16);
    tip.style.maxWidth = width + 'px';
    const left = Math.max(8, Math.min(box.left + window.scrollX, window.scrollX + window.innerWidth - width - 8));
    tip.style.left = left + 'px';
    tip.style.top = (box.bottom + window.scrollY + 6) + 'px';
  }

  function hideTip() {
    tipOwner = null;
    const tip = $('#access-tip');
    if (tip) tip.hidden = true;
  }

  function refuseEvent(event, control) {
    event.preventDefault();
    event.stopImmediatePropagation();
    setStatus(reason(control.dataset.needs), 'error');
  }

  const NAVIGATION_KEYS = new Set(['Tab', 'Escape', 'Shift', 'Control', 'Alt', 'Meta']);

  function wire() {
    // Capture phase: these run before any handler of the controls themselves.
    document.addEventListener('click', (event) => {
      const control = gatedControl(event.target);
      if (control) refuseEvent(event, control);
    }, true);
    document.addEventListener('submit', (event) => {
      const submitter = event.submitter || $('button[type=submit]', event.target);
      const control = gatedControl(submitter) || $('[data-needs][aria-disabled="true"]', event.target);
      if (control) refuseEvent(event, control);
    }, true);
    // A refused select does not open or change: the pointer and the keys that would are refused.
    document.addEventListener('mousedown', (event) => {
      const control = gatedControl(event.target);
      if (control && control.tagName === 'SELECT') refuseEvent(event, control);
    }, true);
    document.addEventListener('keydown', (event) => {
      const control = gatedControl(event.target);
      if (event.key === 'Escape') hideTip();
      if (!control || NAVIGATION_KEYS.has(event.key)) return;
      if (control.tagName === 'SELECT' || (control.tagName === 'BUTTON' && (event.key === 'Enter' || event.key === ' '))) {
        refuseEvent(event, control);
      }
    }, true);
    document.addEventListener('change', (event) => {
      const control = gatedControl(event.target);
      if (control) refuseEvent(event, control);
    }, true);
    document.addEventListener('focusin', (event) => {
      const control = gatedControl(event.target);
      if (control) showTip(control);
      else hideTip();
    });
    document.addEventListener('focusout', () => hideTip());
    document.addEventListener('mouseover', (event) => {
      const control = gatedControl(event.target);
      if (control) showTip(control);
      else if (tipOwner && tipOwner !== document.activeElement) hideTip();
    });
  }

  wire();

  return { principal, can, reason, refuse, setPrincipal, clearPrincipal, gate, onPrincipal };
})();
