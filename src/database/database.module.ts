import { Global, Module } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { DatabaseProvider } from './database.provider.js';
import { DatabaseReadyGuard } from './database-ready.guard.js';
import { ItemNotifications } from './item-notifications.js';
import { UnitOfWork } from './unit-of-work.js';

@Global()
@Module({
  providers: [
    DatabaseProvider,
    DatabaseReadyGuard,
    UnitOfWork,
    ItemNotifications,
    { provide: DataSource, inject: [DatabaseProvider], useFactory: (db: DatabaseProvider) => db.dataSource },
  ],
  exports: [DataSource, DatabaseProvider, DatabaseReadyGuard, UnitOfWork, ItemNotifications],
})
export class DatabaseModule {}
