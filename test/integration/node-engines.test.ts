/**
 * `npm install` on every Node version the README and package.json `engines` promise prints no
 * EBADENGINE warning: every package the lockfile installs accepts the oldest release of each
 * supported major (and the Node running the test, when it is one we support). Checked from
 * package-lock.json, so a dependency bump that drops one of our Node versions fails here rather
 * than on a user's first install.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import semver from 'semver';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../../', import.meta.url));
const packageJson = JSON.parse(readFileSync(`${root}package.json`, 'utf8')) as { engines: { node: string } };
const lock = JSON.parse(readFileSync(`${root}package-lock.json`, 'utf8')) as {
  packages: Record<string, { version?: string; engines?: { node?: string } | string[] }>;
};

/** The oldest release of each major that `engines.node` accepts (`^20.19.0 || ^24.11.0` gives 20.19.0 and 24.11.0). */
function supportedMinimums(range: string): string[] {
  return range.split('||').map((part) => semver.minVersion(part.trim())!.version);
}

describe('Node engines', () => {
  const supported = packageJson.engines.node;
  const versions = supportedMinimums(supported);
  if (semver.satisfies(process.versions.node, supported)) versions.push(process.versions.node);

  it('package.json claims Node 20 and Node 24, as the README does', () => {
    expect(versions.map((v) => semver.major(v))).toEqual(expect.arrayContaining([20, 24]));
  });

  it.each(versions)('every installed package accepts Node %s', (version) => {
    const refusing = Object.entries(lock.packages)
      .filter(([path]) => path !== '')
      .flatMap(([path, entry]) => {
        // Old packages wrote engines as an array of strings; npm ignores those.
        const wanted = Array.isArray(entry.engines) ? undefined : entry.engines?.node;
        return wanted && !semver.satisfies(version, wanted) ? [`${path.replace(/^.*node_modules\//, '')}@${entry.version} wants node ${wanted}`] : [];
      });
    expect(refusing, `packages npm would warn about (EBADENGINE) on Node ${version}`).toEqual([]);
  });
});
