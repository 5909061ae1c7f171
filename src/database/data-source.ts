import { DataSource } from 'typeorm';
import { buildDataSourceOptions } from './database.options.js';

/** Data source for the TypeORM CLI (`npm run migration:run`, `migration:generate`); needs DATABASE_URL. */
const url = process.env.DATABASE_URL;
if (!url) throw new Error('DATABASE_URL must be set for the TypeORM CLI');
export default new DataSource(buildDataSourceOptions(url, 2, process.env.DATABASE_SCHEMA || undefined));
