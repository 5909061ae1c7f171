// The `--name=value` arguments of the standalone scripts (depth-pairs, consume-drain, in-process,
// pg-statements).

import process from 'node:process';

/** The value of `--name=value` on the command line, or `fallback`. */
export function arg(name, fallback) {
  const found = process.argv.find((a) => a.startsWith(`--${name}=`));
  return found ? found.slice(name.length + 3) : fallback;
}
