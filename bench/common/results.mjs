// What a run found, gathered as it goes and written out at the end (bench/results/latest.json).

/** Problems seen (each makes the exit code 1): empty when the run was clean. */
export const problems = [];
/** Every measurement: one row per target x scenario x round (and per sub-scenario). */
export const runRows = [];

/** Whether the run was interrupted (Ctrl-C, SIGTERM, SIGHUP): every loop stops at the next chance. */
export const runState = { interrupted: false };
