import type { DataSourceOptions } from 'typeorm';
import { TypeOrmNestLogger } from './typeorm-logger.js';
import { QueueEntity } from './entities/queue.entity.js';
import { SegmentItemEntity } from './entities/segment-item.entity.js';
import { QueueLockEntity } from './entities/queue-lock.entity.js';
import { InitialSchema1764100000000 } from './migrations/1764100000000-initial-schema.js';
import { AckLocks1764100000001 } from './migrations/1764100000001-ack-locks.js';
import { OffloadedSegments1764100000002 } from './migrations/1764100000002-offloaded-segments.js';
import { TurnStatement1764100000003 } from './migrations/1764100000003-turn-statement.js';
import { DelayedItemsAndDedup1764100000004 } from './migrations/1764100000004-delayed-items-and-dedup.js';
import { SharedLocksAndDeadLetters1764100000005 } from './migrations/1764100000005-shared-locks-and-dead-letters.js';
import { LockModeUnchecked1764100000006 } from './migrations/1764100000006-lock-mode-unchecked.js';
import { CanonicalFunctions1764100000007 } from './migrations/1764100000007-canonical-functions.js';
import { QueueControls1764100000008 } from './migrations/1764100000008-queue-controls.js';
import { DeadLetterOrigins1764100000009 } from './migrations/1764100000009-dead-letter-origins.js';
import { SegmentRangeDeletes1764100000010 } from './migrations/1764100000010-segment-range-deletes.js';
import { ItemHeaders1764100000011 } from './migrations/1764100000011-item-headers.js';
import { Schedules1764100000012 } from './migrations/1764100000012-schedules.js';
import { DropOldWriteTurnForms1764100000013 } from './migrations/1764100000013-drop-old-write-turn-forms.js';
import { SqlEnqueue1764100000016 } from './migrations/1764100000016-sql-enqueue.js';
import { SqlEnqueueWakeUps1764100000017 } from './migrations/1764100000017-sql-enqueue-wake-ups.js';
import { ReadyQueues1764100000020 } from './migrations/1764100000020-ready-queues.js';
import { SqlEnqueueDepthCheck1764100000021 } from './migrations/1764100000021-sql-enqueue-depth-check.js';
import { FreshSharedLocks1764100000022 } from './migrations/1764100000022-fresh-shared-locks.js';
import { EnqueueLimitFunctions1764100000023 } from './migrations/1764100000023-enqueue-limit-functions.js';
import { SingleItemSharedLocks1764100000024 } from './migrations/1764100000024-single-item-shared-locks.js';
import { ScheduleEntity } from './entities/schedule.entity.js';
import { DelayedItemEntity } from './entities/delayed-item.entity.js';
import { DedupIdEntity } from './entities/dedup-id.entity.js';
import { OffloadedSegmentEntity } from './entities/offloaded-segment.entity.js';
import { ReturnedItemEntity } from './entities/returned-item.entity.js';
import { SharedLockEntity } from './entities/shared-lock.entity.js';

/** Every entity of the service, for the one options builder below. */
export const ENTITIES = [
  QueueEntity,
  SegmentItemEntity,
  QueueLockEntity,
  OffloadedSegmentEntity,
  DelayedItemEntity,
  DedupIdEntity,
  SharedLockEntity,
  ReturnedItemEntity,
  ScheduleEntity,
];
/** Committed migrations, in order. `synchronize` is never used. */
export const MIGRATIONS = [
  InitialSchema1764100000000,
  AckLocks1764100000001,
  OffloadedSegments1764100000002,
  TurnStatement1764100000003,
  DelayedItemsAndDedup1764100000004,
  SharedLocksAndDeadLetters1764100000005,
  LockModeUnchecked1764100000006,
  CanonicalFunctions1764100000007,
  QueueControls1764100000008,
  DeadLetterOrigins1764100000009,
  SegmentRangeDeletes1764100000010,
  ItemHeaders1764100000011,
  Schedules1764100000012,
  DropOldWriteTurnForms1764100000013,
  SqlEnqueue1764100000016,
  SqlEnqueueWakeUps1764100000017,
  ReadyQueues1764100000020,
  SqlEnqueueDepthCheck1764100000021,
  FreshSharedLocks1764100000022,
  EnqueueLimitFunctions1764100000023,
  SingleItemSharedLocks1764100000024,
];

/**
 * The `application_name` of the service's connections: the pool's, and the notification
 * listener's. `/4` marks this release, which reads packed segments (see
 * `storage/packing-gate.ts`); the previous release's connections are named as in
 * {@link PREVIOUS_RELEASE_CONNECTIONS}.
 */
export const CONNECTION_NAMES = { pool: 'pushpop/4', notifications: 'pushpop-notifications/4' } as const;

/** How the connections of the previous release, which reads no packed segments, name themselves. */
export const PREVIOUS_RELEASE_CONNECTIONS: readonly string[] = ['pushpop', 'pushpop-notifications'];

/** Settings every connection of the service gets, the pool's and the notification listener's. */
export function connectionSettings(schema?: string): { application_name: string; options?: string } {
  return {
    application_name: CONNECTION_NAMES.pool,
    // Every connection resolves pushpop's tables and functions in its schema.
    ...(schema ? { options: `-c search_path=${schema}` } : {}),
  };
}

/** The one place TypeORM options are built, for the service, the CLI data source and the tests. */
export function buildDataSourceOptions(url: string, poolSize = 10, schema?: string): DataSourceOptions {
  return {
    type: 'postgres',
    url,
    ...(schema ? { schema } : {}),
    entities: ENTITIES,
    migrations: MIGRATIONS,
    migrationsTableName: 'migrations',
    synchronize: false,
    migrationsRun: false,
    logging: ['error'],
    logger: new TypeOrmNestLogger(),
    extra: {
      max: poolSize,
      connectionTimeoutMillis: 10_000,
      // A statement stuck for this long means the store is unwell; fail it rather than pile up.
      statement_timeout: 30_000,
      ...connectionSettings(schema),
    },
  };
}
