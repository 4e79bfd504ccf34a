// A small bar chart in SVG, built node by node: one bar per hour, its value in a tooltip,
// and a text summary for screen readers.

const SVG = 'http://www.w3.org/2000/svg';

function svg(tag, attributes = {}, text = null) {
  const el = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attributes)) el.setAttribute(key, String(value));
  if (text !== null) el.textContent = text;
  return el;
}

/** Bars for `points` ([{label, value}]), titled `title`; `unit` names what is counted. */
export function barChart(title, points, unit) {
  const width = 480;
  const height = 120;
  const top = 16;
  const bottom = 20;
  const max = Math.max(1, ...points.map((p) => p.value));
  const total = points.reduce((sum, p) => sum + p.value, 0);
  const step = width / Math.max(1, points.length);
  const summary = `${title}: ${total} ${unit} in the last ${points.length} hours, at most ${max} in an hour.`;
  const chart = svg('svg', { viewBox: `0 0 ${width} ${height + top + bottom}`, role: 'img',
    'aria-label': summary, class: 'chart' });
  chart.append(svg('title', {}, summary));
  chart.append(svg('line', { x1: 0, x2: width, y1: top + height, y2: top + height, class: 'axis' }));
  points.forEach((point, i) => {
    const barHeight = (point.value / max) * height;
    const bar = svg('rect', { x: i * step + 1, y: top + height - barHeight, width: Math.max(1, step - 2),
      height: barHeight, class: 'bar' });
    bar.append(svg('title', {}, `${point.label}: ${point.value} ${unit}`));
    chart.append(bar);
  });
  chart.append(svg('text', { x: 0, y: 11, class: 'chart-label' }, `max ${max}`));
  chart.append(svg('text', { x: 0, y: top + height + 15, class: 'chart-label' }, points[0]?.label ?? ''));
  chart.append(svg('text', { x: width, y: top + height + 15, class: 'chart-label', 'text-anchor': 'end' },
    'now'));
  return chart;
}
