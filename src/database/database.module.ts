import { Global, Module } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { DatabaseProvider } from './database.provider.js';

@Global()
@Module({
  providers: [
    DatabaseProvider,
    { provide: DataSource, inject: [DatabaseProvider], useFactory: (db: DatabaseProvider) => db.connect() },
  ],
  exports: [DataSource],
})
export class DatabaseModule {}
