// A small keep-alive HTTP client for set-up, pre-fills and counts; never the measured load
// (that is autocannon's, bench/load/cannon.mjs).

import { Buffer } from 'node:buffer';
import http from 'node:http';
import { clearTimeout, setTimeout } from 'node:timers';
import { URL } from 'node:url';
import { CONFIG } from './config.mjs';

export const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

export function httpRequest(baseUrl, method, path, body = null, timeoutMs = CONFIG.stallSeconds * 1000) {
  return new Promise((resolveRequest, reject) => {
    const url = new URL(path, baseUrl);
    const headers = body === null ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) };
    const req = http.request(url, { method, headers, agent }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        clearTimeout(timer);
        const text = Buffer.concat(chunks).toString('utf8');
        let parsed;
        try {
          parsed = text ? JSON.parse(text) : null;
        } catch {
          parsed = text;
        }
        resolveRequest({ status: res.statusCode ?? 0, body: parsed });
      });
      res.on('error', (error) => {
        clearTimeout(timer);
        reject(error);
      });
    });
    const timer = setTimeout(() => req.destroy(new Error(`${method} ${path}: no answer within ${Math.round(timeoutMs / 1000)} s`)), timeoutMs);
    req.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    req.end(body ?? undefined);
  });
}

/** Numbers of pushpop's /metrics: `name` or `name{labels}` → value. */
export async function metricsOf(url) {
  const res = await httpRequest(url, 'GET', '/metrics', null, 10_000);
  if (res.status !== 200 || typeof res.body !== 'string') throw new Error(`GET /metrics: ${res.status}`);
  const out = new Map();
  for (const line of res.body.split('\n')) {
    const m = /^(pushpop_[a-z_]+(?:\{[^}]*\})?) (\S+)$/.exec(line);
    if (m) out.set(m[1], Number(m[2]));
  }
  return out;
}
