// The console's drawings: the rooms' sparklines and the selected room's depth and flow chart,
// as inline SVG built element by element (no library, nothing inline for the CSP to refuse).
// Pure functions of the numbers they are given; console.js owns the state and the requests.
'use strict';

window.QMConsoleDraw = (() => {
  const SVG_NS = 'http://www.w3.org/2000/svg';
  /** The span a sparkline shows. */
  const SPARK_WINDOW_MS = 120000;
  /** Two stream ticks are 2 s apart; more than 5 s between measurements is a gap. */
  const SPARK_GAP_MS = 5000;
  /** The chart ranges GET /api/admin/metrics accepts, and their length. */
  const RANGES = { '5m': 300000, '15m': 900000, '30m': 1800000, '1h': 3600000 };
  const numberFormat = new Intl.NumberFormat();
  const fmt = (value) => (typeof value === 'number' && Number.isFinite(value) ? numberFormat.format(value) : '–');

  function svg(name, attributes, parent) {
    const element = document.createElementNS(SVG_NS, name);
    for (const [key, value] of Object.entries(attributes || {})) element.setAttribute(key, String(value));
    if (parent) parent.appendChild(element);
    return element;
  }

  /** A sparkline of `points` ({t, w}, oldest first) over the last two minutes into `target`. */
  function sparkline(target, points, what) {
    target.textContent = '';
    const view = target.viewBox.baseVal;
    const width = view && view.width ? view.width : 120;
    const height = view && view.height ? view.height : 32;
    svg('line', { class: 'baseline', x1: 0, x2: width, y1: height - 0.5, y2: height - 0.5 }, target);
    if (!points.length) {
      target.setAttribute('aria-label', what + ': no measurements yet');
      return;
    }
    const last = points[points.length - 1].t;
    const start = last - SPARK_WINDOW_MS;
    const max = Math.max(1, ...points.map((point) => point.w));
    const x = (t) => ((t - start) / SPARK_WINDOW_MS) * width;
    const y = (w) => height - 1 - (w / max) * (height - 2);
    // A gap in the stream (a reconnect) is a gap in the line, never a bridge between two
    // measurements with none in between.
    for (const run of runs(points, SPARK_GAP_MS)) {
      const coordinates = run.map((point) => x(point.t).toFixed(1) + ',' + y(point.w).toFixed(1));
      if (run.length === 1) coordinates.unshift((x(run[0].t) - 2).toFixed(1) + ',' + y(run[0].w).toFixed(1));
      const first = coordinates[0].split(',')[0];
      const end = coordinates[coordinates.length - 1].split(',')[0];
      svg('polygon', { class: 'area', points: first + ',' + height + ' ' + coordinates.join(' ') + ' ' + end + ',' + height }, target);
      svg('polyline', { points: coordinates.join(' ') }, target);
    }
    const span = Math.round((last - points[0].t) / 1000);
    target.setAttribute('aria-label', what + ' over the last ' + span + ' s: from ' + fmt(points[0].w) + ' to '
      + fmt(points[points.length - 1].w) + ', highest ' + fmt(max) + '.');
  }

  /** Splits time-ordered points wherever two neighbours are more than `gap` ms apart. */
  function runs(points, gap) {
    const out = [];
    let current = [];
    for (const point of points) {
      if (current.length && point.t - current[current.length - 1].t > gap) {
        out.push(current);
        current = [];
      }
      current.push(point);
    }
    if (current.length) out.push(current);
    return out;
  }

  /** An axis of four equal whole-number steps of 1, 2 or 5 times a power of ten covering `value`. */
  function axisStep(value) {
    const raw = Math.max(1, value / 4);
    const power = 10 ** Math.floor(Math.log10(raw));
    for (const step of [1, 2, 5, 10]) {
      if (step * power >= raw) return step * power;
    }
    return 10 * power;
  }

  function clockLabel(ms, withSeconds) {
    const options = withSeconds
      ? { hour: '2-digit', minute: '2-digit', second: '2-digit' }
      : { hour: '2-digit', minute: '2-digit' };
    return new Date(ms).toLocaleTimeString(undefined, options);
  }

  /**
   * Draws `metrics` (a GET /api/admin/metrics answer, or null for "no room selected") into
   * `parts` = {chart, desc, summary, heading}; `context` = {name, haveRooms}. Sets the chart's
   * data-points, data-room-id and data-updated hooks.
   */
  function chart(parts, metrics, context) {
    const { chart, desc, summary, heading } = parts;
    for (const child of Array.from(chart.childNodes)) {
      if (child.nodeName !== 'title' && child.nodeName !== 'desc') child.remove();
    }
    chart.dataset.updated = String(Date.now());
    if (!metrics) {
      chart.dataset.points = '0';
      chart.removeAttribute('data-room-id');
      heading.textContent = context.haveRooms ? 'Select a room' : 'No room to chart yet';
      desc.textContent = 'No room selected.';
      svg('text', { x: 320, y: 140, 'text-anchor': 'middle', class: 'empty-note' }, chart).textContent = 'Select a room to see its line and flow.';
      return;
    }
    const name = context.name || metrics.roomId;
    heading.textContent = name + ' · depth and flow';
    const points = metrics.points || [];
    chart.dataset.points = String(points.length);
    chart.dataset.roomId = metrics.roomId;

    // The drawing is as wide as the panel, so labels keep their size on a phone.
    const width = Math.max(300, Math.round(chart.clientWidth || 640));
    const height = width < 480 ? 190 : 260;
    chart.setAttribute('viewBox', '0 0 ' + width + ' ' + height);
    const left = 46;
    const right = 46;
    const top = 12;
    const bottom = 28;
    const plotWidth = width - left - right;
    const plotHeight = height - top - bottom;
    const rangeMs = RANGES[metrics.range] || RANGES['5m'];
    const end = typeof metrics.now === 'number' ? metrics.now : Date.now();
    // A room younger than the range is drawn over the time it has existed (at least 30 s),
    // so its first minutes are not a sliver at the right edge; the labels say which times.
    const firstSample = points.length ? points[0].t : end;
    const start = Math.max(end - rangeMs, Math.min(firstSample, end - 30000));
    const span = end - start;
    const x = (t) => left + ((t - start) / span) * plotWidth;
    const maxWaiting = 4 * axisStep(Math.max(0, ...points.map((point) => Number(point.waiting) || 0)));
    // The last point is the room "now", often taken a moment after the last 10 s sample; a
    // rate over such a sliver is noise (0 or a spike). So each point's flow is the change of the
    // engine's own counters (joinedTotal, passedTotal) since the latest point at least half a
    // step before it: the server's per-sample rate whenever samples are a step apart, and for
    // "now" the rate over the last real interval. The depth line keeps every point.
    const minInterval = ((metrics.stepSec || 10) * 1000) / 2;
    const perMinute = (later, earlier, elapsed) => Math.round((Math.max(0, later - earlier) * 600000) / elapsed) / 10;
    const flow = points.map((point, index) => {
      let before = index - 1;
      while (before >= 0 && point.t - points[before].t < minInterval) before -= 1;
      if (before < 0) return null;
      const earlier = points[before];
      const elapsed = point.t - earlier.t;
      if (typeof point.joinedTotal !== 'number' || typeof earlier.joinedTotal !== 'number') return null;
      return {
        t: point.t,
        from: earlier.t,
        joinsPerMin: perMinute(point.joinedTotal, earlier.joinedTotal, elapsed),
        passesPerMin: perMinute(point.passedTotal, earlier.passedTotal, elapsed),
      };
    });
    const rates = flow.filter(Boolean).flatMap((rate) => [rate.joinsPerMin, rate.passesPerMin]);
    const maxRate = 4 * axisStep(Math.max(0, ...rates));
    const yDepth = (value) => top + plotHeight - (value / maxWaiting) * plotHeight;
    const yRate = (value) => top + plotHeight - (value / maxRate) * plotHeight;

    // Grid and the two value axes.
    for (let step = 0; step <= 4; step += 1) {
      const y = top + plotHeight - (step / 4) * plotHeight;
      svg('line', { x1: left, x2: width - right, y1: y, y2: y, class: 'grid-line' }, chart);
      svg('text', { x: left - 6, y: y + 4, 'text-anchor': 'end' }, chart).textContent = fmt((maxWaiting * step) / 4);
      svg('text', { x: width - right + 6, y: y + 4, 'text-anchor': 'start' }, chart).textContent = fmt((maxRate * step) / 4);
    }
    const withSeconds = span <= RANGES['5m'];
    // As many time labels as fit without touching: one per ~120 px, at least both ends.
    const labels = Math.max(2, Math.min(4, Math.floor(plotWidth / 120)));
    for (let step = 0; step <= labels; step += 1) {
      const t = start + (step / labels) * span;
      const anchor = step === 0 ? 'start' : step === labels ? 'end' : 'middle';
      svg('text', { x: x(t), y: height - 8, 'text-anchor': anchor }, chart).textContent = clockLabel(t, withSeconds);
    }
    svg('line', { x1: left, x2: left, y1: top, y2: top + plotHeight, class: 'axis' }, chart);
    svg('line', { x1: width - right, x2: width - right, y1: top, y2: top + plotHeight, class: 'axis' }, chart);
    svg('line', { x1: left, x2: width - right, y1: top + plotHeight, y2: top + plotHeight, class: 'axis' }, chart);

    if (!points.length) {
      svg('text', { x: left + plotWidth / 2, y: top + plotHeight / 2, 'text-anchor': 'middle', class: 'empty-note' }, chart)
        .textContent = 'No samples yet: the engine takes one every 10 s.';
      desc.textContent = 'No samples for ' + metrics.roomId + ' in the last ' + metrics.range + ' yet.';
      summary.textContent = 'No samples yet for this range. The engine samples each room every 10 s.';
      return;
    }

    // Samples missing for more than two steps (an engine restart) leave a gap in the line.
    const base = (top + plotHeight).toFixed(1);
    const gapMs = (metrics.stepSec || 10) * 1000 * 2.5;
    for (const run of runs(points, gapMs)) {
      const depth = run.map((point) => x(point.t).toFixed(1) + ',' + yDepth(Number(point.waiting) || 0).toFixed(1));
      const firstX = x(run[0].t).toFixed(1);
      const lastX = x(run[run.length - 1].t).toFixed(1);
      svg('polygon', { class: 'depth-area', points: firstX + ',' + base + ' ' + depth.join(' ') + ' ' + lastX + ',' + base }, chart);
      if (run.length === 1) svg('circle', { class: 'depth', cx: firstX, cy: depth[0].split(',')[1], r: 2.5 }, chart);
      else svg('polyline', { class: 'depth', points: depth.join(' ') }, chart);
    }
    for (const [key, className] of [['joinsPerMin', 'joins'], ['passesPerMin', 'passes']]) {
      // A point with no flow (the first sample) is left out rather than drawn as 0.
      let segment = [];
      const flush = () => {
        if (segment.length > 1) svg('polyline', { class: className, points: segment.join(' ') }, chart);
        else if (segment.length === 1) {
          const [px, py] = segment[0].split(',');
          svg('circle', { cx: px, cy: py, r: 2, class: className }, chart);
        }
        segment = [];
      };
      let previousT = null;
      for (const rate of flow) {
        if (!rate) continue;
        // A rate measured across a gap in the samples starts a new line.
        if (previousT !== null && rate.t - previousT > gapMs) flush();
        previousT = rate.t;
        segment.push(x(rate.t).toFixed(1) + ',' + yRate(rate[key]).toFixed(1));
      }
      flush();
    }
    const last = points[points.length - 1];
    const lastRated = flow.filter(Boolean).pop() || {};
    const peak = Math.max(...points.map((point) => Number(point.waiting) || 0));
    const rate = (value) => (typeof value === 'number' ? fmt(value) + ' / min' : 'not measured yet');
    const over = lastRated.t ? ' over the last ' + Math.round((lastRated.t - lastRated.from) / 1000) + ' s' : '';
    const text = 'At ' + clockLabel(last.t, true) + ': ' + fmt(last.waiting) + ' waiting; joins ' + rate(lastRated.joinsPerMin)
      + ', passes ' + rate(lastRated.passesPerMin) + over + '. Most waiting '
      + (span < rangeMs ? 'since ' + clockLabel(points[0].t, true) : 'in the last ' + metrics.range) + ': ' + fmt(peak)
      + ' (' + points.length + ' samples, one every ' + (metrics.stepSec || 10) + ' s).';
    desc.textContent = name + ', last ' + metrics.range + '. ' + text;
    summary.textContent = text;
  }

  return { sparkline, chart, RANGES, SPARK_WINDOW_MS };
})();
