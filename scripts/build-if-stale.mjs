// Builds the parts `npm start` runs (and the client package), skipping each one whose inputs are what they were at
// its last successful build, and says per part what it did.
//   node scripts/build-if-stale.mjs         build the parts that changed (`npm start` runs this first)
//   node scripts/build-if-stale.mjs --all   build every part (`npm run build`, CI, the Docker image)
//
// Hand-written, not `tsc --build` or a task runner: the parts are built by three tools (tsc, `nest
// build` with the Swagger plugin, Vite), and none of them can tell that its output is current
// (`nest build` deletes dist/ first, Vite always bundles), while a task runner (turbo, nx, wireit)
// would add a dependency and a configuration language for five commands.
//
// A part is up to date when the stamp in its output directory records the inputs it is built
// from now: the content of every input file (not modification times, which a checkout or a copy
// changes without changing anything, and which an edit within the same tick may leave alone), its
// build command and the Node major version. The stamp is removed before a build and written only
// after the build succeeded, so a failed or interrupted build is built again, and so is a part
// whose output directory was deleted.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { delimiter, join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import process from 'node:process';
import { fileURLToPath, pathToFileURL, URL } from 'node:url';

/**
 * @typedef {object} Part
 * @property {string} title what the user reads
 * @property {string[]} inputs files and directories (relative to the root) its output depends on;
 *   a directory stands for every file under it except node_modules/, dist/ and unit tests
 * @property {string} output its output directory, where the stamp lives
 * @property {string} check a file of the output that a complete build has
 * @property {string[]} command how it is built, run from the root with node_modules/.bin on PATH
 */

/**
 * In build order: the service is compiled against the keyed-mutex library's declarations. Each
 * part lists what it uses of another part (the service the keyed-mutex library; the console the
 * API client, which Vite bundles from its source), and the lockfile, which pins every tool and
 * library a build runs or bundles.
 * @type {Part[]}
 */
export const PARTS = [
  {
    title: 'libs/keyed-mutex',
    inputs: ['libs/keyed-mutex', 'package-lock.json'],
    output: 'libs/keyed-mutex/dist',
    check: 'index.js',
    command: ['npm', 'run', 'build', '--workspace=@pushpop/keyed-mutex'],
  },
  {
    title: 'libs/api-client',
    inputs: ['libs/api-client', 'package-lock.json'],
    output: 'libs/api-client/dist',
    check: 'index.js',
    command: ['npm', 'run', 'build', '--workspace=@pushpop/api-client'],
  },
  {
    title: 'libs/client',
    inputs: ['libs/client', 'libs/api-client', 'package-lock.json'],
    output: 'libs/client/dist',
    check: 'index.js',
    command: ['npm', 'run', 'build', '--workspace=@pushpop/client'],
  },
  {
    title: 'service (src)',
    inputs: ['src', 'package.json', 'package-lock.json', 'tsconfig.json', 'nest-cli.json', 'libs/keyed-mutex'],
    output: 'dist',
    check: 'main.js',
    command: ['nest', 'build'],
  },
  {
    title: 'admin console (apps/admin)',
    inputs: ['apps/admin', 'libs/api-client', 'package-lock.json'],
    output: 'apps/admin/dist',
    check: 'index.html',
    command: ['npm', 'run', 'build', '--workspace=@pushpop/admin'],
  },
];

const STAMP = '.build-stamp.json';
const SKIPPED_DIRECTORIES = new Set(['node_modules', 'dist']);
/** Unit tests sit beside the code and are compiled by no build (the tsconfigs of the service and the libraries exclude them). */
const isUnitTest = (name) => name.endsWith('.spec.ts');

/** Relative paths (with `/`) of the files an input stands for, sorted. */
function filesOf(root, input) {
  const path = join(root, input);
  if (!existsSync(path)) return [];
  if (!statSync(path).isDirectory()) return [input];
  const files = [];
  for (const entry of readdirSync(path, { withFileTypes: true })) {
    const child = `${input}/${entry.name}`;
    if (entry.isDirectory()) {
      if (!SKIPPED_DIRECTORIES.has(entry.name)) files.push(...filesOf(root, child));
    } else if (entry.isFile() && !isUnitTest(entry.name)) {
      files.push(child);
    }
  }
  return files.sort();
}

/**
 * What a part is built from now: the hash of each input file's content, the command and the
 * Node major version, with one digest over all of them.
 * @param {string} root
 * @param {Part} part
 * @param {number} nodeMajor
 */
export function partInputs(root, part, nodeMajor) {
  const paths = [...new Set(part.inputs.flatMap((input) => filesOf(root, input)))].sort();
  /** @type {Record<string, string>} */
  const files = {};
  for (const path of paths)
    files[path] = createHash('sha256')
      .update(readFileSync(join(root, path)))
      .digest('hex');
  const command = part.command.join(' ');
  const digest = createHash('sha256').update(JSON.stringify({ nodeMajor, command, files })).digest('hex');
  return { digest, nodeMajor, command, files };
}

/** @returns {{ digest: string, nodeMajor: number, command: string, files: Record<string, string> } | undefined} */
function readStamp(path) {
  try {
    return JSON.parse(readFileSync(path, 'utf8'));
  } catch {
    return undefined;
  }
}

/** `src/main.ts changed`, `src/a.ts added and 2 more`. */
function describeChanges(before, now) {
  const changes = [];
  for (const [path, hash] of Object.entries(now)) {
    if (!(path in before)) changes.push(`${path} added`);
    else if (before[path] !== hash) changes.push(`${path} changed`);
  }
  for (const path of Object.keys(before)) if (!(path in now)) changes.push(`${path} removed`);
  if (changes.length === 0) return undefined;
  return changes.length === 1 ? changes[0] : `${changes[0]} and ${changes.length - 1} more`;
}

/**
 * Why the part must be built, or undefined when its output is current.
 * @param {string} root
 * @param {Part} part
 * @param {ReturnType<typeof partInputs>} inputs
 */
export function staleReason(root, part, inputs) {
  const stamp = readStamp(join(root, part.output, STAMP));
  if (!stamp) return existsSync(join(root, part.output)) ? 'no record of a successful build' : 'not built yet';
  if (!existsSync(join(root, part.output, part.check))) return `${part.output}/${part.check} is missing`;
  if (stamp.digest === inputs.digest) return undefined;
  if (stamp.nodeMajor !== inputs.nodeMajor) return `Node ${inputs.nodeMajor}, last built with Node ${stamp.nodeMajor}`;
  if (stamp.command !== inputs.command) return 'its build command changed';
  return describeChanges(stamp.files ?? {}, inputs.files) ?? 'its inputs changed';
}

/** Runs a command from the root with the repository's node_modules/.bin first on PATH (as npm scripts do); returns its exit status. */
function runCommand(command, root) {
  const env = { ...process.env, PATH: `${join(root, 'node_modules', '.bin')}${delimiter}${process.env.PATH ?? ''}` };
  const result = spawnSync(command[0], command.slice(1), { cwd: root, env, stdio: 'inherit' });
  if (result.error) throw result.error;
  return result.status ?? 1;
}

/**
 * Builds the parts, in order, that are stale (or all of them), stopping at the first failure.
 * Prints one line per part that is up to date, and for a part it builds one line before (with
 * the reason) and one after.
 * @param {object} options
 * @param {string} options.root
 * @param {Part[]} [options.parts]
 * @param {boolean} [options.all] build every part, stale or not
 * @param {number} [options.nodeMajor]
 * @param {(command: string[], root: string) => number} [options.run]
 * @param {(line: string) => void} [options.log]
 * @returns {number} 0, or the exit status of the build that failed
 */
export function buildParts({
  root,
  parts = PARTS,
  all = false,
  nodeMajor = Number(process.versions.node.split('.')[0]),
  run = runCommand,
  log = (line) => process.stdout.write(`${line}\n`),
}) {
  for (const part of parts) {
    const inputs = partInputs(root, part, nodeMajor);
    const reason = all ? 'full build' : staleReason(root, part, inputs);
    if (reason === undefined) {
      log(`build: ${part.title} up to date`);
      continue;
    }
    log(`build: ${part.title}: building (${reason})`);
    const stamp = join(root, part.output, STAMP);
    rmSync(stamp, { force: true });
    const started = performance.now();
    const status = run(part.command, root);
    if (status !== 0) {
      log(`build: ${part.title} FAILED (\`${inputs.command}\` exited with ${status})`);
      return status;
    }
    // The inputs as they were when the build started: an edit during the build is seen next time.
    mkdirSync(join(root, part.output), { recursive: true });
    writeFileSync(stamp, `${JSON.stringify(inputs, null, 1)}\n`);
    log(`build: ${part.title} built in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  }
  return 0;
}

const isMain = process.argv[1] !== undefined && pathToFileURL(resolve(process.argv[1])).href === import.meta.url;
if (isMain) {
  const args = process.argv.slice(2);
  const unknown = args.filter((arg) => arg !== '--all');
  if (unknown.length > 0) {
    process.stderr.write(`build-if-stale: unknown argument ${unknown[0]} (usage: node scripts/build-if-stale.mjs [--all])\n`);
    process.exitCode = 2;
  } else {
    process.exitCode = buildParts({ root: fileURLToPath(new URL('..', import.meta.url)), all: args.includes('--all') });
  }
}
