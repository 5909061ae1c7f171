import { Module } from '@nestjs/common';
import { SegmentRepository } from './segment.repository.js';

@Module({ providers: [SegmentRepository], exports: [SegmentRepository] })
export class SegmentStorageModule {}
