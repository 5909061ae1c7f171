import { PushpopError } from '../common/errors.js';

/** `/admin/` was asked for, but `apps/admin/dist` holds no build (e.g. the service runs from source). */
export class AdminNotBuiltError extends PushpopError {
  constructor() {
    super(503, 'ADMIN_NOT_BUILT', 'run npm run build');
  }
}
