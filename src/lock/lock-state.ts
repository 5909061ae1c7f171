import type { PoppedItem } from '../queue/queue-actor.js';

/** A queue's acknowledgement lock as the actor holds it (times in epoch milliseconds). */
export interface LockState {
  lockId: string;
  state: 'active' | 'expired';
  /** Held items with their original priorities, in pop order (empty once expired). */
  items: PoppedItem[];
  createdAt: number;
  expiresAt: number;
}
