import type { DataSourceOptions } from 'typeorm';
import { QueueEntity } from '../segment-storage/queue.entity.js';
import { SegmentItemEntity } from '../segment-storage/segment-item.entity.js';
import { QueueLockEntity } from '../lock/queue-lock.entity.js';
import { InitialSchema1764100000000 } from './migrations/1764100000000-initial-schema.js';
import { AckLocks1764100000001 } from './migrations/1764100000001-ack-locks.js';
import { OffloadedSegments1764100000002 } from './migrations/1764100000002-offloaded-segments.js';
import { OffloadedSegmentEntity } from '../offload/offloaded-segment.entity.js';

/** Every entity of the service, for the one options builder below. */
export const ENTITIES = [QueueEntity, SegmentItemEntity, QueueLockEntity, OffloadedSegmentEntity];
/** Committed migrations, in order. `synchronize` is never used. */
export const MIGRATIONS = [InitialSchema1764100000000, AckLocks1764100000001, OffloadedSegments1764100000002];

/** The one place TypeORM options are built, for the service, the CLI data source and the tests. */
export function buildDataSourceOptions(url: string, poolSize = 10): DataSourceOptions {
  return {
    type: 'postgres',
    url,
    entities: ENTITIES,
    migrations: MIGRATIONS,
    migrationsTableName: 'migrations',
    synchronize: false,
    migrationsRun: false,
    logging: ['error'],
    extra: {
      max: poolSize,
      connectionTimeoutMillis: 10_000,
      // A statement stuck for this long means the store is unwell; fail it rather than pile up.
      statement_timeout: 30_000,
      application_name: 'pushpop',
    },
  };
}
