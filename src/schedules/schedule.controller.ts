import { Body, Controller, Delete, Get, Param, Put, Query, UseGuards } from '@nestjs/common';
import { ApiParam, ApiTags } from '@nestjs/swagger';
import { Scopes } from '../auth/scopes.decorator.js';
import { ApiErrors, AUTH_ERRORS, BODY_ERRORS, mergeErrors, type ErrorCodes } from '../common/api-errors.decorator.js';
import { CountedOperations } from '../common/operations.decorator.js';
import { DatabaseReadyGuard } from '../database/database-ready.guard.js';
import { DeleteScheduleResponseDto, ListSchedulesQueryDto, PutScheduleDto, ScheduleDto, ScheduleListDto } from './dto/schedule.dto.js';
import { ScheduleIdPipe } from './schedule-id.pipe.js';
import { ScheduleService } from './schedule.service.js';

const SCHEDULE_ID_PARAM = {
  name: 'schedule_id',
  description: 'Schedule id: 1-200 characters of A-Z a-z 0-9 . _ : @ - (the rules of a queue id)',
  example: 'nightly-report',
};

/** What every schedule operation can answer besides its own errors. */
const COMMON_SCHEDULE_ERRORS: ErrorCodes = mergeErrors({ 400: ['VALIDATION_FAILED'], 503: ['STORE_UNAVAILABLE'] }, AUTH_ERRORS);
const ONE_SCHEDULE_ERRORS: ErrorCodes = mergeErrors({ 400: ['INVALID_SCHEDULE_ID'] }, COMMON_SCHEDULE_ERRORS);

/** Schedules: recurring pushes by cron expression. Validation only; the service does the work. */
@ApiTags('schedules')
@Controller()
@CountedOperations()
@UseGuards(DatabaseReadyGuard)
export class ScheduleController {
  constructor(private readonly schedules: ScheduleService) {}

  /** The schedules in id order, each with its next and last run; `next_cursor` pages on. */
  @Get('schedules')
  @Scopes('read')
  @ApiErrors(COMMON_SCHEDULE_ERRORS)
  async listSchedules(@Query() query: ListSchedulesQueryDto): Promise<ScheduleListDto> {
    return this.schedules.list(query.limit ?? 1000, query.cursor);
  }

  /** One schedule. */
  @Get('schedules/:schedule_id')
  @Scopes('read')
  @ApiErrors(ONE_SCHEDULE_ERRORS, { 404: ['SCHEDULE_NOT_FOUND'] })
  @ApiParam(SCHEDULE_ID_PARAM)
  async getSchedule(@Param('schedule_id', ScheduleIdPipe) scheduleId: string): Promise<ScheduleDto> {
    return this.schedules.get(scheduleId);
  }

  /**
   * Creates or replaces a schedule: at each time of `cron` in `timezone` it pushes `item` to
   * `queue_id` at `priority`, exactly once however many processes run, within a second of the
   * time. Firings missed while no process ran are made up by one push at the next start. The
   * answer carries `next_run_at`, the first firing after now (null while paused).
   */
  @Put('schedules/:schedule_id')
  @Scopes('admin')
  @ApiErrors(ONE_SCHEDULE_ERRORS, BODY_ERRORS, { 400: ['ITEM_TOO_DEEP'], 413: ['ITEM_TOO_LARGE'] })
  @ApiParam(SCHEDULE_ID_PARAM)
  async putSchedule(@Param('schedule_id', ScheduleIdPipe) scheduleId: string, @Body() body: PutScheduleDto): Promise<ScheduleDto> {
    return this.schedules.put(scheduleId, body);
  }

  /** Deletes a schedule: it fires no more. Items it pushed stay in their queue. */
  @Delete('schedules/:schedule_id')
  @Scopes('admin')
  @ApiErrors(ONE_SCHEDULE_ERRORS, { 404: ['SCHEDULE_NOT_FOUND'] })
  @ApiParam(SCHEDULE_ID_PARAM)
  async deleteSchedule(@Param('schedule_id', ScheduleIdPipe) scheduleId: string): Promise<DeleteScheduleResponseDto> {
    return this.schedules.delete(scheduleId);
  }
}
