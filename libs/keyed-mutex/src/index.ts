export { KeyedMutex, type KeyedMutexOptions } from './keyed-mutex.js';
export { KeyedMutexBusyError } from './errors.js';
