import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { repoRoot } from '../support/child-service.js';
import { compileExamples, readmeExamples } from './client-support.js';

/**
 * The TypeScript examples of libs/client/README.md compile as a user's project would compile
 * them (strict, ESM, an `interface` as item type), against the client's source: the test breaks
 * when an example does. (`package.test.ts` compiles them against the packed tarball and runs them.)
 */
describe('the client README', () => {
  const dir = mkdtempSync(join(tmpdir(), 'pushpop-readme-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const paths = {
    '@pushpop/client': [join(repoRoot, 'libs/client/src/index.ts')],
    '@pushpop/api-client': [join(repoRoot, 'libs/api-client/src/index.ts')],
  };

  function write(examples: string[]): string[] {
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ type: 'module' }));
    return examples.map((source, i) => {
      const file = join(dir, `example-${i + 1}.ts`);
      writeFileSync(file, source);
      return file;
    });
  }

  it('has TypeScript examples, and every one of them compiles', () => {
    const examples = readmeExamples();
    expect(examples.length).toBeGreaterThanOrEqual(4);
    expect(compileExamples(write(examples), { paths })).toEqual([]);
  });

  it('would fail on an example that does not compile (the check itself works)', () => {
    const broken = `import { PushpopClient } from '@pushpop/client';\ninterface Order { id: number }\nawait new PushpopClient().queue<Order>('o').push({ id: 'one' });\n`;
    const diagnostics = compileExamples(write([broken]), { paths });
    expect(diagnostics).toEqual([expect.stringContaining("Type 'string' is not assignable to type 'number'")]);
  });
});
