import { Injectable, OnModuleInit } from '@nestjs/common';
import { ItemNotifications } from '../../database/item-notifications.js';
import { MetricCollectors } from '../../metrics/metric-collectors.js';
import { METRICS } from '../../metrics/metric-names.js';
import { QueueLoads } from './queue-loads.js';

/** The metrics of the wake-ups between processes: notifications sent and received, the queue states they carried, listening or not. */
@Injectable()
export class NotificationMetrics implements OnModuleInit {
  constructor(
    private readonly collectors: MetricCollectors,
    private readonly notifications: ItemNotifications,
    private readonly loads: QueueLoads,
  ) {}

  onModuleInit(): void {
    const { collectors, notifications, loads } = this;
    collectors.counter(METRICS.notifications, () => ({ sent: notifications.sent, received: notifications.received }));
    collectors.counter(METRICS.notificationStates, () => ({ sent: notifications.statesSent, kept: loads.statesOffered, used: loads.statesTaken }));
    // Listening holds only if it does in every worker.
    collectors.gauge(METRICS.notificationsListening, () => (notifications.listening ? 1 : 0), 'min');
  }
}
