// The end of a run: the tables printed, bench/results/latest.md (ready to paste into
// docs/performance.md) and bench/results/latest.json (every number).

import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CONFIG, resultsDir } from '../common/config.mjs';
import { markdownTable, table } from '../common/format.mjs';
import { problems, runRows } from '../common/results.mjs';
import { log } from '../common/util.mjs';
import { targetInfo } from '../targets/targets.mjs';
import { HEADERS, notesOf, RIGHT, tableCells } from './summary.mjs';
import { footnotes, sideTables } from './tables.mjs';

export function printAndWrite(meta, targets, summary) {
  const mainRows = summary.filter((s) => !s.scenario.startsWith('depth-'));
  const sections = sideTables(targets).filter((t) => t.rows.length > 0);
  const console_ = [];
  console_.push('');
  console_.push(`pushpop benchmark — median of ${CONFIG.rounds} round(s)`);
  if (summary.length)
    console_.push(
      table(
        [...HEADERS, 'non-2xx', 'errors', 'notes'],
        summary.map((s) => [...tableCells(s), s.non_2xx, s.errors, notesOf(s)]),
        [...RIGHT, true, true, false],
      ),
    );
  for (const t of sections) {
    console_.push('');
    console_.push(t.title);
    console_.push(table(t.headers, t.rows, t.right));
  }
  console_.push('');
  for (const line of footnotes(meta, targets, summary)) console_.push(line);
  log(console_.join('\n'));

  const md = [];
  if (mainRows.length) md.push(markdownTable(HEADERS, mainRows.map(tableCells), RIGHT));
  for (const t of sections) {
    md.push('');
    md.push(t.mdTitle);
    md.push('');
    md.push(markdownTable(t.headers, t.rows, t.right));
  }
  md.push('');
  for (const line of footnotes(meta, targets, summary)) md.push(`${line}\n`);
  const bad = summary.filter((s) => s.non_2xx - s.http_429 > 0 || s.errors > 0 || s.ran_dry || !s.checks_ok || s.failed_rounds);
  md.push(
    bad.length
      ? `Problems in this run: ${bad.map((s) => `${s.target} ${s.scenario}`).join(', ')} (see latest.json).\n`
      : problems.length > 0
        ? `Problems in this run: ${problems.length} (see latest.json).\n`
        : 'Every response was 2xx, every count checked out, no queue ran dry.\n',
  );
  mkdirSync(resultsDir, { recursive: true });
  writeFileSync(join(resultsDir, 'latest.md'), `${md.join('\n').trimEnd()}\n`);
}

/** latest.json: the run's metadata, the summary, the targets, every measurement and the problems. */
export function writeJson(meta, targets, summary) {
  const info = Object.fromEntries(targets.map((t) => [t.name, targetInfo(t)]));
  writeFileSync(join(resultsDir, 'latest.json'), `${JSON.stringify({ meta, summary, targets: info, rounds: runRows, problems }, null, 2)}\n`);
}
