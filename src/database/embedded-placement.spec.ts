import { describe, expect, it } from 'vitest';
import { describeBlocker, firstBlocked, maySearch, newSystemAccount, relocatedHome, type StatLike } from './embedded-placement.js';

const postgres = { uid: 101, gid: 104, name: 'postgres' };
const dir = (mode: number, uid = 0, gid = 0): StatLike => ({ mode: 0o40000 | mode, uid, gid });

/** A file system of directories by path; anything else does not exist. */
function fakeStat(tree: Record<string, StatLike>): (path: string) => StatLike {
  return (path) => {
    const st = tree[path];
    if (!st) throw Object.assign(new Error(`ENOENT: ${path}`), { code: 'ENOENT' });
    return st;
  };
}

describe('maySearch', () => {
  it('uses the owner bits for the owner, the group bits for the primary group, the other bits for the rest', () => {
    expect(maySearch(dir(0o700, 101), postgres)).toBe(true);
    expect(maySearch(dir(0o070, 101), postgres)).toBe(false);
    expect(maySearch(dir(0o070, 0, 104), postgres)).toBe(true);
    expect(maySearch(dir(0o700, 0, 104), postgres)).toBe(false);
    expect(maySearch(dir(0o701), postgres)).toBe(true);
    expect(maySearch(dir(0o755), postgres)).toBe(true);
    expect(maySearch(dir(0o750), postgres)).toBe(false);
    // Read without search is not enough to pass through.
    expect(maySearch(dir(0o754), postgres)).toBe(false);
  });

  it('a user not made yet gets only the other bits', () => {
    const future = newSystemAccount('postgres');
    expect(maySearch(dir(0o770, 0, 0), future)).toBe(false);
    expect(maySearch(dir(0o711), future)).toBe(true);
  });
});

describe('firstBlocked', () => {
  const tree = {
    '/': dir(0o755),
    '/root': dir(0o700),
    '/root/pushpop': dir(0o755),
    '/root/pushpop/.data': dir(0o700, 101, 104),
    '/tmp': dir(0o1777),
    '/tmp/x': dir(0o700),
    '/srv': dir(0o755),
  };
  const stat = fakeStat(tree);

  it('names the first directory from / that the account cannot enter', () => {
    expect(firstBlocked('/root/pushpop/.data', postgres, { stat })).toEqual({ dir: '/root', mode: 0o700, uid: 0 });
    expect(firstBlocked('/tmp/x/data', postgres, { stat })).toEqual({ dir: '/tmp/x', mode: 0o700, uid: 0 });
  });

  it('leaves the path itself out when asked (the service hands DATA_DIR itself to postgres)', () => {
    expect(firstBlocked('/tmp/x', postgres, { stat, self: false })).toBeUndefined();
    expect(firstBlocked('/tmp/x', postgres, { stat })).toEqual({ dir: '/tmp/x', mode: 0o700, uid: 0 });
  });

  it('stops at the first directory that does not exist yet', () => {
    expect(firstBlocked('/srv/pushpop/data', postgres, { stat })).toBeUndefined();
    expect(firstBlocked('/root/new/data', postgres, { stat })).toEqual({ dir: '/root', mode: 0o700, uid: 0 });
  });

  it('finds nothing on a path the account can walk', () => {
    expect(firstBlocked('/srv', postgres, { stat })).toBeUndefined();
    expect(firstBlocked('/', postgres, { stat })).toBeUndefined();
  });

  it('describes a blocker with its mode and owner', () => {
    expect(describeBlocker({ dir: '/root', mode: 0o700, uid: 0 })).toBe('/root (mode 0700, owner root)');
    expect(describeBlocker({ dir: '/home/ada', mode: 0o750, uid: 1000 })).toBe('/home/ada (mode 0750, owner uid 1000)');
  });
});

describe('relocatedHome', () => {
  it('is one directory per real DATA_DIR under the root, the same every time', () => {
    const a = relocatedHome('/root/pushpop/.data', '/var/lib/pushpop');
    expect(a).toMatch(/^\/var\/lib\/pushpop\/cluster-[0-9a-f]{16}$/);
    expect(relocatedHome('/root/pushpop/.data', '/var/lib/pushpop')).toBe(a);
    expect(relocatedHome('/root/other/.data', '/var/lib/pushpop')).not.toBe(a);
  });
});
