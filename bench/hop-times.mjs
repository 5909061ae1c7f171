// Where one request's time goes at concurrency 1, read off the wire: a packet capture of a
// client taking one request at a time from a service that sends one statement per request to
// its store (pushpop's exclusive Consumer, or the raw-SQL floor's pops). For each request, the
// gaps between the packets that carry data:
//
//   request → statement   the service, from the request's arrival to its statement leaving
//   statement → answer    the store: execution and commit
//   answer → response     the service, from the store's answer to the response leaving
//   response → request    the client, from the response's arrival to its next request
//
//   tcpdump -i lo -tt -n -s 96 'tcp port 8100 or tcp port 5432' > capture.txt   # while the client runs
//   node bench/hop-times.mjs --capture=capture.txt --port=8100 [--store-port=5432]
//
// (Debian: `apt-get install tcpdump`; it needs the right to capture, root here.) Prints the
// median, quartiles and mean of each gap in µs, and the count of requests. The first statement
// after a request and the first answer after it count; statements of the service's own (sweeps)
// that fall between requests are passed over. With more than one connection in flight the gaps
// interleave and mean nothing.
import console from 'node:console';
import { readFileSync } from 'node:fs';
import process from 'node:process';
import { arg } from './common/args.mjs';

const capture = arg('capture', '');
const port = arg('port', '');
const storePort = arg('store-port', '5432');
if (!capture || !port) {
  console.error('usage: node bench/hop-times.mjs --capture=<tcpdump -tt -n output> --port=<service port> [--store-port=5432]');
  process.exit(2);
}

/** Packets with data, in order: when (µs) and which way (see the header). */
const packets = [];
for (const line of readFileSync(capture, 'utf8').split('\n')) {
  const m = /^(\d+\.\d+) IP [\d.]+\.(\d+) > [\d.]+\.(\d+):.* length (\d+)/.exec(line);
  if (!m || m[4] === '0') continue;
  const [, time, from, to] = m;
  const way = to === port ? 'request' : from === port ? 'response' : to === storePort ? 'statement' : from === storePort ? 'answer' : undefined;
  if (way) packets.push({ at: Number(time) * 1e6, way });
}

const gaps = { 'request → statement': [], 'statement → answer': [], 'answer → response': [], 'response → request': [] };
/** The packets seen since the last request (a request that arrives in several packets counts from its first). */
let seen = null;
for (const { at, way } of packets) {
  if (way === 'request') {
    if (seen?.response !== undefined) gaps['response → request'].push(at - seen.response);
    if (seen && seen.response === undefined) continue;
    seen = { request: at };
  } else if (!seen) continue;
  else if (way === 'statement' && seen.statement === undefined) {
    seen.statement = at;
    gaps['request → statement'].push(at - seen.request);
  } else if (way === 'answer' && seen.statement !== undefined && seen.answer === undefined) {
    seen.answer = at;
    gaps['statement → answer'].push(at - seen.statement);
  } else if (way === 'response' && seen.response === undefined) {
    seen.response = at;
    if (seen.answer !== undefined) gaps['answer → response'].push(at - seen.answer);
  }
}

const quantile = (sorted, q) => Math.round(sorted[Math.floor(q * (sorted.length - 1))]);
const rows = Object.entries(gaps).map(([gap, values]) => {
  const sorted = [...values].sort((a, b) => a - b);
  if (sorted.length === 0) return { gap, requests: 0 };
  const mean = Math.round(sorted.reduce((a, b) => a + b, 0) / sorted.length);
  return { gap, requests: sorted.length, p25_us: quantile(sorted, 0.25), p50_us: quantile(sorted, 0.5), p75_us: quantile(sorted, 0.75), mean_us: mean };
});
console.table(rows);
