import { Global, Module } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { DatabaseProvider } from './database.provider.js';
import { DatabaseReadyGuard } from './database-ready.guard.js';

@Global()
@Module({
  providers: [DatabaseProvider, DatabaseReadyGuard, { provide: DataSource, inject: [DatabaseProvider], useFactory: (db: DatabaseProvider) => db.dataSource }],
  exports: [DataSource, DatabaseProvider, DatabaseReadyGuard],
})
export class DatabaseModule {}
