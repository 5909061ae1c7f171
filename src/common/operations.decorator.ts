import { SetMetadata } from '@nestjs/common';

/** Metadata key of {@link CountedOperations}. */
export const COUNTED_OPERATIONS = 'pushpop:counted-operations';

/**
 * Marks a controller whose handlers are queue operations: the metrics module counts and times
 * each by its handler name (the OpenAPI operationId). The controller does not know about
 * metrics; metrics only reads this mark.
 */
export const CountedOperations = (): ClassDecorator => SetMetadata(COUNTED_OPERATIONS, true);
