import { AsyncLocalStorage } from 'node:async_hooks';
import { Injectable } from '@nestjs/common';
import { DataSource, EntityManager } from 'typeorm';

/**
 * The database side of a turn, so that domain code never holds a connection: repositories
 * ask the unit of work which executor to use. Inside {@link transaction} that is the
 * transaction (carried through every await by AsyncLocalStorage); outside, the pool, where
 * every statement commits on its own.
 */
@Injectable()
export class UnitOfWork {
  private readonly current = new AsyncLocalStorage<EntityManager>();

  constructor(private readonly dataSource: DataSource) {}

  /** Runs `fn` in one transaction: committed when it resolves, rolled back when it throws. */
  transaction<T>(fn: () => Promise<T>): Promise<T> {
    return this.dataSource.transaction((manager) => this.current.run(manager, fn));
  }

  /** Where repositories run their SQL now. */
  get executor(): EntityManager {
    return this.current.getStore() ?? this.dataSource.manager;
  }

  get inTransaction(): boolean {
    return this.current.getStore() !== undefined;
  }
}
