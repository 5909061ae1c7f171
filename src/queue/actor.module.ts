import { Module } from '@nestjs/common';
import { SegmentStorageModule } from '../segment-storage/segment-storage.module.js';
import { ActorRegistry } from './actor-registry.js';

/** The actor runtime: the registry of queue actors and their turns. */
@Module({ imports: [SegmentStorageModule], providers: [ActorRegistry], exports: [ActorRegistry, SegmentStorageModule] })
export class ActorModule {}
