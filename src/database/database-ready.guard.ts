import { CanActivate, Injectable } from '@nestjs/common';
import { StoreUnavailableError } from '../common/errors.js';
import { DatabaseProvider } from './database.provider.js';

/** Answers 503 STORE_UNAVAILABLE (with Retry-After) while the database is still starting. */
@Injectable()
export class DatabaseReadyGuard implements CanActivate {
  constructor(private readonly db: DatabaseProvider) {}

  canActivate(): boolean {
    if (!this.db.isReady) throw new StoreUnavailableError();
    return true;
  }
}
