import { Module } from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';
import { SegmentStorageModule } from '../segment-storage/segment-storage.module.js';
import { HealthController } from './health.controller.js';

@Module({ imports: [TerminusModule.forRoot({ logger: false }), SegmentStorageModule], controllers: [HealthController] })
export class HealthModule {}
