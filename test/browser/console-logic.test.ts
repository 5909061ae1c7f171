import { describe, expect, it } from 'vitest';
import {
  allows,
  checkKeyInput,
  forgetKey,
  identityLabel,
  KEY_STORAGE_NAME,
  loadKey,
  permissions,
  saveKey,
  sessionAfterFailure,
  sessionFromWhoAmI,
  sessionIdentity,
  type Action,
  type KeyStorage,
  type Session,
} from '../../apps/admin/src/access.js';
import { headline, rate, sumSamples } from '../../apps/admin/src/metrics.js';
import { segmentChain, segmentKey, type PriorityInfo } from '../../apps/admin/src/segments.js';
import { describeRetry, describeSettings, nextExpiry, releaseMessage, remaining, settingsForm, settingsPatch } from '../../apps/admin/src/settings.js';

// The admin console's pure parts, without a browser: the segment picture, the /metrics numbers,
// what a key's scopes allow and where the key is kept, a queue's settings form and its locks.

const config = { segment_size: 100, buffer_segments: 1 };

function priority(p: Partial<PriorityInfo>): PriorityInfo {
  return {
    count: 0,
    head_segment: 0,
    tail_segment: 0,
    head_offloaded_segment: null,
    tail_offloaded_segment: null,
    head_segment_count: 0,
    tail_segment_count: 0,
    ...p,
  };
}

const describeBlocks = (p: PriorityInfo, c = config) =>
  segmentChain(p, c).blocks.map((b) => `${b.kind} ${b.first}-${b.last} ${b.items}${b.collapsed ? ' collapsed' : ''}`);

describe('segment chain', () => {
  it('one segment is head and tail at once', () => {
    expect(describeBlocks(priority({ count: 7, head_segment_count: 7, tail_segment_count: 7 }))).toEqual(['head-tail 0-0 7']);
  });

  it('600 items: head, one buffer segment, 2-4 offloaded one by one, tail', () => {
    const p = priority({ count: 600, tail_segment: 5, head_offloaded_segment: 2, tail_offloaded_segment: 4, head_segment_count: 100, tail_segment_count: 100 });
    expect(describeBlocks(p)).toEqual(['head 0-0 100', 'buffer 1-1 100', 'offloaded 2-2 100', 'offloaded 3-3 100', 'offloaded 4-4 100', 'tail 5-5 100']);
    expect(segmentChain(p, config)).toMatchObject({ segments: 6, offloaded: 3 });
  });

  it('a long offloaded range is one block, whatever its length', () => {
    const p = priority({
      head_segment: 40,
      tail_segment: 1_000_040,
      head_offloaded_segment: 42,
      tail_offloaded_segment: 1_000_039,
      head_segment_count: 3,
      tail_segment_count: 9,
    });
    expect(describeBlocks(p)).toEqual(['head 40-40 3', 'buffer 41-41 100', 'offloaded 42-1000039 99999800 collapsed', 'tail 1000040-1000040 9']);
  });

  it('middle segments not offloaded (yet) are drawn in state, collapsed when many', () => {
    const p = priority({ tail_segment: 10, head_segment_count: 100, tail_segment_count: 1 });
    expect(describeBlocks(p)).toEqual(['head 0-0 100', 'buffer 1-1 100', 'state 2-9 800 collapsed', 'tail 10-10 1']);
    const partly = priority({ tail_segment: 12, head_offloaded_segment: 2, tail_offloaded_segment: 8, head_segment_count: 100, tail_segment_count: 1 });
    expect(describeBlocks(partly)).toEqual([
      'head 0-0 100',
      'buffer 1-1 100',
      'offloaded 2-8 700 collapsed',
      'state 9-9 100',
      'state 10-10 100',
      'state 11-11 100',
      'tail 12-12 1',
    ]);
  });

  it('more buffer segments: each drawn up to three, then collapsed', () => {
    const p = priority({ tail_segment: 3, head_segment_count: 50, tail_segment_count: 20 });
    expect(describeBlocks(p, { segment_size: 100, buffer_segments: 5 })).toEqual(['head 0-0 50', 'buffer 1-1 100', 'buffer 2-2 100', 'tail 3-3 20']);
    expect(describeBlocks(priority({ tail_segment: 9, tail_segment_count: 1 }), { segment_size: 10, buffer_segments: 6 })).toEqual([
      'head 0-0 0',
      'buffer 1-6 60 collapsed',
      'state 7-7 10',
      'state 8-8 10',
      'tail 9-9 1',
    ]);
  });

  it('names segments by their state keys', () => {
    expect(segmentKey('orders', 0, 3, false)).toBe('queue_0_seg_3');
    expect(segmentKey('orders', '2', 3, true)).toBe('offloaded_queue_2_seg_3_orders');
  });
});

describe('/metrics headline', () => {
  const text = [
    '# HELP pushpop_operations_total HTTP operations by operation and outcome',
    '# TYPE pushpop_operations_total counter',
    'pushpop_operations_total{operation="push",outcome="ok"} 40',
    'pushpop_operations_total{operation="pop",outcome="QUEUE_LOCKED"} 2',
    'pushpop_operations_total{operation="pop",outcome="ok"} 8 1700000000000',
    'pushpop_items_in_memory 300',
    'pushpop_offloaded_segments 21',
    'pushpop_active_actors 3',
    'pushpop_enqueue_waiting_items 7',
    'pushpop_enqueue_oldest_age_seconds 2.5',
    'pushpop_operation_duration_seconds_bucket{operation="push",le="+Inf"} 40',
  ].join('\n');

  it('sums every sample of a name, over label sets and with timestamps', () => {
    expect(sumSamples(text).get('pushpop_operations_total')).toBe(50);
    expect(headline(text)).toEqual({
      operations: 50,
      itemsInMemory: 300,
      offloadedSegments: 21,
      activeActors: 3,
      enqueueWaiting: 7,
      enqueueOldestAgeSeconds: 2.5,
    });
    expect(headline('')).toEqual({ operations: 0, itemsInMemory: 0, offloadedSegments: 0, activeActors: 0, enqueueWaiting: 0, enqueueOldestAgeSeconds: 0 });
  });

  it('operations per second from two scrapes; none after a counter reset', () => {
    expect(rate(undefined, 50, 1000)).toBeUndefined();
    expect(rate({ value: 50, at: 1000 }, 75, 6000)).toBe(5);
    expect(rate({ value: 50, at: 1000 }, 10, 6000)).toBeUndefined();
  });
});

describe('what a key may do', () => {
  const allowed = (scopes: string[]) => {
    const p = permissions({ name: 'k', scopes });
    return (Object.keys(p) as Action[]).filter((a) => p[a].allowed).sort();
  };

  it('each scope allows its own controls; admin allows everything', () => {
    expect(allowed(['read'])).toEqual(['metrics', 'read']);
    expect(allowed(['produce'])).toEqual(['push']);
    expect(allowed(['consume'])).toEqual(['lock', 'pop']);
    expect(allowed(['produce', 'consume'])).toEqual(['lock', 'pop', 'push']);
    expect(allowed(['admin'])).toEqual(['delete', 'lock', 'metrics', 'pop', 'push', 'read', 'redrive', 'settings']);
    expect(allowed(['read', 'produce', 'consume'])).not.toContain('settings');
    expect(allowed(['read', 'produce', 'consume'])).not.toContain('redrive');
    expect(allowed([])).toEqual([]);
    expect(allows(['read', 'produce', 'consume'], 'delete')).toBe(false);
  });

  it('with keys off (or not known) everything is allowed', () => {
    expect(Object.values(permissions(null)).every((p) => p.allowed)).toBe(true);
  });

  it('a refused control says which scope it needs and which the key has', () => {
    const p = permissions({ name: 'viewer', scopes: ['read'] });
    expect(p.push).toEqual({ allowed: false, reason: 'Pushing needs the produce (or admin) scope; the key “viewer” has read.' });
    expect(p.delete).toEqual({ allowed: false, reason: 'Deleting a queue needs the admin scope; the key “viewer” has read.' });
    expect(p.settings).toEqual({ allowed: false, reason: 'Changing a queue’s settings needs the admin scope; the key “viewer” has read.' });
    expect(permissions({ name: 'none', scopes: [] }).read).toMatchObject({
      reason: 'Listing and reading queues needs the read (or admin) scope; the key “none” has no scope.',
    });
  });

  it('the header names the key and its scopes, or says the service is open', () => {
    expect(identityLabel({ name: 'ops', scopes: ['admin'] })).toBe('ops · admin');
    expect(identityLabel({ name: 'worker', scopes: ['produce', 'consume'] })).toBe('worker · produce, consume');
    expect(identityLabel(null)).toBe('open (no keys)');
  });
});

describe('the key held', () => {
  function fakeStorage(): KeyStorage & { items: Map<string, string> } {
    const items = new Map<string, string>();
    return {
      items,
      getItem: (name) => items.get(name) ?? null,
      setItem: (name, value) => void items.set(name, value),
      removeItem: (name) => void items.delete(name),
    };
  }
  const refusing: KeyStorage = {
    getItem: () => {
      throw new Error('SecurityError');
    },
    setItem: () => {
      throw new Error('QuotaExceededError');
    },
    removeItem: () => {
      throw new Error('SecurityError');
    },
  };

  it('is kept under one name, read back and forgotten', () => {
    const storage = fakeStorage();
    expect(loadKey(storage)).toBeUndefined();
    expect(saveKey(storage, 'ops-key-0123456789abcdef')).toBe(true);
    expect([...storage.items]).toEqual([[KEY_STORAGE_NAME, 'ops-key-0123456789abcdef']]);
    expect(loadKey(storage)).toBe('ops-key-0123456789abcdef');
    forgetKey(storage);
    expect(storage.items.size).toBe(0);
    expect(loadKey(storage)).toBeUndefined();
  });

  it('storage that is missing or refuses holds nothing and throws nothing', () => {
    expect(loadKey(undefined)).toBeUndefined();
    expect(saveKey(undefined, 'k')).toBe(false);
    expect(loadKey(refusing)).toBeUndefined();
    expect(saveKey(refusing, 'k')).toBe(false);
    expect(() => forgetKey(refusing)).not.toThrow();
    const storage = fakeStorage();
    storage.items.set(KEY_STORAGE_NAME, '');
    expect(loadKey(storage)).toBeUndefined();
  });

  it('what is typed is trimmed; empty, blanks inside and non-ASCII are refused before sending', () => {
    expect(checkKeyInput('  ops-key+/=~._0123  \n')).toEqual({ key: 'ops-key+/=~._0123' });
    expect(checkKeyInput('   ')).toEqual({ problem: 'Enter an API key.' });
    expect(checkKeyInput('two words')).toHaveProperty('problem');
    expect(checkKeyInput('clé-0123456789abcdef')).toHaveProperty('problem');
  });
});

describe('the session', () => {
  const unauthorized = { status: 401, code: 'UNAUTHORIZED', message: 'Unknown API key' };
  const down = { status: 0, code: 'NETWORK_ERROR', message: 'The service did not answer' };

  it('follows /whoami: keys off is open, a known key is signed in with its scopes', () => {
    expect(sessionFromWhoAmI({ authentication: false, name: null, scopes: ['produce', 'consume', 'read', 'admin'] })).toEqual({ kind: 'open' });
    const signedIn = sessionFromWhoAmI({ authentication: true, name: 'viewer', scopes: ['read'] });
    expect(signedIn).toEqual({ kind: 'signed-in', identity: { name: 'viewer', scopes: ['read'] } });
    expect(sessionIdentity(signedIn)).toEqual({ name: 'viewer', scopes: ['read'] });
    expect(sessionIdentity({ kind: 'open' })).toBeNull();
  });

  it('a 401 asks for a key, saying why only when one was sent', () => {
    const signedIn: Session = { kind: 'signed-in', identity: { name: 'viewer', scopes: ['read'] } };
    expect(sessionAfterFailure({ kind: 'checking' }, unauthorized, false)).toEqual({ kind: 'key-needed' });
    expect(sessionAfterFailure(signedIn, unauthorized, true)).toEqual({ kind: 'key-needed', problem: unauthorized });
    expect(sessionAfterFailure({ kind: 'open' }, unauthorized, false)).toEqual({ kind: 'key-needed' });
  });

  it('a service that does not answer leaves the console usable and is asked again; other errors change nothing', () => {
    const first = sessionAfterFailure({ kind: 'checking' }, down, false);
    expect(first).toEqual({ kind: 'unknown', attempt: 1 });
    expect(sessionAfterFailure(first, down, false)).toEqual({ kind: 'unknown', attempt: 2 });
    expect(sessionIdentity(first)).toBeNull();
    const signedIn: Session = { kind: 'signed-in', identity: { name: 'viewer', scopes: ['read'] } };
    expect(sessionAfterFailure(signedIn, { status: 403, code: 'FORBIDDEN', message: 'no' }, true)).toBe(signedIn);
  });
});

describe('queue settings form', () => {
  const current = {
    segment_size: 100,
    buffer_segments: 1,
    lock_mode: 'exclusive',
    max_deliveries: null,
    dead_letter_queue: null,
    paused: false,
    retry_delay_seconds: 0,
    retry_backoff: 'exponential',
    retry_delay_max_seconds: 900,
    max_in_flight: null,
    max_pops_per_second: null,
  } as const;
  const controlFields = {
    retry_delay_seconds: '0',
    retry_backoff: 'exponential',
    retry_delay_max_seconds: '900',
    max_in_flight: '',
    max_pops_per_second: '',
  };

  it('fills the form from the settings; no change sends nothing', () => {
    const form = settingsForm(current);
    expect(form).toEqual({ segment_size: '100', buffer_segments: '1', lock_mode: 'exclusive', max_deliveries: '', dead_letter_queue: '', ...controlFields });
    expect(settingsPatch(form, current)).toEqual({ patch: {} });
    expect(settingsForm({ ...current, max_deliveries: 3, dead_letter_queue: 'orders.dead' })).toMatchObject({
      max_deliveries: '3',
      dead_letter_queue: 'orders.dead',
    });
  });

  it('sends only what changed, blanks as none', () => {
    const form = { ...settingsForm(current), segment_size: ' 50 ', lock_mode: 'shared' as const, max_deliveries: '5', dead_letter_queue: ' orders.dead ' };
    expect(settingsPatch(form, current)).toEqual({ patch: { segment_size: 50, lock_mode: 'shared', max_deliveries: 5, dead_letter_queue: 'orders.dead' } });
    const withDlq = { ...current, max_deliveries: 5, dead_letter_queue: 'orders.dead' };
    expect(settingsPatch({ ...settingsForm(withDlq), max_deliveries: '', dead_letter_queue: '' }, withDlq)).toEqual({
      patch: { max_deliveries: null, dead_letter_queue: null },
    });
  });

  it('refuses numbers out of range before sending; the rules that need the queue are left to the service', () => {
    const form = settingsForm(current);
    expect(settingsPatch({ ...form, segment_size: '0' }, current)).toEqual({
      field: 'segment_size',
      problem: 'segment_size must be a whole number from 1 to 10,000.',
    });
    expect(settingsPatch({ ...form, segment_size: '' }, current)).toMatchObject({ field: 'segment_size' });
    expect(settingsPatch({ ...form, buffer_segments: '1001' }, current)).toEqual({
      field: 'buffer_segments',
      problem: 'buffer_segments must be a whole number from 1 to 1,000.',
    });
    expect(settingsPatch({ ...form, max_deliveries: '2.5' }, current)).toMatchObject({ field: 'max_deliveries' });
    // max_deliveries without a dead-letter queue, or the queue as its own: the service answers 400.
    expect(settingsPatch({ ...form, max_deliveries: '3' }, current)).toEqual({ patch: { max_deliveries: 3 } });
  });

  it('a queue that does not exist yet: a blank segment layout keeps the service defaults', () => {
    const form = settingsForm(null);
    expect(form).toEqual({ segment_size: '', buffer_segments: '', lock_mode: 'exclusive', max_deliveries: '', dead_letter_queue: '', ...controlFields });
    expect(settingsPatch(form, null)).toEqual({ patch: {} });
    expect(settingsPatch({ ...form, lock_mode: 'shared', segment_size: '20' }, null)).toEqual({ patch: { segment_size: 20, lock_mode: 'shared' } });
  });

  it('describes all the settings for the result panel', () => {
    const controls =
      'paused false, retry_delay_seconds 0, retry_backoff exponential, retry_delay_max_seconds 900, max_in_flight none, max_pops_per_second none';
    expect(describeSettings({ ...current, lock_mode: 'shared', max_deliveries: 3, dead_letter_queue: 'orders.dead' })).toBe(
      `segment_size 100, buffer_segments 1, lock_mode shared, max_deliveries 3, dead_letter_queue orders.dead, ${controls}`,
    );
    expect(describeSettings(current)).toBe(
      `segment_size 100, buffer_segments 1, lock_mode exclusive, max_deliveries none, dead_letter_queue none, ${controls}`,
    );
  });

  it('the retry and limit settings: only what changed is sent; ranges, and the delay against its maximum, are checked before sending', () => {
    const form = settingsForm(current);
    expect(
      settingsPatch(
        { ...form, retry_delay_seconds: '5', retry_backoff: 'fixed', retry_delay_max_seconds: '60', max_in_flight: '10', max_pops_per_second: '2.5' },
        current,
      ),
    ).toEqual({ patch: { retry_delay_seconds: 5, retry_backoff: 'fixed', retry_delay_max_seconds: 60, max_in_flight: 10, max_pops_per_second: 2.5 } });
    const limited = { ...current, max_in_flight: 10, max_pops_per_second: 2.5 };
    expect(settingsPatch({ ...settingsForm(limited), max_in_flight: '', max_pops_per_second: '' }, limited)).toEqual({
      patch: { max_in_flight: null, max_pops_per_second: null },
    });
    expect(settingsPatch({ ...form, retry_delay_seconds: '901' }, current)).toMatchObject({ field: 'retry_delay_seconds' });
    expect(settingsPatch({ ...form, retry_delay_max_seconds: '0' }, current)).toMatchObject({ field: 'retry_delay_max_seconds' });
    expect(settingsPatch({ ...form, retry_delay_seconds: '61', retry_delay_max_seconds: '60' }, current)).toEqual({
      field: 'retry_delay_seconds',
      problem: 'retry_delay_seconds must not be greater than retry_delay_max_seconds.',
    });
    expect(settingsPatch({ ...form, max_in_flight: '0' }, current)).toMatchObject({ field: 'max_in_flight' });
    expect(settingsPatch({ ...form, max_pops_per_second: '0.05' }, current)).toMatchObject({ field: 'max_pops_per_second' });
    expect(settingsPatch({ ...form, max_pops_per_second: 'fast' }, current)).toMatchObject({ field: 'max_pops_per_second' });
  });

  it('describes the retry delay', () => {
    expect(describeRetry(current)).toBe('none: given back at once');
    expect(describeRetry({ ...current, retry_delay_seconds: 5, retry_backoff: 'fixed' })).toBe('5 s, fixed');
    expect(describeRetry({ ...current, retry_delay_seconds: 5, retry_delay_max_seconds: 300 })).toBe('5 s, doubling up to 300 s');
  });
});

describe('locks and releases', () => {
  it('counts down to the next expiry of a shared queue’s locks', () => {
    expect(nextExpiry({ count: 0, item_count: 0, next_expires_at: null }, 1000)).toEqual({ kind: 'none' });
    expect(nextExpiry({ count: 2, item_count: 5, next_expires_at: 1012.34 }, 1000)).toEqual({ kind: 'in', text: '12.3 s' });
    expect(nextExpiry({ count: 2, item_count: 5, next_expires_at: 1000 }, 1000)).toEqual({ kind: 'due' });
    expect(remaining(125)).toBe('2:05.0');
    expect(remaining(-1)).toBe('expired');
  });

  it('a release says where the items went, in the words of the lock mode', () => {
    expect(releaseMessage({ success: true, items_returned: 1, items_delayed: 0 }, 'exclusive')).toBe('Released: 1 item back at the front of its priority.');
    expect(releaseMessage({ success: true, items_returned: 3, items_delayed: 0 }, 'exclusive')).toBe(
      'Released: 3 items back at the front of their priorities.',
    );
    expect(releaseMessage({ success: true, items_returned: 2, items_delayed: 0 }, 'shared')).toBe('Released: 2 items back in the queue, in push order.');
    expect(releaseMessage({ success: true, items_returned: 1, items_dead_lettered: 2, items_delayed: 0 }, 'shared')).toBe(
      'Released: 1 item back in the queue, in push order; 2 items reached max_deliveries and went to the dead-letter queue.',
    );
    expect(releaseMessage({ success: true, items_returned: 0, items_dead_lettered: 1, items_delayed: 0 }, 'shared')).toBe(
      'Released: 1 item reached max_deliveries and went to the dead-letter queue.',
    );
    expect(releaseMessage({ success: true, items_returned: 0, items_delayed: 0 }, 'shared')).toBe('Released: 0 items back in the queue, in push order.');
    expect(releaseMessage({ success: true, items_returned: 3, items_delayed: 3 }, 'exclusive')).toBe(
      'Released: 3 items back after the retry delay, in push order.',
    );
    expect(releaseMessage({ success: true, items_returned: 2, items_delayed: 1, items_dead_lettered: 1 }, 'shared')).toBe(
      'Released: 1 item back in the queue, in push order; 1 item back after the retry delay, in push order; 1 item reached max_deliveries and went to the dead-letter queue.',
    );
  });
});
