import type { Point } from '../samples';

const WIDTH = 200;
const HEIGHT = 40;

interface Props {
  /** What the line shows, e.g. "pushes/s". */
  label: string;
  points: readonly Point[];
  /** The span of time the chart covers, ending at the newest point (ms). */
  windowMs: number;
  format: (value: number) => string;
  /** Names the chart for tests: `data-series`. */
  series: string;
  /** Explains where the numbers come from (a tooltip). */
  title?: string;
}

/**
 * A tiny line chart in inline SVG: the last `windowMs` of `points` (all of them while they
 * cover less), scaled from 0 (or the lowest value, if negative) to the highest, with the newest
 * value written beside its label.
 */
export function Sparkline({ label, points, windowMs, format, series, title }: Props) {
  const latest = points.at(-1);
  const end = latest?.at ?? 0;
  const shown = points.filter((p) => p.at >= end - windowMs);
  const max = Math.max(0, ...shown.map((p) => p.value));
  const min = Math.min(0, ...shown.map((p) => p.value));
  const height = max - min || 1;
  // Until the window has filled, the points there are fill the width.
  const span = Math.max(end - (shown[0]?.at ?? end), 1);
  const x = (at: number) => WIDTH - ((end - at) / span) * WIDTH;
  const y = (value: number) => HEIGHT - 2 - ((value - min) / height) * (HEIGHT - 4);
  const line = shown.map((p) => `${x(p.at).toFixed(1)},${y(p.value).toFixed(1)}`).join(' ');
  return (
    <div className="spark" data-testid="sparkline" data-series={series} data-points={shown.length} title={title}>
      <div className="spark-head">
        <span className="spark-label">{label}</span>
        <span className="spark-value" data-testid="sparkline-value">
          {latest ? format(latest.value) : '–'}
        </span>
      </div>
      <svg className="spark-chart" viewBox={`0 0 ${WIDTH} ${HEIGHT}`} preserveAspectRatio="none" role="img" aria-label={`${label} over the last minutes`}>
        {min < 0 && <line className="spark-zero" x1={0} x2={WIDTH} y1={y(0)} y2={y(0)} />}
        {shown.length > 1 && <polyline className="spark-area" points={`${x(shown[0].at).toFixed(1)},${y(min)} ${line} ${WIDTH},${y(min)}`} />}
        {shown.length > 0 && <polyline className="spark-line" points={line} />}
      </svg>
    </div>
  );
}
