// The console's create/edit room form: filling it from a room read, turning it back into the
// whole writable set of POST /api/admin/rooms, and putting the server's refusal at its field.
// A read-edit-write that changes nothing sends back exactly what was read.
'use strict';

window.QMConsoleForm = (() => {
  const $$ = (selector, scope) => Array.from((scope || document).querySelectorAll(selector));
  const rateOf = (room) => (typeof room.ratePerMinute === 'number' ? room.ratePerMinute : room.rate);

  function wholeNumber(input) {
    if (input.validity && input.validity.badInput) return input.value;
    if (input.value.trim() === '') return null;
    const number = Number(input.value);
    return Number.isFinite(number) ? number : input.value;
  }

  function pad(number) {
    return String(number).padStart(2, '0');
  }

  /** Epoch ms as a datetime-local value in this device's time zone. */
  function toLocalInput(ms) {
    const date = new Date(ms);
    return date.getFullYear() + '-' + pad(date.getMonth() + 1) + '-' + pad(date.getDate()) + 'T'
      + pad(date.getHours()) + ':' + pad(date.getMinutes()) + ':' + pad(date.getSeconds());
  }

  /**
   * A datetime-local value (read as this device's local time) as the API's instant: an ISO
   * string, or the untouched original when the operator did not change the field, so a round
   * trip keeps milliseconds the input cannot show.
   */
  function fromLocalInput(input) {
    const value = input.value.trim();
    if (value === '') return null;
    const date = new Date(value);
    // Compared as instants: the browser may drop ":00" seconds from the value it hands back.
    const original = Number(input.dataset.original);
    if (input.dataset.original && date.getTime() === Math.floor(original / 1000) * 1000) return original;
    return Number.isNaN(date.getTime()) ? value : date.toISOString();
  }

  /** Which control an error is about: the message names the field ("ratePerMinute: …"). */
  const CODE_FIELDS = {
    invalid_room_id: 'id', invalid_name: 'name', invalid_target_url: 'targetUrl',
    invalid_proxy_origin: 'proxyOrigin', invalid_rate: 'ratePerMinute', conflicting_field: 'ratePerMinute',
    invalid_max_concurrent: 'maxConcurrent', invalid_passed_ttl_sec: 'passedTtlSec',
    invalid_session_ttl_sec: 'sessionTtlSec', invalid_session_max_sec: 'sessionMaxSec',
    invalid_branding: 'branding.title', invalid_return_origins: 'returnOrigins',
    invalid_tag_origins: 'tagOrigins', invalid_autotune: 'autotune.enabled',
    invalid_protection: 'protection.mode', invalid_auto_activate: 'autoActivate.enabled',
    invalid_url_pattern: 'urlPatterns', invalid_opens_at: 'opensAt',
    invalid_pre_queue_max_per_ip: 'preQueueMaxPerIp', invalid_queue_max_per_ip: 'queueMaxPerIp',
    invalid_presence_sec: 'presenceSec', invalid_state: 'state', invalid_on_backend_down: 'onBackendDown',
  };
  const GROUP_FIELDS = {
    branding: 'branding.title', autotune: 'autotune.enabled', protection: 'protection.mode',
    autoActivate: 'autoActivate.enabled', rate: 'ratePerMinute',
  };

  function fieldOfError(failure) {
    if (!failure || typeof failure.message !== 'string') return null;
    const named = /^([A-Za-z]+(?:\.[A-Za-z]+)?)(?:\[\d+\])?: /.exec(failure.message)
      || /^([A-Za-z]+) is required/.exec(failure.message);
    if (named) return GROUP_FIELDS[named[1]] || named[1];
    return CODE_FIELDS[failure.code] || null;
  }

  function clearErrors(form) {
    for (const element of $$('[data-error-for]', form)) element.textContent = '';
    for (const control of $$('[aria-invalid]', form)) control.removeAttribute('aria-invalid');
  }

  function showFieldError(form, field, message, control) {
    const slot = $$('[data-error-for]', form).find((element) => element.dataset.errorFor === field);
    if (slot) slot.textContent = message;
    if (control) {
      control.setAttribute('aria-invalid', 'true');
      if (slot) {
        if (!slot.id) slot.id = 'error-' + field.replace(/[^A-Za-z0-9]/g, '-');
        const described = (control.getAttribute('aria-describedby') || '').split(' ').filter(Boolean);
        if (!described.includes(slot.id)) control.setAttribute('aria-describedby', described.concat(slot.id).join(' '));
      }
      const details = control.closest('details');
      if (details) details.open = true;
      control.focus();
    }
  }

  function control(form, name) {
    return form.elements.namedItem(name);
  }

  function setValue(form, name, value) {
    const element = control(form, name);
    if (!element) return;
    element.value = value === null || value === undefined ? '' : String(value);
  }

  /** Fills the form from a room read (or, for a new room, from the server's `defaults`). */
  function fillForm(form, room, defaults) {
    form.reset();
    for (const element of $$('input, select, textarea', form)) delete element.dataset.original;
    const r = room || {};
    setValue(form, 'id', r.id);
    setValue(form, 'name', r.name);
    setValue(form, 'targetUrl', r.targetUrl);
    setValue(form, 'ratePerMinute', room ? rateOf(room) : '');
    setValue(form, 'state', r.state || 'active');
    setValue(form, 'maxConcurrent', r.maxConcurrent);
    const opensAt = control(form, 'opensAt');
    if (typeof r.opensAt === 'number') {
      opensAt.value = toLocalInput(r.opensAt);
      opensAt.dataset.original = String(r.opensAt);
    }
    const fresh = !room;
    setValue(form, 'passedTtlSec', fresh ? defaults.passedTtlSec : r.passedTtlSec);
    setValue(form, 'sessionTtlSec', r.sessionTtlSec);
    setValue(form, 'sessionMaxSec', r.sessionMaxSec);
    setValue(form, 'presenceSec', fresh ? defaults.presenceSec : r.presenceSec);
    setValue(form, 'queueMaxPerIp', fresh ? defaults.queueMaxPerIp : r.queueMaxPerIp);
    setValue(form, 'preQueueMaxPerIp', fresh ? defaults.preQueueMaxPerIp : r.preQueueMaxPerIp);
    setValue(form, 'urlPatterns', (r.urlPatterns || []).join('\n'));
    setValue(form, 'returnOrigins', (r.returnOrigins || []).join('\n'));
    setValue(form, 'tagOrigins', (r.tagOrigins || []).join('\n'));
    setValue(form, 'proxyOrigin', r.proxyOrigin);
    setValue(form, 'onBackendDown', r.onBackendDown || 'closed');
    const branding = r.branding || {};
    for (const key of BRANDING_KEYS) setValue(form, 'branding.' + key, branding[key]);
    const autotune = r.autotune;
    setValue(form, 'autotune.enabled', autotune ? String(autotune.enabled) : '');
    setValue(form, 'autotune.minRate', autotune && autotune.minRate);
    setValue(form, 'autotune.maxRate', autotune && autotune.maxRate);
    setValue(form, 'autotune.targetP95Ms', autotune && autotune.targetP95Ms);
    setValue(form, 'autotune.healthUrl', autotune && autotune.healthUrl);
    setValue(form, 'autotune.coolDownSec', autotune && autotune.coolDownSec);
    setValue(form, 'protection.mode', r.protection ? r.protection.mode : '');
    const autoActivate = r.autoActivate;
    setValue(form, 'autoActivate.enabled', autoActivate ? String(autoActivate.enabled) : '');
    setValue(form, 'autoActivate.threshold', autoActivate && autoActivate.threshold);
  }

  const BRANDING_KEYS = ['title', 'logoUrl', 'primaryColor', 'accentColor', 'backgroundColor', 'textColor', 'message', 'supportText'];

  function lines(text) {
    return text.split('\n').map((line) => line.trim()).filter(Boolean);
  }

  /** The body the form stands for: the whole writable set (blank optional fields are null). */
  function formBody(form, original) {
    const text = (name) => control(form, name).value;
    const number = (name) => wholeNumber(control(form, name));
    const body = {};
    const id = text('id').trim();
    if (id !== '') body.id = id;
    const name = text('name').trim();
    if (name !== '' || original) body.name = name;
    const targetUrl = text('targetUrl').trim();
    if (targetUrl !== '' || original) body.targetUrl = targetUrl;
    const rate = number('ratePerMinute');
    if (rate !== null || original) body.ratePerMinute = rate;
    body.state = text('state');
    body.maxConcurrent = number('maxConcurrent');
    body.opensAt = fromLocalInput(control(form, 'opensAt'));
    const passedTtl = number('passedTtlSec');
    if (passedTtl !== null || original) body.passedTtlSec = passedTtl;
    for (const key of ['sessionTtlSec', 'sessionMaxSec', 'presenceSec', 'queueMaxPerIp', 'preQueueMaxPerIp']) {
      body[key] = number(key);
    }
    body.urlPatterns = lines(text('urlPatterns'));
    for (const key of ['returnOrigins', 'tagOrigins']) {
      const list = lines(text(key));
      // An empty box keeps whichever "nothing" the room had: null and [] differ for tagOrigins.
      body[key] = list.length ? list : (original && Array.isArray(original[key]) ? [] : null);
    }
    const proxy = text('proxyOrigin').trim();
    body.proxyOrigin = proxy === '' ? null : proxy;
    body.onBackendDown = text('onBackendDown');
    const branding = {};
    for (const key of BRANDING_KEYS) {
      const value = text('branding.' + key);
      if (value.trim() !== '') branding[key] = value;
    }
    body.branding = Object.keys(branding).length ? branding : (original && original.branding ? {} : null);
    const autotuneEnabled = text('autotune.enabled');
    if (autotuneEnabled === '') {
      body.autotune = null;
    } else {
      const autotune = { enabled: autotuneEnabled === 'true' };
      for (const key of ['minRate', 'maxRate', 'targetP95Ms', 'coolDownSec']) {
        const value = number('autotune.' + key);
        if (value !== null) autotune[key] = value;
      }
      const healthUrl = text('autotune.healthUrl').trim();
      if (healthUrl !== '') autotune.healthUrl = healthUrl;
      body.autotune = autotune;
    }
    const mode = text('protection.mode');
    body.protection = mode === '' ? null : { mode };
    const activateEnabled = text('autoActivate.enabled');
    body.autoActivate = activateEnabled === ''
      ? null
      : { enabled: activateEnabled === 'true', threshold: number('autoActivate.threshold') };
    return body;
  }

  return { wholeNumber, toLocalInput, fromLocalInput, fieldOfError, clearErrors, showFieldError, control, fillForm, formBody };
})();
