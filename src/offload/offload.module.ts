import { Module } from '@nestjs/common';
import { SegmentMover } from '../queue/queue-actor.js';
import { DatabaseOffloadStore } from './database-offload-store.repository.js';
import { OffloadPolicy } from './offload.policy.js';
import { OffloadStore } from './offload-store.js';

/** Offloading: the store (swap the adapter here) and the policy that moves segments. */
@Module({
  providers: [
    { provide: OffloadStore, useClass: DatabaseOffloadStore },
    OffloadPolicy,
    { provide: SegmentMover, useExisting: OffloadPolicy },
  ],
  exports: [OffloadStore, OffloadPolicy, SegmentMover],
})
export class OffloadModule {}
