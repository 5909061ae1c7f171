import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * Every relative link and anchor in the README and in docs/ leads somewhere: the file exists,
 * and the `#anchor` is a heading of the file it names, as GitHub renders it.
 */
const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');

/** The text outside fenced code blocks and inline code, where a link is a link. */
function prose(markdown: string): string {
  return markdown.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, '').replace(/`[^`\n]*`/g, '');
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens. */
function slug(heading: string): string {
  const text = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/`/g, '')
    .trim()
    .toLowerCase();
  return text.replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-');
}

/** The anchors of a Markdown file's headings (a repeated heading gets `-1`, `-2`, …). */
function anchorsOf(markdown: string): Set<string> {
  const withoutFences = markdown.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, '');
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  for (const [, heading] of withoutFences.matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const base = slug(heading);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  return anchors;
}

/** The targets of a Markdown file's inline links and images that point inside the repository. */
function relativeLinksOf(markdown: string): string[] {
  return [...prose(markdown).matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)]
    .map((m) => m[1])
    .filter((target) => !/^[a-z][a-z0-9+.-]*:/i.test(target));
}

/** What is wrong with each relative link of the file at `path` (relative to the repository). */
function brokenLinks(path: string, read: (file: string) => string | undefined = readRepoFile): string[] {
  const markdown = read(path);
  if (markdown === undefined) return [`${path}: missing`];
  return relativeLinksOf(markdown).flatMap((target) => {
    const [file, anchor] = target.split('#', 2) as [string, string | undefined];
    const targetPath = file === '' ? path : relative(ROOT, resolve(ROOT, dirname(path), decodeURIComponent(file)));
    if (targetPath.startsWith('..') || !existsSync(join(ROOT, targetPath))) return [`${path}: ${target} (no such file)`];
    if (anchor === undefined) return [];
    if (!targetPath.endsWith('.md')) return [`${path}: ${target} (an anchor in a file that is not Markdown)`];
    const text = read(targetPath);
    return text !== undefined && anchorsOf(text).has(decodeURIComponent(anchor)) ? [] : [`${path}: ${target} (no such heading)`];
  });
}

function readRepoFile(path: string): string | undefined {
  const full = join(ROOT, path);
  return existsSync(full) && statSync(full).isFile() ? readFileSync(full, 'utf8') : undefined;
}

const DOCS = [
  'README.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

describe('documentation links', () => {
  it('finds the README and the docs', () => {
    expect(DOCS).toEqual(expect.arrayContaining(['README.md', 'docs/architecture.md', 'docs/operations.md', 'docs/performance.md']));
  });

  it.each(DOCS)('every relative link and anchor in %s resolves', (path) => {
    expect(relativeLinksOf(readRepoFile(path) ?? '').length, `${path} links somewhere`).toBeGreaterThan(0);
    expect(brokenLinks(path)).toEqual([]);
  });

  it('the README links every file under docs/', () => {
    const linked = new Set(relativeLinksOf(readRepoFile('README.md')!).map((t) => t.split('#')[0]));
    expect(DOCS.filter((d) => d !== 'README.md' && !linked.has(d))).toEqual([]);
  });

  it('reports a missing file, a missing heading and an anchor into a file that has none', () => {
    const files: Record<string, string> = {
      'README.md': [
        '# Title',
        '## Quick start',
        '## Errors (and `codes`)',
        '## Errors (and `codes`)',
        'ok: [a](#quick-start) [b](#errors-and-codes) [c](#errors-and-codes-1) [d](docs/architecture.md) [e](https://example.com/x#y)',
        'bad: [f](#quick-stop) [g](docs/nowhere.md) [h](docs/architecture.md#no-such-part) [i](package.json#scripts)',
        '```md',
        '[in a fence](docs/nowhere.md)',
        '```',
        'and `[in code](docs/nowhere.md)`',
      ].join('\n'),
      'docs/architecture.md': '# How pushpop works\n',
    };
    expect(brokenLinks('README.md', (f) => files[f])).toEqual([
      'README.md: #quick-stop (no such heading)',
      'README.md: docs/nowhere.md (no such file)',
      'README.md: docs/architecture.md#no-such-part (no such heading)',
      'README.md: package.json#scripts (an anchor in a file that is not Markdown)',
    ]);
  });

  it('makes anchors the way GitHub does', () => {
    expect(slug('Acknowledged pops (at-least-once delivery)')).toBe('acknowledged-pops-at-least-once-delivery');
    expect(slug('Push, pop and a hot queue, side by side')).toBe('push-pop-and-a-hot-queue-side-by-side');
    expect(slug('`DB_POOL_SIZE` and [the pool](x.md)')).toBe('db_pool_size-and-the-pool');
  });
});
