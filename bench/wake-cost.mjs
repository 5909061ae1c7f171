// What a process pays for waiting: two processes exchange one byte over a loopback TCP
// connection, the other side answering at once or after a pause, and this side reports its own
// CPU per round trip. On a machine where waking from idle is cheap the CPU per round trip stays
// the same whatever the pause; where it is not (a small VM whose idle vCPU is given back to the
// host), the same code costs several times more after each pause. That is the price every hop of
// a request at low concurrency pays (client → service → PostgreSQL → service → client: four wake-ups
// per request, where a client of Redis has two), and what the rows at concurrency 1 measure.
//
//   node bench/wake-cost.mjs [--pauses=0,1,2] [--round-trips=2000]
import { fork } from 'node:child_process';
import console from 'node:console';
import net from 'node:net';
import { performance } from 'node:perf_hooks';
import process from 'node:process';
import { setTimeout } from 'node:timers';
import { fileURLToPath } from 'node:url';
import { arg } from './common/args.mjs';

if (process.argv[2] === 'answer') {
  const pauseMs = Number(process.argv[3]);
  const server = net.createServer((socket) => {
    socket.setNoDelay(true);
    socket.on('data', (data) => (pauseMs > 0 ? setTimeout(() => socket.write(data), pauseMs) : socket.write(data)));
  });
  server.listen(0, '127.0.0.1', () => process.send(server.address().port));
} else {
  const pauses = arg('pauses', '0,1,2').split(',').map(Number);
  const roundTrips = Number(arg('round-trips', '2000'));
  for (const pauseMs of pauses) {
    const child = fork(fileURLToPath(import.meta.url), ['answer', String(pauseMs)]);
    const port = await new Promise((resolve) => child.once('message', resolve));
    const socket = net.connect(port, '127.0.0.1');
    await new Promise((resolve) => socket.once('connect', resolve));
    socket.setNoDelay(true);
    // Fewer round trips when each waits a pause, so that every row takes a few seconds at most.
    const count = pauseMs > 0 ? Math.max(100, Math.round(roundTrips / (4 * pauseMs))) : roundTrips;
    let done = 0;
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    await new Promise((resolve) => {
      socket.on('data', () => (++done === count ? resolve() : socket.write('x')));
      socket.write('x');
    });
    const wallUs = ((performance.now() - t0) * 1000) / count;
    const cpu = process.cpuUsage(cpu0);
    console.log(
      JSON.stringify({
        pause_ms: pauseMs,
        round_trips: count,
        wall_us_per_round_trip: Math.round(wallUs),
        user_us_per_round_trip: Math.round(cpu.user / count),
        system_us_per_round_trip: Math.round(cpu.system / count),
      }),
    );
    socket.destroy();
    child.kill();
  }
}
