import { describe, expect, it } from 'vitest';
import { checkExposure, isLoopback, loadApiKeys } from './api-keys.js';
import { EnvironmentError } from './environment.js';

const K1 = 'k1-abcdefghijklmnop';
const K2 = 'K2/abc+def=ghi~jkl.mn_o';

function problems(fn: () => unknown): string[] {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(EnvironmentError);
    return (error as EnvironmentError).problems;
  }
  throw new Error('expected EnvironmentError');
}

describe('loadApiKeys', () => {
  it('no variable: no keys', () => {
    expect(loadApiKeys({})).toEqual([]);
  });

  it('parses comma-separated entries with one or several scopes', () => {
    expect(loadApiKeys({ API_KEYS: `billing:${K1}:produce+consume, ops:${K2}:admin` })).toEqual([
      { name: 'billing', key: K1, scopes: ['produce', 'consume'] },
      { name: 'ops', key: K2, scopes: ['admin'] },
    ]);
  });

  it('reads API_KEYS_FILE: one entry per line, blank lines and # comments ignored', () => {
    const file = `# keys\n\nbilling:${K1}:produce\r\n  # rotated 2026-11\nops:${K2}:read+admin\n`;
    const keys = loadApiKeys({ API_KEYS_FILE: '/run/secrets/keys' }, (path) => {
      expect(path).toBe('/run/secrets/keys');
      return file;
    });
    expect(keys.map((k) => [k.name, k.scopes])).toEqual([
      ['billing', ['produce']],
      ['ops', ['read', 'admin']],
    ]);
  });

  it('names the position of a malformed entry and never its text', () => {
    const secret = 'SECRET-0123456789abcdef';
    const cases = [
      `a:${secret}`, // two fields
      `${secret}:a:admin`, // fields swapped: the key where the name goes
      `a:${secret}:admin:x`,
      `a b:${secret}:read`,
      `a:short:read`,
      `a:${secret}:write`,
      `a:${secret}:`,
      `a:${secret}:${secret}`,
      `a:${secret}é:read`,
    ];
    for (const entry of cases) {
      const found = problems(() => loadApiKeys({ API_KEYS: `ok:${K1}:read,${entry}` }));
      expect(found, entry).toHaveLength(1);
      expect(found[0], entry).toMatch(/^API_KEYS entry 2: /);
      expect(found[0], entry).not.toContain('SECRET');
      expect(found[0], entry).not.toContain('abcdef');
    }
    const inFile = problems(() => loadApiKeys({ API_KEYS_FILE: 'f' }, () => `# a comment\nok:${K1}:read\n\n${secret}:admin\n`));
    expect(inFile).toEqual([expect.stringMatching(/^API_KEYS_FILE line 4: /)]);
    expect(inFile[0]).not.toContain('SECRET');
  });

  it('refuses a name or a key used twice', () => {
    expect(problems(() => loadApiKeys({ API_KEYS: `a:${K1}:read,a:${K2}:read` }))).toEqual(['API_KEYS entry 2: the name is already used by API_KEYS entry 1']);
    expect(problems(() => loadApiKeys({ API_KEYS: `a:${K1}:read,b:${K1}:admin` }))).toEqual(['API_KEYS entry 2: the key is already used by API_KEYS entry 1']);
  });

  it('refuses both variables, an unreadable file, a file without keys', () => {
    expect(problems(() => loadApiKeys({ API_KEYS: `a:${K1}:read`, API_KEYS_FILE: 'f' }))[0]).toMatch(/both set/);
    const missing = problems(() =>
      loadApiKeys({ API_KEYS_FILE: '/nope' }, () => {
        throw Object.assign(new Error('no such file'), { code: 'ENOENT' });
      }),
    );
    expect(missing).toEqual(['API_KEYS_FILE="/nope": cannot be read (ENOENT)']);
    expect(problems(() => loadApiKeys({ API_KEYS_FILE: 'f' }, () => '# nothing yet\n\n'))).toEqual(['API_KEYS_FILE="f": holds no keys']);
  });
});

describe('isLoopback and checkExposure', () => {
  it('knows loopback addresses', () => {
    for (const host of ['127.0.0.1', '127.1.2.3', 'localhost', '::1', '[::1]', '0:0:0:0:0:0:0:1', '::ffff:127.0.0.1'])
      expect(isLoopback(host), host).toBe(true);
    for (const host of ['0.0.0.0', '::', '10.0.0.1', '192.168.1.5', '::ffff:10.0.0.1', 'example.com', '128.0.0.1']) expect(isLoopback(host), host).toBe(false);
  });

  it('refuses a non-loopback HOST without keys unless ALLOW_UNAUTHENTICATED', () => {
    const key = [{ name: 'a', key: K1, scopes: ['read' as const] }];
    expect(problems(() => checkExposure({ HOST: '0.0.0.0', ALLOW_UNAUTHENTICATED: false }, []))[0]).toMatch(
      /^HOST="0.0.0.0" serves other machines, and no API keys are configured/,
    );
    expect(() => checkExposure({ HOST: '0.0.0.0', ALLOW_UNAUTHENTICATED: true }, [])).not.toThrow();
    expect(() => checkExposure({ HOST: '0.0.0.0', ALLOW_UNAUTHENTICATED: false }, key)).not.toThrow();
    expect(() => checkExposure({ HOST: '127.0.0.1', ALLOW_UNAUTHENTICATED: false }, [])).not.toThrow();
  });
});
