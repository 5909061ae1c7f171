// How numbers read in progress lines and tables, and the two table layouts (console, Markdown).

export function fmtNum(n) {
  return n === null || n === undefined ? '-' : Math.round(n).toLocaleString('en-US');
}
export function fmtMs(n) {
  return n === null || n === undefined ? '-' : n < 10 ? n.toFixed(2) : n < 100 ? n.toFixed(1) : n.toFixed(0);
}
export function fmtMb(kb) {
  return kb === null || kb === undefined ? '-' : `${(kb / 1024).toFixed(0)} MB`;
}
export function fmtRatio(a, b) {
  return a && b ? `${(a / b).toFixed(2)}x` : '-';
}
export function fmtCount(n) {
  return n >= 1_000_000 && n % 1_000_000 === 0 ? `${n / 1_000_000}M` : n >= 1000 && n % 1000 === 0 ? `${n / 1000}k` : String(n);
}

export function table(headers, body, alignRight) {
  const widths = headers.map((h, i) => Math.max(h.length, ...body.map((r) => String(r[i]).length)));
  const fmt = (cells) => cells.map((c, i) => (alignRight[i] ? String(c).padStart(widths[i]) : String(c).padEnd(widths[i]))).join('  ');
  return [fmt(headers), widths.map((w) => '-'.repeat(w)).join('  '), ...body.map(fmt)].map((line) => line.trimEnd()).join('\n');
}

export function markdownTable(headers, body, alignRight) {
  const esc = (c) => String(c).replace(/\|/g, '\\|');
  return [
    `| ${headers.map(esc).join(' | ')} |`,
    `| ${alignRight.map((r) => (r ? '---:' : '---')).join(' | ')} |`,
    ...body.map((r) => `| ${r.map(esc).join(' | ')} |`),
  ].join('\n');
}
