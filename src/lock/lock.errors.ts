import { PushpopError } from '../common/errors.js';

/** Errors of the lock endpoints carry `success: false`, as the contract's acknowledge table shows. */
export class LockError extends PushpopError {
  constructor(status: number, errorCode: string, message: string) {
    super(status, errorCode, message, { success: false });
  }
}

export class LockIdRequiredError extends LockError {
  constructor() {
    super(400, 'LOCK_ID_REQUIRED', 'lock_id is required');
  }
}

export class LockNotFoundError extends LockError {
  constructor() {
    super(404, 'LOCK_NOT_FOUND', 'No active lock found');
  }
}

export class LockExpiredError extends LockError {
  constructor() {
    super(410, 'LOCK_EXPIRED', 'Lock has expired');
  }
}

export class InvalidLockIdError extends LockError {
  constructor() {
    super(400, 'INVALID_LOCK_ID', 'Invalid lock_id');
  }
}

export class QueueLockedError extends PushpopError {
  constructor(expiresAt: number) {
    super(423, 'QUEUE_LOCKED', 'Queue is locked pending acknowledgement', { lock_expires_at: expiresAt / 1000 });
  }
}
