import type pg from 'pg';
import { lazyPackage } from '../util/index.js';

/** node-postgres, loaded when a store first opens on Postgres: a runtime on SQLite starts without it (~60 ms). */
export const pgDriver = lazyPackage<typeof pg>('pg');
