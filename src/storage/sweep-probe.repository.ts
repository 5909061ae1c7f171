import { Injectable } from '@nestjs/common';
import { UnitOfWork } from '../database/unit-of-work.js';
import { DEDUP_QUESTIONS } from './dedup-id.repository.js';
import { DELAY_QUESTIONS } from './delayed-item.repository.js';
import { ENQUEUE_QUESTIONS } from './enqueue-inbox.repository.js';
import { LOCK_QUESTIONS } from './lock.repository.js';
import { SCHEDULE_QUESTIONS } from './schedule.repository.js';

/** Each question a sweep may ask, as its repository words it: `t` is an SQL timestamp. */
const QUESTIONS = { ...LOCK_QUESTIONS, ...DELAY_QUESTIONS, ...DEDUP_QUESTIONS, ...SCHEDULE_QUESTIONS, ...ENQUEUE_QUESTIONS };

/** What a sweep asks before it sweeps: whether it has anything to do. */
export type DueWork = keyof typeof QUESTIONS;
/** A short code of each question, for the prepared statements' names (at most 63 bytes). */
const CODES = new Map(Object.keys(QUESTIONS).map((work, i) => [work, i.toString(36)]));

/** One question of a probe: `work` due at `at` (epoch milliseconds). */
export interface DueQuestion {
  readonly work: DueWork;
  readonly at: number;
}

/**
 * The sweeps' one statement: whether each of them has anything to do, all questions in one
 * `SELECT` of `EXISTS` probes over partial indexes, so that sweeps with nothing to do cost one
 * cheap statement between them, not one each. Each question is worded by the repository whose
 * sweep statement it stands for.
 */
@Injectable()
export class SweepProbeRepository {
  /** Statements sent (observed by the tests). */
  probes = 0;

  constructor(private readonly uow: UnitOfWork) {}

  /** The answer to each question, in order (an empty list sends nothing). */
  async due(questions: readonly DueQuestion[]): Promise<boolean[]> {
    if (questions.length === 0) return [];
    // A question about a time binds it; one that takes none (committed rows waiting) binds nothing,
    // as PostgreSQL refuses a parameter a statement does not use.
    const values: number[] = [];
    const columns = questions.map(({ work, at }, i) => {
      const question: (t: string) => string = QUESTIONS[work];
      if (question.length > 0) values.push(at);
      return `(${question(`to_timestamp($${values.length} / 1000.0)`)}) AS q${i}`;
    });
    this.probes += 1;
    const [row] = await this.uow.autocommit.query<Record<string, boolean>>(
      `SELECT ${columns.join(', ')}`,
      values,
      // One prepared statement per set of questions: a handful at most (the sweeps ask in a fixed order).
      `pushpop_sweep_probe_${questions.map((q) => CODES.get(q.work)).join('')}`,
    );
    return questions.map((_, i) => row?.[`q${i}`] === true);
  }
}
